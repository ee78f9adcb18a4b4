// Internal to the wire-format kernels (wire.h): the per-ISA table behind
// wireNarrow / wireWiden / wireWidenAdd. Payloads are uint16 elements; fp16
// kernels take the scale 2^k and its inverse (both exact floats).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {
namespace cpu {

struct WireKernels {
  void (*narrowBf16)(uint16_t* w, const float* src, size_t n, float* rounded);
  void (*widenBf16)(float* dst, const uint16_t* w, size_t n);
  void (*widenAddBf16)(float* dst, const float* a, const uint16_t* w, size_t n);
  void (*narrowFp16)(uint16_t* w, const float* src, size_t n, float scale, float inv,
                     float* rounded);
  void (*widenFp16)(float* dst, const uint16_t* w, size_t n, float inv);
  void (*widenAddFp16)(float* dst, const float* a, const uint16_t* w, size_t n, float inv);
  float (*maxFiniteAbs)(const float* src, size_t n);  // 0 when none is finite
};

float pow2(int k);  // 2^k as a float (wire.cc)

void fillPortableWireKernels(WireKernels* k);
// False (and k unchanged) when the build has no AVX2 code path.
bool fillAvx2WireKernels(WireKernels* k);

}  // namespace cpu
}  // namespace weft
