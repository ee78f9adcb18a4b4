// AVX2 + F16C kernels of the wire formats (wire.h), 8 floats per step; the
// tails use the portable functions' arithmetic (ops.h), so both give the same
// bits. Every function carries the target attribute: the file builds without
// -mavx2 and runs only where wire.cc found the CPU able to.
//
// bf16: round to nearest even by adding 0x7fff plus the lowest kept bit and
// keeping the top half, NaN quieted (bit 6 of the bf16) instead; fp16:
// vcvtps2ph with an explicit round-to-nearest, which quiets NaN keeping the
// top payload bits and rounds beyond 65520 to infinity, as floatToHalf.
#include "kernels/cpu/wire_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "kernels/ops.h"

#define WEFT_AVX2 __attribute__((target("avx2,f16c")))
#define WEFT_AVX2_INL __attribute__((target("avx2,f16c"), always_inline)) inline

namespace weft {
namespace cpu {
namespace {

WEFT_AVX2_INL __m128i toBf16(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
  const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, nan, isNan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

WEFT_AVX2_INL __m256 fromBf16(__m128i w) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16));
}

WEFT_AVX2_INL __m128i load8(const uint16_t* w) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
}

WEFT_AVX2_INL void store8(uint16_t* w, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(w), v);
}

WEFT_AVX2 void narrowBf16(uint16_t* w, const float* src, size_t n, float* rounded) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = toBf16(_mm256_loadu_ps(src + i));
    store8(w + i, h);
    if (rounded) _mm256_storeu_ps(rounded + i, fromBf16(h));
  }
  for (; i < n; ++i) {
    const bf16_t b = floatToBf16(src[i]);
    w[i] = b.bits;
    if (rounded) rounded[i] = bf16ToFloat(b);
  }
}

WEFT_AVX2 void widenBf16(float* dst, const uint16_t* w, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, fromBf16(load8(w + i)));
  for (; i < n; ++i) dst[i] = bf16ToFloat(bf16_t{w[i]});
}

WEFT_AVX2 void widenAddBf16(float* dst, const float* a, const uint16_t* w, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(a + i), fromBf16(load8(w + i))));
  for (; i < n; ++i) dst[i] = a[i] + bf16ToFloat(bf16_t{w[i]});
}

WEFT_AVX2 void narrowFp16(uint16_t* w, const float* src, size_t n, float scale, float inv,
                          float* rounded) {
  const __m256 s = _mm256_set1_ps(scale), v = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(src + i), s),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    store8(w + i, h);
    if (rounded) _mm256_storeu_ps(rounded + i, _mm256_mul_ps(_mm256_cvtph_ps(h), v));
  }
  for (; i < n; ++i) {
    const half_t h = floatToHalf(src[i] * scale);
    w[i] = h.bits;
    if (rounded) rounded[i] = halfToFloat(h) * inv;
  }
}

WEFT_AVX2 void widenFp16(float* dst, const uint16_t* w, size_t n, float inv) {
  const __m256 v = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(load8(w + i)), v));
  for (; i < n; ++i) dst[i] = halfToFloat(half_t{w[i]}) * inv;
}

WEFT_AVX2 void widenAddFp16(float* dst, const float* a, const uint16_t* w, size_t n, float inv) {
  const __m256 v = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_cvtph_ps(load8(w + i)), v);
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(a + i), x));
  }
  for (; i < n; ++i) {
    const float x = halfToFloat(half_t{w[i]}) * inv;
    dst[i] = a[i] + x;
  }
}

WEFT_AVX2 float maxFiniteAbs(const float* src, size_t n) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(3.40282347e38f);
  __m256 m = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(src + i), absMask);
    m = _mm256_max_ps(m, _mm256_and_ps(a, _mm256_cmp_ps(a, big, _CMP_LE_OQ)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = 0;
  for (float x : lanes) r = x > r ? x : r;
  for (; i < n; ++i) {
    const float a = bitsFloat(floatBits(src[i]) & 0x7fffffffu);
    if (a <= 3.40282347e38f && a > r) r = a;
  }
  return r;
}

}  // namespace

bool fillAvx2WireKernels(WireKernels* k) {
  k->narrowBf16 = narrowBf16;
  k->widenBf16 = widenBf16;
  k->widenAddBf16 = widenAddBf16;
  k->narrowFp16 = narrowFp16;
  k->widenFp16 = widenFp16;
  k->widenAddFp16 = widenAddFp16;
  k->maxFiniteAbs = maxFiniteAbs;
  return true;
}

}  // namespace cpu
}  // namespace weft

#endif
