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

template <class P, int OP>
WEFT_AVX512_INL typename P::V apply(typename P::V a, typename P::V b) {
  if constexpr (OP == WEFT_SUM) return P::add(a, b);
  if constexpr (OP == WEFT_PROD) return P::mul(a, b);
  if constexpr (OP == WEFT_MAX) return P::max(a, b);
  if constexpr (OP == WEFT_MIN) return P::min(a, b);
}

template <class P, bool kNT>
WEFT_AVX512_INL void put(typename P::T* p, typename P::V v) {
  if constexpr (kNT) {
    P::storeNT(p, v);
  } else {
    P::store(p, v);
  }
}

// Where non-temporal stores start: the number of leading elements to do one
// by one until dst is 64-byte aligned, or SIZE_MAX for regular stores.
template <class P>
WEFT_AVX512_INL size_t streamHead(const void* dst, size_t count) {
  using T = typename P::T;
  if (!P::kStreamable || count * sizeof(T) < kStreamStoreBytes) return SIZE_MAX;
  const size_t mis = reinterpret_cast<uintptr_t>(dst) % kVectorBytes;
  if (mis % sizeof(T) != 0) return SIZE_MAX;
  return mis ? (kVectorBytes - mis) / sizeof(T) : 0;
}

// Whole vectors from element i on; returns where it stopped (< W left).
template <class P, int OP, bool kNT>
WEFT_AVX512_INL size_t body2(typename P::T* d, const typename P::T* x, const typename P::T* y,
                             size_t i, size_t count) {
  constexpr size_t W = P::W;
  for (; i + 4 * W <= count; i += 4 * W) {
    const typename P::V r0 = apply<P, OP>(P::load(x + i), P::load(y + i));
    const typename P::V r1 = apply<P, OP>(P::load(x + i + W), P::load(y + i + W));
    const typename P::V r2 = apply<P, OP>(P::load(x + i + 2 * W), P::load(y + i + 2 * W));
    const typename P::V r3 = apply<P, OP>(P::load(x + i + 3 * W), P::load(y + i + 3 * W));
    put<P, kNT>(d + i, r0);
    put<P, kNT>(d + i + W, r1);
    put<P, kNT>(d + i + 2 * W, r2);
    put<P, kNT>(d + i + 3 * W, r3);
  }
  for (; i + W <= count; i += W) put<P, kNT>(d + i, apply<P, OP>(P::load(x + i), P::load(y + i)));
  return i;
}

template <class P, int OP>
WEFT_AVX512 void reduce2(void* dst, const void* a, const void* b, size_t count) {
  using T = typename P::T;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const OpFunctor<T, OP> f;
  size_t i = 0;
  if constexpr (P::kStreamable) {
    const size_t head = streamHead<P>(d, count);
    if (head != SIZE_MAX) {
      for (; i < head; ++i) d[i] = f(x[i], y[i]);
      i = body2<P, OP, true>(d, x, y, i, count);
      _mm_sfence();
    }
  }
  i = body2<P, OP, false>(d, x, y, i, count);
  for (; i < count; ++i) d[i] = f(x[i], y[i]);
}

// Element i of the multi-source reduction, in scalar arithmetic.
template <typename T, int OP>
WEFT_AVX512_INL void scalarN(T* d, const void* const* srcs, int nsrc, size_t i) {
  using A = Arith<T>;
  typename A::Acc acc = A::toAcc(static_cast<const T*>(srcs[0])[i]);
  for (int k = 1; k < nsrc; ++k) {
    acc = OpFunctor<T, OP>::combine(acc, A::toAcc(static_cast<const T*>(srcs[k])[i]));
  }
  d[i] = A::fromAcc(acc);
}

template <class P, int OP, bool kNT>
WEFT_AVX512_INL size_t bodyN(typename P::T* d, const void* const* srcs, int nsrc, size_t i,
                             size_t count) {
  using T = typename P::T;
  using V = typename P::V;
  constexpr size_t W = P::W;
  const T* s0 = static_cast<const T*>(srcs[0]);
  for (; i + 2 * W <= count; i += 2 * W) {
    V acc0 = P::load(s0 + i), acc1 = P::load(s0 + i + W);
    for (int k = 1; k < nsrc; ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + i;
      acc0 = apply<P, OP>(acc0, P::load(s));
      acc1 = apply<P, OP>(acc1, P::load(s + W));
    }
    put<P, kNT>(d + i, acc0);
    put<P, kNT>(d + i + W, acc1);
  }
  for (; i + W <= count; i += W) {
    V acc = P::load(s0 + i);
    for (int k = 1; k < nsrc; ++k) {
      acc = apply<P, OP>(acc, P::load(static_cast<const T*>(srcs[k]) + i));
    }
    put<P, kNT>(d + i, acc);
  }
  return i;
}

template <class P, int OP>
WEFT_AVX512 void reduceN(void* dst, const void* const* srcs, int nsrc, size_t count) {
  using T = typename P::T;
  T* d = static_cast<T*>(dst);
  size_t i = 0;
  if constexpr (P::kStreamable) {
    const size_t head = streamHead<P>(d, count);
    if (head != SIZE_MAX) {
      for (; i < head; ++i) scalarN<T, OP>(d, srcs, nsrc, i);
      i = bodyN<P, OP, true>(d, srcs, nsrc, i, count);
      _mm_sfence();
    }
  }
  i = bodyN<P, OP, false>(d, srcs, nsrc, i, count);
  for (; i < count; ++i) scalarN<T, OP>(d, srcs, nsrc, i);
}

// AVG's final step for floating types: x / n, rounded back once.
template <class P>
WEFT_AVX512 void divide(void* dst, size_t count, uint64_t n) {
  using T = typename P::T;
  using A = Arith<T>;
  using Acc = typename A::Acc;
  T* d = static_cast<T*>(dst);
  const Acc dv = static_cast<Acc>(n);
  const typename P::V vd = P::splat(dv);
  size_t i = 0;
  for (; i + P::W <= count; i += P::W) P::store(d + i, P::div(P::load(d + i), vd));
  for (; i < count; ++i) d[i] = A::fromAcc(A::toAcc(d[i]) / dv);
}

template <class P, int... OPS>
void fillType(HostKernels* k, int dt, std::integer_sequence<int, OPS...>) {
  ((k->reduce2[dt][OPS] = &reduce2<P, OPS>), ...);
  ((k->reduceN[dt][OPS] = &reduceN<P, OPS>), ...);
}

template <class P>
void fillType(HostKernels* k, int dt) {
  fillType<P>(k, dt, std::make_integer_sequence<int, kNumArithOps>());
}

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
