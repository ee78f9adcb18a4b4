// [cuda] tests: whether a CUDA device is here, and a skip that says why not.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "cuda/runtime.h"

// True when a device is usable; else prints "SKIP: <why>" (Catch2 v2 has no
// skip) and the test returns without asserting anything device-side.
inline bool haveDevice() {
  weft::cuda::CudaState s = weft::cuda::cudaState();
  if (s.usable) return true;
  WARN("SKIP [cuda]: " << s.why << "; this test needs a CUDA device");
  return false;
}
