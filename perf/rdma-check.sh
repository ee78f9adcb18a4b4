#!/usr/bin/env bash
# The RDMA check of weft's network transports, for a machine with an RDMA
# device (InfiniBand or RoCE) and rdma-core installed. One command:
#
#   bash perf/rdma-check.sh          # results under $OUT when set, else build-rdma/rdma-check
#
#  1. lists the RDMA devices (ibv_devinfo) and what UCX sees (ucx_info -d);
#  2. builds weft (Release, tests on) in $BUILD (default build-rdma);
#  3. the transport conformance suite, which includes ibverbs (and ucx over
#     tcp and shared memory) where ibv_get_device_list finds a device;
#  4. every collective over ibverbs, 2 and 4 ranks as processes through the
#     device's loopback (tests/coll/test_ibverbs.cc), and over ucx;
#  5. weft-perf allreduce, 8 B to 64 MiB, 2 ranks, over ibverbs and over ucx
#     with UCX's own choice of transports (RDMA here), results checked
#     (#wrong must be 0).
#
# Every section has its own time bound and log; summary.txt lists each
# section's outcome. Exit status: 0 when every section passed, 1 otherwise,
# 2 when the machine has no RDMA device or the build has no ibverbs
# transport (nothing was checked: say so, never that it ran).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
BUILD=${BUILD:-$here/build-rdma}
OUTDIR=${OUT:-$BUILD/rdma-check}
mkdir -p "$OUTDIR"
SUMMARY=$OUTDIR/summary.txt
: >"$SUMMARY"
failed=0

note() { echo "$*" | tee -a "$SUMMARY"; }
# section NAME SECONDS CMD...: runs CMD with a time bound, logging to
# $OUTDIR/NAME.log, and notes whether it passed.
section() {
  local name=$1 secs=$2
  shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$secs" "$@" >"$OUTDIR/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    note "PASS  $name ($((SECONDS - t0)) s)"
  else
    if [ $rc -eq 124 ]; then
      note "FAIL  $name: timed out after $secs s"
    else
      note "FAIL  $name: exit $rc (log: $OUTDIR/$name.log)"
    fi
    failed=1
  fi
}

devices=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
if [ -z "$devices" ]; then
  note "SKIPPED: no RDMA device (/sys/class/infiniband is empty or missing); nothing was checked"
  exit 2
fi
note "RDMA devices: $devices"
command -v ibv_devinfo >/dev/null && ibv_devinfo >"$OUTDIR/ibv_devinfo.txt" 2>&1
command -v ucx_info >/dev/null && ucx_info -d >"$OUTDIR/ucx_info.txt" 2>&1

section build 1200 bash -c "cmake -S '$here' -B '$BUILD' -DCMAKE_BUILD_TYPE=Release \
  -DWEFT_BUILD_TESTS=ON && cmake --build '$BUILD' -j $(nproc)"
# transports/optional.cmake builds ibverbs where it finds libibverbs.
if ! grep -Eq '^IBVERBS_LIBRARY:FILEPATH=/' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  note "SKIPPED: this build has no ibverbs transport (rdma-core's libibverbs-dev not found)"
  exit 2
fi

section conformance 900 "$BUILD/tests/weft-transport-tests" "[transport]" -s -r compact
grep -h 'ibverbs' "$OUTDIR/conformance.log" | grep -i -m3 'skipped\|present' >>"$SUMMARY"
section coll-ibverbs 900 "$BUILD/tests/weft-coll-tests" "[ibverbs]" -s -r compact
if grep -q 'ibverbs collectives skipped' "$OUTDIR/coll-ibverbs.log"; then
  note "FAIL  coll-ibverbs: skipped although devices are listed"
  failed=1
fi
section coll-ucx 900 "$BUILD/tests/weft-coll-tests" "[ucx]"

# perf NAME ENV...: weft-perf allreduce over the transport the env selects;
# fails on any wrong element.
perf() {
  local name=$1
  shift
  section "perf-$name" 600 env "$@" "$BUILD/perf/weft-perf" allreduce -np 2 -b 8 -e 64M -f 2
  awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != 0 || $13 != 0) {bad=1} END {exit bad}' \
    "$OUTDIR/perf-$name.log" || { note "FAIL  perf-$name: wrong results"; failed=1; }
  grep -E '^ +(8|65536|1048576|67108864) ' "$OUTDIR/perf-$name.log" | sed "s/^/  $name /" >>"$SUMMARY"
}
perf ibverbs WEFT_TRANSPORTS=ibverbs
perf ucx WEFT_TRANSPORTS=ucx

if [ $failed -eq 0 ]; then note "ALL PASSED"; else note "SOME FAILED"; fi
exit $failed
