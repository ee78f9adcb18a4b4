// [cuda] tests: whether a CUDA device is here, a skip that says why not, and
// TRY_CUDA.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "cuda/runtime.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>

// In a test body that returns std::string: a failing CUDA call returns its
// text and CUDA's error.
#define TRY_CUDA(call)                                                                \
  do {                                                                                \
    cudaError_t _e = (call);                                                          \
    if (_e != cudaSuccess) return std::string(#call) + ": " + cudaGetErrorString(_e); \
  } while (0)
#endif

// True when a device is usable; else prints "SKIP: <why>" (Catch2 v2 has no
// skip) and the test returns without asserting anything device-side.
inline bool haveDevice() {
  weft::cuda::CudaState s = weft::cuda::cudaState();
  if (s.usable) return true;
  WARN("SKIP [cuda]: " << s.why << "; this test needs a CUDA device");
  return false;
}
