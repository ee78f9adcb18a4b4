#!/usr/bin/env bash
# The NCCL shim's section of the GPU check, for perf/gpu-check.sh to run
# (perf/ belongs to the benchmark work; it calls this file):
#
#   bash tests/shim/gpu_check_shim.sh [build-dir]
#
# PyTorch's "nccl" backend through LD_PRELOAD of libweft-nccl.so, 2 processes
# on one GPU (tests/shim/torch_check.py), after the CPU-side shim tests.
# Exit status: 0 passed, 1 failed, 77 skipped (no GPU, no torch, or a weft
# without CUDA support; WEFT_SHIM_REQUIRE_CUDA=1 turns the last into a failure).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shim=$build/libweft-nccl.so
if [ ! -f "$shim" ]; then
  echo "gpu-check shim: $shim is missing (configure with -DWEFT_BUILD_NCCL_SHIM=ON and build)"
  exit 1
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check shim: SKIP, no GPU"
  exit 77
fi
echo "== gpu-check shim: CPU-side shim tests"
(cd "$build" && ctest -R '^shim\.' -E '^shim\.torch$' --output-on-failure) || exit 1
echo "== gpu-check shim: PyTorch through LD_PRELOAD=$shim"
python3 "$here/torch_check.py" --shim "$shim"
