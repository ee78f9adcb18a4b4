// AVX-512 (F + BW) host reduction kernels for bfloat16 and fp8, whose
// conversions are compute-bound: 16 lanes halve the instructions per element,
// and fp8 decodes with a 128-entry word-permute table (measured on Zen 4, in
// cache: bfloat16 1.3x, fp8 1.9x the AVX2 kernels). Every other type keeps
// its AVX2 kernel, which runs at cache / memory speed already (F16C half
// conversions on 512 bits measured slower there). Built like reduce_avx2.cc:
// target attributes on every vector function, chosen at run time by
// reduce.cc, bit-identical to the portable kernels (the tests compare them).
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip
// -Wmaybe-uninitialized (GCC bug 105593, fixed in 13): silence it for them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>
#include <utility>

#define WEFT_AVX512 __attribute__((target("avx512f,avx512bw,avx2,f16c,fma")))
#define WEFT_AVX512_INL \
  __attribute__((target("avx512f,avx512bw,avx2,f16c,fma"), always_inline)) inline

namespace weft {
namespace cpu {
namespace {

constexpr size_t kVectorBytes = 64;

// ---- Float lanes ----------------------------------------------------------------

struct Ps16 {
  using V = __m512;
  static constexpr size_t W = 16;
  static WEFT_AVX512_INL V add(V a, V b) { return _mm512_add_ps(a, b); }
  static WEFT_AVX512_INL V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static WEFT_AVX512_INL V div(V a, V b) { return _mm512_div_ps(a, b); }
  static WEFT_AVX512_INL V splat(float x) { return _mm512_set1_ps(x); }
  // As the AVX2 kernels: minps, then a|b for equal operands, then a where b
  // is a NaN (accMin of ops.h); max likewise with a&b.
  static WEFT_AVX512_INL V min(V a, V b) {
    const __m512i r = _mm512_castps_si512(_mm512_min_ps(a, b));
    const __m512i e = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ),
                                           _mm512_castps_si512(a), _mm512_castps_si512(b));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(e), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a);
  }
  static WEFT_AVX512_INL V max(V a, V b) {
    const __m512i r = _mm512_castps_si512(_mm512_max_ps(a, b));
    const __m512i e = _mm512_mask_and_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ),
                                            _mm512_castps_si512(a), _mm512_castps_si512(b));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(e), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a);
  }
};

// Two vectors of a lane type handled as one (W doubled).
template <class Base>
struct Pair {
  struct V {
    typename Base::V lo, hi;
  };
  static constexpr size_t W = 2 * Base::W;
  static WEFT_AVX512_INL V add(V a, V b) { return {Base::add(a.lo, b.lo), Base::add(a.hi, b.hi)}; }
  static WEFT_AVX512_INL V mul(V a, V b) { return {Base::mul(a.lo, b.lo), Base::mul(a.hi, b.hi)}; }
  static WEFT_AVX512_INL V div(V a, V b) { return {Base::div(a.lo, b.lo), Base::div(a.hi, b.hi)}; }
  static WEFT_AVX512_INL V min(V a, V b) { return {Base::min(a.lo, b.lo), Base::min(a.hi, b.hi)}; }
  static WEFT_AVX512_INL V max(V a, V b) { return {Base::max(a.lo, b.lo), Base::max(a.hi, b.hi)}; }
  static WEFT_AVX512_INL V splat(float x) {
    const typename Base::V s = Base::splat(x);
    return {s, s};
  }
};

// Each element type: load / store of W elements (storeNT: non-temporal, to a
// 64-byte aligned destination; only where kStreamable).

// bfloat16, 32 at a time: interleaving with zeros widens each to the top half
// of a float (permuted within 128-bit lanes; the lane-wise pack undoes it).
struct BF16 : Pair<Ps16> {
  using T = bf16_t;
  static constexpr bool kStreamable = true;
  static WEFT_AVX512_INL V load(const T* p) {
    const __m512i x = _mm512_loadu_si512(p);
    const __m512i z = _mm512_setzero_si512();
    return {_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, x)),
            _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, x))};
  }
  // Nearest even by adding 0x7fff + lsb; a NaN keeps its top bits, quiet.
  static WEFT_AVX512_INL __m512i round(__m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi,
                                _mm512_set1_epi32(0x40));
  }
  static WEFT_AVX512_INL __m512i pack(V v) { return _mm512_packus_epi32(round(v.lo), round(v.hi)); }
  static WEFT_AVX512_INL void store(T* p, V v) { _mm512_storeu_si512(p, pack(v)); }
  static WEFT_AVX512_INL void storeNT(T* p, V v) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), pack(v));
  }
};

// float -> fp8 code, as encodeFp8 of reduce_avx2.cc: integer rounding for
// normal results, an explicit nearest-even scale-and-round for subnormal ones.
template <int MB, int BIAS, uint32_t kMaxBits, uint32_t kMaxCode, bool kE4M3>
WEFT_AVX512_INL __m512i encodeFp8(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  constexpr int kRound = (1 << (22 - MB)) - 1 - ((127 - BIAS) << 23);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, 23 - MB), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(a, _mm512_add_epi32(lsb, _mm512_set1_epi32(kRound))), 23 - MB);
  const float kInvQuantum = static_cast<float>(1u << (BIAS + MB - 1));
  const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(kInvQuantum));
  const __m512i rs = _mm512_cvttps_epi32(
      _mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32((128 - BIAS) << 23)),
                            rs);
  r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(kMaxBits - 1)),
                            _mm512_set1_epi32(kMaxCode));
  __m512i nan;
  if constexpr (kE4M3) {
    nan = _mm512_set1_epi32(0x7f);
  } else {
    __m512i payload = _mm512_and_si512(_mm512_srli_epi32(a, 21), _mm512_set1_epi32(3));
    payload = _mm512_mask_mov_epi32(
        payload, _mm512_cmpeq_epi32_mask(payload, _mm512_setzero_si512()), _mm512_set1_epi32(2));
    nan = _mm512_or_si512(payload, _mm512_set1_epi32(0x7c));
  }
  r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000)), nan);
  return _mm512_or_si512(r, sign);
}

// fp8 magnitude (7 bits) -> the top 16 bits of its float value (exact: an
// fp8 value has at most 4 significant bits), per format. Filled once from the
// scalar decoders of ops.h by fillAvx512Kernels, before any kernel can run.
alignas(64) uint16_t gFp8Top16[2][128];

// fp8, 32 at a time: a 128-entry table lookup (two two-register word
// permutes) gives the top half of each float, which interleaving with zeros
// widens (permuted within 128-bit lanes; the lane-wise pack of store undoes
// it).
template <bool kE4M3>
struct Fp8 : Pair<Ps16> {
  using T = std::conditional_t<kE4M3, fp8e4m3_t, fp8e5m2_t>;
  static constexpr bool kStreamable = false;  // compute-bound
  static WEFT_AVX512_INL V load(const T* p) {
    const __m512i* lut = reinterpret_cast<const __m512i*>(gFp8Top16[kE4M3 ? 0 : 1]);
    const __m512i c = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i low = _mm512_permutex2var_epi16(_mm512_load_si512(lut), c,
                                                  _mm512_load_si512(lut + 1));  // index bits 0-5
    const __m512i high =
        _mm512_permutex2var_epi16(_mm512_load_si512(lut + 2), c, _mm512_load_si512(lut + 3));
    __m512i top =
        _mm512_mask_blend_epi16(_mm512_test_epi16_mask(c, _mm512_set1_epi16(0x40)), low, high);
    top = _mm512_or_si512(top, _mm512_slli_epi16(_mm512_srli_epi16(c, 7), 15));  // sign
    const __m512i z = _mm512_setzero_si512();
    return {_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, top)),
            _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, top))};
  }
  static WEFT_AVX512_INL __m512i encode(__m512 v) {
    return kE4M3 ? encodeFp8<3, 7, 0x43e00000u, 0x7e, true>(v)
                 : encodeFp8<2, 15, 0x47600000u, 0x7b, false>(v);
  }
  static WEFT_AVX512_INL void store(T* p, V v) {
    const __m512i words = _mm512_packus_epi32(encode(v.lo), encode(v.hi));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi16_epi8(words));
  }
};

// ---- Loops ----------------------------------------------------------------------

#define WEFT_ISA WEFT_AVX512
#define WEFT_ISA_INL WEFT_AVX512_INL
#include "kernels/cpu/vector_loops.h"
#undef WEFT_ISA
#undef WEFT_ISA_INL

}  // namespace

bool fillAvx512Kernels(HostKernels* k) {
  for (uint32_t m = 0; m < 128; ++m) {
    const uint32_t e4m3 = floatBits(fp8e4m3ToFloat(fp8e4m3_t{static_cast<uint8_t>(m)}));
    const uint32_t e5m2 = floatBits(fp8e5m2ToFloat(fp8e5m2_t{static_cast<uint8_t>(m)}));
    if ((e4m3 | e5m2) & 0xffffu) return false;  // cannot happen: exact in 16 bits
    gFp8Top16[0][m] = static_cast<uint16_t>(e4m3 >> 16);
    gFp8Top16[1][m] = static_cast<uint16_t>(e5m2 >> 16);
  }
  fillType<BF16>(k, WEFT_BFLOAT16);
  fillType<Fp8<true>>(k, WEFT_FP8_E4M3);
  fillType<Fp8<false>>(k, WEFT_FP8_E5M2);
  k->divide[WEFT_BFLOAT16] = &divide<BF16>;
  k->divide[WEFT_FP8_E4M3] = &divide<Fp8<true>>;
  k->divide[WEFT_FP8_E5M2] = &divide<Fp8<false>>;
  return true;
}

}  // namespace cpu
}  // namespace weft

#else  // not x86

namespace weft {
namespace cpu {
bool fillAvx512Kernels(HostKernels*) { return false; }
}  // namespace cpu
}  // namespace weft

#endif
