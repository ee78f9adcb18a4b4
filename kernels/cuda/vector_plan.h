// How an element-wise kernel splits `count` elements into a scalar head, a
// body of 16-byte vectors and a scalar tail. Shared by the CUDA kernels and
// the CPU tests, so the split the GPU uses is tested on any machine.
//
// The body is vectorized only when every pointer has the same offset modulo
// 16 bytes: then one head of up to 15 bytes aligns all of them at once. Any
// other mix (say a source at +4 and the destination at +8) runs as scalars
// end to end, still correct, only narrower.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

namespace weft {
namespace cuda {

constexpr size_t kVectorBytes = 16;

struct VecPlan {
  size_t head = 0;  // scalar elements before the body
  size_t vecs = 0;  // 16-byte vectors in the body
  size_t tail = 0;  // scalar elements after it
};

// `addrs` holds the n pointers an element-wise kernel touches (sources and
// destinations), each aligned to `elt` (the element size, a power of two up
// to 16). head + vecs * (16 / elt) + tail == count.
WEFT_HD inline VecPlan planVectors(const uintptr_t* addrs, int n, size_t count, size_t elt) {
  VecPlan p;
  const uintptr_t mis = addrs[0] % kVectorBytes;
  bool same = true;
  for (int i = 1; i < n; ++i) same = same && addrs[i] % kVectorBytes == mis;
  const size_t per = kVectorBytes / elt;
  if (!same || count < 2 * per) {
    p.head = count;
    return p;
  }
  p.head = mis ? (kVectorBytes - mis) / elt : 0;
  p.vecs = (count - p.head) / per;
  p.tail = count - p.head - p.vecs * per;
  return p;
}

}  // namespace cuda
}  // namespace weft
