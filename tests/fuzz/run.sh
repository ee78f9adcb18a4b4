#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/fuzzing.md) in build-fuzz
# with clang, runs each over its committed corpus, then fuzzes each for N
# seconds (default 20), or for N inputs from a fixed seed (--runs N: the
# same inputs every time, which is what CI runs, so that a red CI is one a
# developer reproduces with the same command). Fails on any crash,
# sanitizer report or timeout; the input that found it is left in
# build-fuzz/fuzz-artifacts/.
#   tests/fuzz/run.sh [seconds]
#   tests/fuzz/run.sh --runs N
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=20
limit=()
if [ "${1:-}" = "--runs" ]; then
  limit=(-runs="${2:?--runs needs a count}" -seed=1)
  what="${2} inputs, seed 1"
else
  secs=${1:-20}
  limit=(-max_total_time="$secs")
  what="${secs} s"
fi
BUILD=${BUILD_FUZZ:-build-fuzz}
for tool in clang clang++; do
  if ! command -v "$tool" >/dev/null; then
    echo "tests/fuzz/run.sh: $tool not found: the fuzz targets need clang's libFuzzer" \
      "(apt install clang; .ci/quickstart installs it)" >&2
    exit 1
  fi
done
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DWEFT_FUZZ=ON -DWEFT_WERROR=ON -DWEFT_WITH_CUDA=OFF -DWEFT_BUILD_TESTS=OFF \
  -DWEFT_BUILD_PERF=OFF -DWEFT_BUILD_TORCH=OFF -DWEFT_BUILD_NCCL_SHIM=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target weft-fuzz

art="$BUILD/fuzz-artifacts"
mkdir -p "$art"
fail=0
for corpus in tests/fuzz/corpus/*/; do
  t=$(basename "$corpus")
  bin="$BUILD/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "no target for corpus $corpus" >&2; fail=1; continue; }
  work="$BUILD/fuzz-work/$t"  # what this run adds; the committed corpus stays as it is
  rm -rf "$work"              # (emptied first: each run starts from the committed corpus)
  mkdir -p "$work"
  log="$BUILD/fuzz-$t.log"
  if "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$art/$t-" "$work" "$corpus" >"$log" 2>&1; then
    echo "fuzz_$t: ok ($(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs; ${what})"
  else
    echo "fuzz_$t: FAILED (log $log, inputs in $art):" >&2
    grep -E 'ERROR|runtime error|SUMMARY|Test unit' "$log" | head -5 >&2
    fail=1
  fi
done
exit $fail
