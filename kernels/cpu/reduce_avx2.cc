// AVX2 (+F16C) host reduction kernels. Every function that uses a vector
// instruction carries the target attribute, so this file builds without
// -mavx2 and its code only runs when reduce.cc found the CPU able to.
//
// The kernels give the same bits as the portable ones of reduce.cc (the tests
// compare them): each vector op below mirrors the scalar definition in
// kernels/ops.h, and element tails reuse those scalar functors. There is no
// multiply feeding an add, so FP contraction into FMA cannot change a result.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>
#include <utility>

#define WEFT_AVX2 __attribute__((target("avx2,f16c,fma")))
#define WEFT_AVX2_INL __attribute__((target("avx2,f16c,fma"), always_inline)) inline

namespace weft {
namespace cpu {
namespace {

// ---- Float lanes: float itself and every narrow type combines here ---------

struct Ps8 {
  using V = __m256;
  static constexpr size_t W = 8;
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_ps(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static WEFT_AVX2_INL V div(V a, V b) { return _mm256_div_ps(a, b); }
  static WEFT_AVX2_INL V splat(float x) { return _mm256_set1_ps(x); }
  // minps(a, b) = a < b ? a : b; then equal operands give a|b (-0 wins) and a
  // NaN in b gives a: exactly accMin of ops.h.
  static WEFT_AVX2_INL V min(V a, V b) {
    V r = _mm256_min_ps(a, b);
    r = _mm256_blendv_ps(r, _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(r, a, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
  static WEFT_AVX2_INL V max(V a, V b) {
    V r = _mm256_max_ps(a, b);
    r = _mm256_blendv_ps(r, _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(r, a, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};

// Each element type: load / store of W elements (storeNT: non-temporal, to a
// 32-byte aligned vector; only where kStreamable).
struct F32 : Ps8 {
  using T = float;
  static constexpr bool kStreamable = true;
  static WEFT_AVX2_INL V load(const T* p) { return _mm256_loadu_ps(p); }
  static WEFT_AVX2_INL void store(T* p, V v) { _mm256_storeu_ps(p, v); }
  static WEFT_AVX2_INL void storeNT(T* p, V v) { _mm256_stream_ps(p, v); }
};

struct F16 : Ps8 {
  using T = half_t;
  static constexpr bool kStreamable = true;
  static WEFT_AVX2_INL V load(const T* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static WEFT_AVX2_INL void store(T* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static WEFT_AVX2_INL void storeNT(T* p, V v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

// Two vectors of a lane type handled as one (W doubled).
template <class Base>
struct Pair {
  struct V {
    typename Base::V lo, hi;
  };
  static constexpr size_t W = 2 * Base::W;
  static WEFT_AVX2_INL V add(V a, V b) { return {Base::add(a.lo, b.lo), Base::add(a.hi, b.hi)}; }
  static WEFT_AVX2_INL V mul(V a, V b) { return {Base::mul(a.lo, b.lo), Base::mul(a.hi, b.hi)}; }
  static WEFT_AVX2_INL V div(V a, V b) { return {Base::div(a.lo, b.lo), Base::div(a.hi, b.hi)}; }
  static WEFT_AVX2_INL V min(V a, V b) { return {Base::min(a.lo, b.lo), Base::min(a.hi, b.hi)}; }
  static WEFT_AVX2_INL V max(V a, V b) { return {Base::max(a.lo, b.lo), Base::max(a.hi, b.hi)}; }
  template <typename S>
  static WEFT_AVX2_INL V splat(S x) {
    const typename Base::V s = Base::splat(x);
    return {s, s};
  }
};

// bfloat16, 16 at a time: interleaving with zeros widens each to the top half
// of a float (in an order permuted within 128-bit lanes, which the lane-wise
// pack of store undoes).
struct BF16 : Pair<Ps8> {
  using T = bf16_t;
  static constexpr bool kStreamable = true;
  static WEFT_AVX2_INL V load(const T* p) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i z = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x))};
  }
  // Round to nearest even by adding 0x7fff + lsb; NaNs keep their top bits
  // and come back quiet. The result sits in the low half of each lane.
  static WEFT_AVX2_INL __m256i round(__m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i bias =
        _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
  static WEFT_AVX2_INL __m256i pack(V v) { return _mm256_packus_epi32(round(v.lo), round(v.hi)); }
  static WEFT_AVX2_INL void store(T* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack(v));
  }
  static WEFT_AVX2_INL void storeNT(T* p, V v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), pack(v));
  }
};

// float -> fp8 code, the vector twin of floatToFp8e4m3 / floatToFp8e5m2.
// Normal results round in integer arithmetic as detail::roundMagnitude does;
// subnormal ones scale |x| by the inverse quantum (a power of two: exact) and
// round with an explicit nearest-even (MXCSR's mode plays no part).
template <int MB, int BIAS, uint32_t kMaxBits, uint32_t kMaxCode, bool kE4M3>
WEFT_AVX2_INL __m256i encodeFp8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  // Normal: (a + half-ulp - 1 + lsb - rebias) >> (23 - MB).
  constexpr int kRound = (1 << (22 - MB)) - 1 - ((127 - BIAS) << 23);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, 23 - MB), _mm256_set1_epi32(1));
  const __m256i rn = _mm256_srli_epi32(
      _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32(kRound))), 23 - MB);
  // Subnormal: round(|x| / 2^(1-BIAS-MB)); 2^MB (the smallest normal) may come out.
  const float kInvQuantum = static_cast<float>(1u << (BIAS + MB - 1));
  const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(kInvQuantum));
  const __m256i rs =
      _mm256_cvttps_epi32(_mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i minNormal = _mm256_set1_epi32((127 - BIAS + 1) << 23);
  __m256i r = _mm256_blendv_epi8(rn, rs, _mm256_cmpgt_epi32(minNormal, a));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(kMaxCode),
                         _mm256_cmpgt_epi32(a, _mm256_set1_epi32(kMaxBits - 1)));
  __m256i nan;
  if constexpr (kE4M3) {
    nan = _mm256_set1_epi32(0x7f);
  } else {
    __m256i payload = _mm256_and_si256(_mm256_srli_epi32(a, 21), _mm256_set1_epi32(3));
    payload = _mm256_blendv_epi8(payload, _mm256_set1_epi32(2),
                                 _mm256_cmpeq_epi32(payload, _mm256_setzero_si256()));
    nan = _mm256_or_si256(payload, _mm256_set1_epi32(0x7c));
  }
  r = _mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
  return _mm256_or_si256(r, sign);
}

template <bool kE4M3>
struct Fp8 : Ps8 {
  using T = std::conditional_t<kE4M3, fp8e4m3_t, fp8e5m2_t>;
  static constexpr bool kStreamable = false;  // compute-bound, 8-byte stores
  static WEFT_AVX2_INL V load(const T* p) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
    constexpr int kMb = kE4M3 ? 3 : 2;
    constexpr int kBias = kE4M3 ? 7 : 15;
    const __m256i normal =
        _mm256_add_epi32(_mm256_slli_epi32(mag, 23 - kMb), _mm256_set1_epi32((127 - kBias) << 23));
    const float quantum = kE4M3 ? 0.001953125f : 1.52587890625e-5f;  // 2^-9, 2^-16
    const __m256i sub =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(quantum)));
    __m256i r =
        _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(1 << kMb), mag));
    if constexpr (kE4M3) {
      r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000),
                             _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
    } else {
      const __m256i special =
          _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                          _mm256_slli_epi32(_mm256_and_si256(mag, _mm256_set1_epi32(3)), 21));
      r = _mm256_blendv_epi8(r, special, _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7b)));
    }
    return _mm256_castsi256_ps(_mm256_or_si256(r, sign));
  }
  static WEFT_AVX2_INL void store(T* p, V v) {
    const __m256i c = kE4M3 ? encodeFp8<3, 7, 0x43e00000u, 0x7e, true>(v)
                            : encodeFp8<2, 15, 0x47600000u, 0x7b, false>(v);
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    w = _mm_packus_epi16(w, w);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), w);
  }
};

// ---- Double lanes -------------------------------------------------------------

struct F64 {
  using T = double;
  using V = __m256d;
  static constexpr size_t W = 4;
  static WEFT_AVX2_INL V load(const T* p) { return _mm256_loadu_pd(p); }
  static constexpr bool kStreamable = true;
  static WEFT_AVX2_INL void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static WEFT_AVX2_INL void storeNT(T* p, V v) { _mm256_stream_pd(p, v); }
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_pd(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static WEFT_AVX2_INL V div(V a, V b) { return _mm256_div_pd(a, b); }
  static WEFT_AVX2_INL V splat(double x) { return _mm256_set1_pd(x); }
  static WEFT_AVX2_INL V min(V a, V b) {
    V r = _mm256_min_pd(a, b);
    r = _mm256_blendv_pd(r, _mm256_or_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(r, a, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
  static WEFT_AVX2_INL V max(V a, V b) {
    V r = _mm256_max_pd(a, b);
    r = _mm256_blendv_pd(r, _mm256_and_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(r, a, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
};

// ---- Integer lanes (wrap-around arithmetic) -----------------------------------

template <typename TT>
struct IntBase {
  using T = TT;
  using V = __m256i;
  static constexpr size_t W = 32 / sizeof(TT);
  static WEFT_AVX2_INL V load(const T* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static constexpr bool kStreamable = true;
  static WEFT_AVX2_INL void store(T* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static WEFT_AVX2_INL void storeNT(T* p, V v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  }
};

// No 8-bit multiply: even bytes from a 16-bit multiply, odd bytes from one of
// the shifted-down halves.
WEFT_AVX2_INL __m256i mul8(__m256i a, __m256i b) {
  const __m256i even = _mm256_mullo_epi16(a, b);
  const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00ff)),
                         _mm256_slli_epi16(odd, 8));
}

// Low 64 bits of a 64x64 product from 32x32->64 multiplies.
WEFT_AVX2_INL __m256i mul64(__m256i a, __m256i b) {
  const __m256i lo = _mm256_mul_epu32(a, b);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                         _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

struct I8 : IntBase<int8_t> {
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_epi8(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return mul8(a, b); }
  static WEFT_AVX2_INL V min(V a, V b) { return _mm256_min_epi8(a, b); }
  static WEFT_AVX2_INL V max(V a, V b) { return _mm256_max_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_epi8(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return mul8(a, b); }
  static WEFT_AVX2_INL V min(V a, V b) { return _mm256_min_epu8(a, b); }
  static WEFT_AVX2_INL V max(V a, V b) { return _mm256_max_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static WEFT_AVX2_INL V min(V a, V b) { return _mm256_min_epi32(a, b); }
  static WEFT_AVX2_INL V max(V a, V b) { return _mm256_max_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static WEFT_AVX2_INL V min(V a, V b) { return _mm256_min_epu32(a, b); }
  static WEFT_AVX2_INL V max(V a, V b) { return _mm256_max_epu32(a, b); }
};
// 64-bit compares are signed only: unsigned ones flip the sign bits first.
template <typename TT, bool kSigned>
struct Int64 : IntBase<TT> {
  using V = __m256i;
  static WEFT_AVX2_INL V add(V a, V b) { return _mm256_add_epi64(a, b); }
  static WEFT_AVX2_INL V mul(V a, V b) { return mul64(a, b); }
  static WEFT_AVX2_INL V greater(V a, V b) {  // a > b
    if constexpr (kSigned) return _mm256_cmpgt_epi64(a, b);
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
  }
  static WEFT_AVX2_INL V min(V a, V b) { return _mm256_blendv_epi8(a, b, greater(a, b)); }
  static WEFT_AVX2_INL V max(V a, V b) { return _mm256_blendv_epi8(a, b, greater(b, a)); }
};
using I64 = Int64<int64_t, true>;
using U64 = Int64<uint64_t, false>;

// ---- Loops ----------------------------------------------------------------------

constexpr size_t kVectorBytes = 32;
#define WEFT_ISA WEFT_AVX2
#define WEFT_ISA_INL WEFT_AVX2_INL
#include "kernels/cpu/vector_loops.h"
#undef WEFT_ISA
#undef WEFT_ISA_INL

}  // namespace

bool fillAvx2Kernels(HostKernels* k) {
  fillType<I8>(k, WEFT_INT8);
  fillType<U8>(k, WEFT_UINT8);
  fillType<I32>(k, WEFT_INT32);
  fillType<U32>(k, WEFT_UINT32);
  fillType<I64>(k, WEFT_INT64);
  fillType<U64>(k, WEFT_UINT64);
  fillType<F16>(k, WEFT_FLOAT16);
  fillType<F32>(k, WEFT_FLOAT32);
  fillType<F64>(k, WEFT_FLOAT64);
  fillType<BF16>(k, WEFT_BFLOAT16);
  fillType<Fp8<true>>(k, WEFT_FP8_E4M3);
  fillType<Fp8<false>>(k, WEFT_FP8_E5M2);
  k->divide[WEFT_FLOAT16] = &divide<F16>;
  k->divide[WEFT_FLOAT32] = &divide<F32>;
  k->divide[WEFT_FLOAT64] = &divide<F64>;
  k->divide[WEFT_BFLOAT16] = &divide<BF16>;
  k->divide[WEFT_FP8_E4M3] = &divide<Fp8<true>>;
  k->divide[WEFT_FP8_E5M2] = &divide<Fp8<false>>;
  return fillAvx2ExactSum(k);
}

}  // namespace cpu
}  // namespace weft

#else  // not x86

namespace weft {
namespace cpu {
bool fillAvx2Kernels(HostKernels*) { return false; }
}  // namespace cpu
}  // namespace weft

#endif
