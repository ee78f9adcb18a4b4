#!/usr/bin/env bash
# The GPU check of weft's CUDA support, for a machine with one (or more)
# NVIDIA GPUs. One script; its steps' bounds add up to 11.5 minutes:
#
#   bash perf/gpu-check.sh            # results under $OUT when set, else build-gpu/gpu-check
#   bash perf/gpu-check.sh --tree-hash   # the sources' hash, as the summary prints it
#
# On a lent machine whose tool brings back few files and counts every
# second (the device tool): first, on a Debian machine, `bash
# perf/gpu-deps.sh` (packs hwloc, Catch2, pkgconf, NCCL headers into
# .gpudeps/, carried along), then there
#
#   GPU_CHECK_PACK=1 GPU_CHECK_BUDGET_S=270 bash perf/gpu-check.sh
#
# which logs under $BUILD/gpu-check and leaves only summary.txt and
# logs.tgz in $OUT; sections that would start past the budget are skipped
# (noted), so the pack always happens within it.
#
#  1. builds weft with CUDA (Release) in $BUILD (default build-gpu);
#  2. runs every [cuda] test (kernels against the host executor, memory
#     kinds, stream-ordered collectives on device memory, the cuda_ipc
#     transport) and the CPU-side CUDA tests; a [cuda] test that reports
#     SKIP on this machine fails;
#  3. weft-cuda-bw: the 2-input reduce of 1 GiB against cudaMemcpy D2D;
#  4. weft-perf -G (device buffers) for 1, 2 and 4 ranks as processes on
#     the one GPU through the direct device path (WEFT_CUDA_IPC=on: cuda_ipc
#     between the ranks, GPU kernels, no staging; sendrecv of one rank with
#     itself stays staged), every collective, #wrong checked (must be 0);
#     the INIT / COLL log must say the device path was on and taken;
#  5. GPU local work (WEFT_CUDA_LOCAL_WORK=gpu): the stream-ordered [cuda]
#     tests again with every reduce / copy / divide of the schedules as
#     kernels on the comm's stream, then weft-perf -G for 2 and 4 ranks as
#     processes over tcp with the ring in 256 KiB chunks (the inter-host
#     pipeline: GPU reductions while other chunks are on the wire), #wrong
#     checked. (WEFT_TRANSPORTS=tcp leaves cuda_ipc out: staged.)
#  6. the NCCL shim's GPU section (tests/shim/gpu_check_shim.sh: PyTorch
#     through the shim), now required to run on device memory;
#  7. the torch backend "weft" on CUDA tensors (tests/python/test_cuda.py).
#
# Every section has its own time bound and log; summary.txt
# lists each section's outcome. Exit status: 0 when every section passed,
# 1 otherwise, 2 when the machine has no GPU or the build has no CUDA.
# The step functions run through `setsid bash -c` (exported), hence:
# shellcheck disable=SC2317
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
# The sources' own hash (a copied tree may carry a stale .git): compare
# with `bash perf/gpu-check.sh --tree-hash` where the tree came from.
tree_hash() {
  find include src kernels transports tests perf -type f \( -name '*.cc' -o -name '*.cu' -o \
    -name '*.h' -o -name '*.c' -o -name CMakeLists.txt \) -print0 | sort -z | xargs -0 cat |
    sha1sum | cut -c1-12
}
if [ "${1:-}" = --tree-hash ]; then
  tree_hash
  exit 0
fi
BUILD=${BUILD:-$here/build-gpu}
OUTDIR=${OUT:-$BUILD/gpu-check}
BUDGET=${GPU_CHECK_BUDGET_S:-0}  # seconds; 0: no budget
if [ "${GPU_CHECK_PACK:-0}" = 1 ] && [ -n "${OUT:-}" ]; then
  PACK_TO=$OUT
  mkdir -p "$PACK_TO"
  OUTDIR=$BUILD/gpu-check
  rm -rf "$OUTDIR"
  # shellcheck disable=SC2064
  trap "cp '$OUTDIR/summary.txt' '$PACK_TO/' 2>/dev/null; tar czf '$PACK_TO/logs.tgz' -C '$BUILD' gpu-check" EXIT
fi
mkdir -p "$OUTDIR"
SUMMARY=$OUTDIR/summary.txt
: >"$SUMMARY"
START=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 4)
failed=0

note() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
# section NAME SECONDS CMD...: runs CMD (a program or one of the exported
# functions below) in a process group of its own (forked ranks included),
# logging to $OUTDIR/NAME.log. Past SECONDS, the stacks of every process of
# the group are written to $OUTDIR/NAME.stacks (cuda-gdb, or gdb, when
# there is one: a hang's diagnosis), then the group is killed.
section() {
  local name=$1 limit=$2 t0 rc dt pid
  shift 2
  t0=$(date +%s)
  if [ "$BUDGET" -gt 0 ] && [ $((t0 - START + limit)) -gt "$BUDGET" ]; then
    note "SKIP  $name: its bound (${limit}s) would pass GPU_CHECK_BUDGET_S=$BUDGET"
    failed=1
    return 125
  fi
  echo "== $name (bound ${limit}s)"
  setsid bash -c '"$@"' "$name" "$@" >"$OUTDIR/$name.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$limit" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    group_stacks "$pid" >"$OUTDIR/$name.stacks" 2>&1
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 2
    kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid"
    rc=124
  else
    wait "$pid"
    rc=$?
  fi
  dt=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then
    note "PASS  $name (${dt}s)"
  elif [ $rc -eq 124 ]; then
    note "FAIL  $name: ran past ${limit}s (log: $OUTDIR/$name.log, stacks: $OUTDIR/$name.stacks)"
    failed=1
  else
    note "FAIL  $name: exit $rc (log: $OUTDIR/$name.log)"
    failed=1
  fi
  tail -n 15 "$OUTDIR/$name.log"
  return "$rc"
}
# The threads' stacks of a process group's programs (not its shells), at
# most 6 processes, each bounded.
group_stacks() {
  local dbg p n=0
  dbg=$(command -v cuda-gdb || command -v gdb) || {
    echo "no cuda-gdb or gdb here: no stacks"
    return
  }
  for p in $(pgrep -g "$1"); do
    case $(cat "/proc/$p/comm" 2>/dev/null) in bash | sleep | timeout | env | "") continue ;; esac
    n=$((n + 1))
    [ $n -le 6 ] || break
    echo "---- pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)"
    timeout 40 "$dbg" -p "$p" -batch -ex 'set pagination off' -ex 'thread apply all bt 30' 2>&1 |
      grep -E '^(Thread|#)'
  done
}

note "# weft gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), sources $(tree_hash), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if ! nvidia-smi -L >"$OUTDIR/nvidia-smi.txt" 2>&1; then
  note "SKIP: nvidia-smi finds no GPU here; nothing was run"
  exit 2
fi
nvidia-smi >>"$OUTDIR/nvidia-smi.txt" 2>&1
note "# $(head -n 1 "$OUTDIR/nvidia-smi.txt")"

[ -x /usr/local/cuda/bin/nvcc ] && export PATH=$PATH:/usr/local/cuda/bin
# The machine: compilers, RDMA devices (issue 8's verbs transport runs
# only where one exists), what the build will find.
{
  echo "# machine: $(nproc) cpus; $(g++ --version 2>&1 | head -n 1); $(cmake --version 2>&1 | head -n 1)"
  echo "# $(nvcc --version 2>&1 | tail -n 1)"
  rdma=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
  echo "# RDMA devices (/sys/class/infiniband): ${rdma:-none}"
} | tee -a "$SUMMARY"

# ---- 0. Dependencies ---------------------------------------------------------
# A GPU machine with no package registry may lack hwloc, Catch2 or
# pkg-config: perf/gpu-deps.sh packs them into .gpudeps/ (carried there);
# each is used only where the machine has none of its own.
deps=$here/.gpudeps
if [ -d "$deps/usr" ]; then
  pc_dir=$deps/usr/lib/x86_64-linux-gnu/pkgconfig
  sed -i "s|^prefix=.*|prefix=$deps/usr|" "$pc_dir/hwloc.pc"
  if ! command -v pkg-config >/dev/null 2>&1; then
    export PKG_CONFIG=$deps/usr/bin/pkgconf
    export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    note "NOTE  pkg-config: the carried pkgconf"
  fi
  if ! ${PKG_CONFIG:-pkg-config} --exists hwloc 2>/dev/null; then
    export PKG_CONFIG_PATH=$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$deps/usr/lib/x86_64-linux-gnu:"*) ;;
      *) export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
    esac
    ldconfig -p 2>/dev/null | grep -q 'libudev\.so\.1 ' ||
      export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$deps/fallback/usr/lib/x86_64-linux-gnu
    note "NOTE  hwloc: the carried libhwloc $(${PKG_CONFIG:-pkg-config} --modversion hwloc 2>&1)"
  fi
  if [ ! -e /usr/include/catch2/catch.hpp ]; then
    export CMAKE_PREFIX_PATH=$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    note "NOTE  Catch2: the carried Catch2 v2"
  fi
fi

# The NCCL shim needs nccl.h beside the toolkit's headers (src/shim).
nccl_inc=
cuda_inc=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")/include
if [ -e "$cuda_inc/nccl.h" ]; then
  nccl_inc=$cuda_inc
elif [ -e "$deps/nccl/nccl.h" ] && [ -e "$cuda_inc/cuda_runtime.h" ]; then
  # The toolkit's headers with the carried nccl.h among them (links).
  nccl_inc=$BUILD/nccl-include
  mkdir -p "$nccl_inc"
  ln -sf "$cuda_inc"/* "$nccl_inc/"
  for f in "$deps"/nccl/*; do
    rm -rf "${nccl_inc:?}/$(basename "$f")"
    cp -r "$f" "$nccl_inc/"
  done
  note "NOTE  nccl.h: the carried one ($(grep -m1 -oE 'NCCL_VERSION_CODE +[0-9]+' "$nccl_inc/nccl.h"))"
fi
export nccl_inc

# ---- 1. Build --------------------------------------------------------------
tests=ON
if [ ! -e /usr/include/catch2/catch.hpp ] && [ ! -e "$deps/usr/include/catch2/catch.hpp" ]; then
  tests=OFF
  note "NOTE  Catch2 is not installed: tests are not built (apt-get install catch2, or perf/gpu-deps.sh), sections 2 skipped"
fi
# No -Werror here: this machine's compilers are not CI's; the warnings are
# counted in the summary instead (CI builds with -Werror).
build() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DWEFT_WITH_CUDA=ON \
    -DWEFT_BUILD_TESTS="$tests" ${nccl_inc:+-DWEFT_NCCL_INCLUDE_DIR="$nccl_inc"} &&
    cmake --build "$BUILD" -j"$JOBS"
}
export BUILD JOBS tests
export -f build
section build 140 build || { note "the build failed: nothing else runs"; exit 1; }
note "# build: $(grep -c 'warning:' "$OUTDIR/build.log") compiler warnings (see build.log)"
if [ ! -x "$BUILD/perf/weft-cuda-bw" ]; then
  note "FAIL  the build has no CUDA (nvcc not found by CMake?): see $OUTDIR/build.log"
  exit 2
fi

# ---- 2. Tests ------------------------------------------------------------
# The [cuda] tests print "SKIP [cuda]" (and pass) without a device; here a
# skip means the device was not usable, which is a failure.
# bounded SECONDS CMD...: runs CMD in a process group of its own; past
# SECONDS, prints the stacks of its processes and kills the group (124).
bounded() {
  local limit=$1 t0 pid
  shift
  t0=$(date +%s)
  setsid "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$limit" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "!! $* ran past ${limit}s; its stacks:"
    group_stacks "$pid"
    kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid"
    return 124
  fi
  wait "$pid"
}
cuda_tests() {
  local rc=0 name spec
  echo "-- weft-cuda-tests (all, [cuda] included)"
  bounded 60 "$BUILD/tests/weft-cuda-tests" --durations yes || rc=1
  # One process per case, each bounded: a hang names its case (and leaves
  # its stacks) without hiding the cases after it; a threads case
  # initializes CUDA, and the processes cases fork their ranks.
  for t in weft-cuda-coll-tests weft-transport-tests shim/weft-shim-tests; do
    echo "-- $t: the [cuda] cases"
    while IFS= read -r name; do
      [ -n "$name" ] || continue
      echo "-- $t: $name"
      # A test spec splits at commas and reads brackets as tags: escaped.
      spec=$(printf '%s' "$name" | sed 's/[],[]/\\&/g')
      bounded 40 "$BUILD/tests/$t" "$spec" --durations yes || rc=1
    done < <("$BUILD/tests/$t" --list-test-names-only '[cuda]')
  done
  echo "-- weft-cuda-coll-tests: the other cases"
  bounded 60 "$BUILD/tests/weft-cuda-coll-tests" '~[cuda]' || rc=1
  return "$rc"
}
export -f cuda_tests bounded group_stacks
if [ $tests = ON ]; then
  section cuda-tests 240 cuda_tests
  if grep -q "SKIP \[cuda\]" "$OUTDIR/cuda-tests.log"; then
    note "FAIL  cuda-tests: a [cuda] test skipped on this GPU machine:"
    grep "SKIP \[cuda\]" "$OUTDIR/cuda-tests.log" | sort -u | head -n 3 | tee -a "$SUMMARY"
    failed=1
  fi
fi

# ---- 3. Kernel bandwidth -------------------------------------------------
section cuda-bw 30 "$BUILD/perf/weft-cuda-bw" $((1 << 30)) 20
grep -E "memcpy|reduce 2|target" "$OUTDIR/cuda-bw.log" >>"$SUMMARY"

# ---- 4. weft-perf on device buffers, 1 / 2 / 4 ranks on the one GPU ------
# Every collective up to 16 MiB with every datatype checked at small sizes,
# and allreduce float up to 256 MiB for bandwidth. #wrong must be 0
# (weft-perf exits 1 otherwise).
perf_ranks() {
  local n=$1 rc=0 c
  local P="$BUILD/perf/weft-perf"
  # weft-perf opens the device after weft_comm_init_rank: "on" sets the
  # device path up anyway (auto would see a process without CUDA yet).
  export WEFT_CUDA_IPC=on WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT,COLL
  echo "-- allreduce float 8 B .. 256 MiB"
  "$P" allreduce -np "$n" -G 1 -b 8 -e 256M -f 4 -n 10 -w 2 -T 1 || rc=1
  echo "-- allreduce every datatype and op, 1 KiB .. 1 MiB"
  "$P" allreduce -np "$n" -G 1 -b 1K -e 1M -f 32 -n 2 -w 1 -d all -o all || rc=1
  for c in broadcast reduce allgather reduce_scatter alltoall sendrecv; do
    echo "-- $c 8 B .. 16 MiB"
    "$P" "$c" -np "$n" -G 1 -b 8 -e 16M -f 8 -n 5 -w 1 -T 1 || rc=1
  done
  return "$rc"
}
export -f perf_ranks
# ---- 4a. The default: device buffers staged (WEFT_CUDA_IPC unset) ---------
perf_staged() {
  local rc=0 n c
  local P="$BUILD/perf/weft-perf"
  export WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT,COLL
  unset WEFT_CUDA_IPC
  for n in 2 4; do
    echo "-- np $n, staged: allreduce float 8 B .. 64 MiB"
    "$P" allreduce -np "$n" -G 1 -b 8 -e 64M -f 8 -n 5 -w 1 -T 1 || rc=1
    for c in broadcast allgather reduce_scatter alltoall; do
      echo "-- np $n, staged: $c 8 B .. 4 MiB"
      "$P" "$c" -np "$n" -G 1 -b 8 -e 4M -f 16 -n 3 -w 1 -T 1 || rc=1
    done
  done
  return "$rc"
}
export -f perf_staged
section perf-device-staged 60 perf_staged
grep -E "Out of bounds" "$OUTDIR/perf-device-staged.log" | sort | uniq -c |
  sed "s/^/staged: /" >>"$SUMMARY"
if grep -q "stream-ordered [a-z_]*: direct" "$OUTDIR/perf-device-staged.log" ||
  ! grep -q "stream-ordered allreduce: staged" "$OUTDIR/perf-device-staged.log"; then
  note "FAIL  perf-device-staged: the default did not stage every call (see its log)"
  failed=1
fi

# ---- 4b. The direct path (WEFT_CUDA_IPC=on) ---------------------------------
for n in 1 2 4; do
  section "perf-device-np$n" 30 perf_ranks "$n"
  grep -E "Out of bounds|Avg bus" "$OUTDIR/perf-device-np$n.log" | sed "s/^/np $n: /" >>"$SUMMARY"
  # The device path must have been set up and taken (docs/cuda.md).
  want_on="device path (cuda_ipc, direct device ops): on: all $n ranks"
  want_direct="direct: all $n ranks on this host reach each other by CUDA IPC"
  [ "$n" = 1 ] && want_direct="direct: one rank, device buffers"
  for w in "$want_on" "$want_direct"; do
    if ! grep -qF "$w" "$OUTDIR/perf-device-np$n.log"; then
      note "FAIL  perf-device-np$n: the log never says \"$w\""
      failed=1
    fi
  done
  grep -hoE "stream-ordered [a-z_]+: (direct|staged)[^(]*" "$OUTDIR/perf-device-np$n.log" |
    sort | uniq -c | sed "s/^/np $n: /" | head -n 8 >>"$SUMMARY"
done

# ---- 5. GPU local work -----------------------------------------------------
gpu_local_work() {
  local rc=0 n c
  local P="$BUILD/perf/weft-perf"
  export WEFT_CUDA_LOCAL_WORK=gpu WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=INIT
  if [ "$tests" = ON ]; then
    echo "-- weft-cuda-coll-tests [cuda] with WEFT_CUDA_LOCAL_WORK=gpu"
    bounded 50 "$BUILD/tests/weft-cuda-coll-tests" "[cuda]" --durations yes || rc=1
  fi
  for n in 2 4; do
    echo "-- np $n over tcp, ring, 256 KiB chunks: allreduce float 8 B .. 64 MiB"
    env WEFT_TRANSPORTS=tcp WEFT_SOCKET_IFNAME=lo WEFT_ALGO=ring WEFT_CHUNK_BYTES=256K \
      "$P" allreduce -np "$n" -G 1 -b 8 -e 64M -f 8 -n 5 -w 1 -T 1 || rc=1
    echo "-- np $n: allreduce every datatype and op (AVG's divide on the GPU), 1 KiB .. 1 MiB"
    env WEFT_TRANSPORTS=tcp WEFT_SOCKET_IFNAME=lo WEFT_ALGO=ring \
      "$P" allreduce -np "$n" -G 1 -b 1K -e 1M -f 32 -n 2 -w 1 -d all -o all || rc=1
    for c in reduce_scatter reduce; do
      echo "-- np $n: $c 8 B .. 4 MiB"
      env WEFT_TRANSPORTS=tcp WEFT_SOCKET_IFNAME=lo \
        "$P" "$c" -np "$n" -G 1 -b 8 -e 4M -f 8 -n 3 -w 1 -T 1 || rc=1
    done
  done
  return "$rc"
}
export -f gpu_local_work
section gpu-local-work 90 gpu_local_work
grep -E "Out of bounds|Avg bus|local steps|GPU local" "$OUTDIR/gpu-local-work.log" | sort -u |
  head -n 12 >>"$SUMMARY"
if ! grep -q "local steps: GPU kernels" "$OUTDIR/gpu-local-work.log"; then
  note "FAIL  gpu-local-work: the log never says the local steps ran as GPU kernels"
  failed=1
fi

# ---- 6. The NCCL shim with PyTorch ---------------------------------------
# as_skippable CMD...: CMD's exit 77 ("skipped": no torch, no GPU) becomes a
# success that says so; skip_note NAME notes it in the summary.
as_skippable() {
  "$@"
  local rc=$?
  if [ "$rc" -eq 77 ]; then
    echo "SKIPPED (exit 77)"
    return 0
  fi
  return "$rc"
}
skip_note() {
  if grep -q "SKIPPED (exit 77)" "$OUTDIR/$1.log"; then
    note "NOTE  $1 was skipped: $(grep -m1 SKIP "$OUTDIR/$1.log")"
  fi
}
shim_check() { as_skippable env WEFT_SHIM_REQUIRE_CUDA=1 bash tests/shim/gpu_check_shim.sh "$BUILD"; }
export -f as_skippable shim_check
if [ $tests = ON ]; then
  section shim-torch 40 shim_check
  skip_note shim-torch
fi

# ---- 7. The torch backend on CUDA tensors ---------------------------------
# weft._C built against this machine's torch, then tests/python/test_cuda.py
# (2 processes on GPU 0).
torch_backend() {
  python3 -c 'import torch' 2>/dev/null || { echo "SKIPPED (exit 77): python3 has no torch"; return 0; }
  cmake -S . -B "$BUILD" -DWEFT_BUILD_TORCH=ON -DPython3_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$BUILD" -j"$JOBS" --target weft_torch_ext || return 1
  as_skippable env PYTHONPATH="$BUILD/python:tests/python" OMP_NUM_THREADS=1 \
    python3 tests/python/test_cuda.py
}
export -f torch_backend
section torch-backend-cuda 120 torch_backend
skip_note torch-backend-cuda

note "# total $(elapsed)s; $( [ $failed = 0 ] && echo 'all sections passed' || echo 'FAILURES above')"
exit $failed
