// The exact-sum kernel's fast path in AVX2 + FMA (exact_sum.h; the portable
// loop of exact_sum.cc is the reference, the tail and the fallback). It
// computes what the portable path computes, lane for lane, and gives the
// same bits (the tests run the MPFR comparison on every ISA):
//
// - a group of elements (16; 8 for float64) is widened to double, 4 per
//   register, and summed over the sources in registers with TwoSum, the
//   error bits OR-ed into a flag per lane (float64: a double-double, the
//   flag from the second TwoSum), as exact_sum.cc describes;
// - the exact sum is rounded once: float by vcvtpd2ps of an exact double;
//   f16, bf16 and fp8 by roundMagnitude in 64-bit integer lanes (nearest
//   even with sticky, subnormals, overflow to inf or fp8's saturation);
//   AVG first makes q = S / n rounded to odd at 53 bits (q = RN(S / n),
//   moved one ulp towards S / n when the exact residual fma(-q, n, S) is
//   nonzero and q is even), which then rounds correctly to any format of
//   at most 51 bits: the portable path's midpoint fix, done for every lane;
//   float64 AVG of a double-double is averageDoubleDouble in lanes;
// - f16, bf16 and fp8 first run a group of 16 in float lanes (8 per
//   register): widened exactly, TwoSum in float, the exact float rounded by
//   vcvtps2ph, the bf16 bit trick or an fp8 rounding in 32-bit lanes (AVG:
//   the quotient rounded to odd at 24 bits first); a group with a lane the
//   float path cannot prove is redone whole in double lanes as above;
// - lanes whose flag is set are redone one by one by the slow path after
//   the block; the block is written to dst only after all its sources were
//   read (dst may be a source).
//
// Every function that uses a vector instruction carries the target
// attribute, so this file builds without -mavx2 and runs only where
// reduce.cc found AVX2, F16C and FMA.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/exact_format.h"

#define WEFT_AVX2 __attribute__((target("avx2,f16c,fma")))
#define WEFT_AVX2_INL __attribute__((target("avx2,f16c,fma"), always_inline)) inline

namespace weft {
namespace exact {
namespace {

constexpr size_t kBlock = 256;  // a multiple of every group
constexpr uint64_t kExpMask = 0x7ff0000000000000ull;
constexpr uint64_t kSignMask = 0x8000000000000000ull;
constexpr uint64_t kMantMask = 0x000fffffffffffffull;

WEFT_AVX2_INL __m256i splat64(uint64_t x) { return _mm256_set1_epi64x(static_cast<long long>(x)); }
WEFT_AVX2_INL __m256i bitsOf(__m256d x) { return _mm256_castpd_si256(x); }
WEFT_AVX2_INL __m256d doubleOf(__m256i x) { return _mm256_castsi256_pd(x); }

// Eight floats to two registers of four doubles (exact).
WEFT_AVX2_INL void widenPs(__m256 f, __m256d* lo, __m256d* hi) {
  *lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
  *hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
}

// Loads kGroup elements of T at p as kGroup / 4 registers of doubles, in order.
template <typename T>
struct Load;
template <>
struct Load<double> {
  static constexpr int kVecs = 2;
  static WEFT_AVX2_INL void run(const double* p, __m256d* v) {
    v[0] = _mm256_loadu_pd(p);
    v[1] = _mm256_loadu_pd(p + 4);
  }
};
template <>
struct Load<float> {
  static constexpr int kVecs = 4;
  static WEFT_AVX2_INL void run(const float* p, __m256d* v) {
    widenPs(_mm256_loadu_ps(p), &v[0], &v[1]);
    widenPs(_mm256_loadu_ps(p + 8), &v[2], &v[3]);
  }
};
template <>
struct Load<half_t> {
  static constexpr int kVecs = 4;
  static WEFT_AVX2_INL void run(const half_t* p, __m256d* v) {
    widenPs(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), &v[0], &v[1]);
    widenPs(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8))), &v[2],
            &v[3]);
  }
};
template <>
struct Load<bf16_t> {
  static constexpr int kVecs = 4;
  static WEFT_AVX2_INL __m256 eight(const bf16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static WEFT_AVX2_INL void run(const bf16_t* p, __m256d* v) {
    widenPs(eight(p), &v[0], &v[1]);
    widenPs(eight(p + 8), &v[2], &v[3]);
  }
};
// fp8: every code's value from a 256-entry table (Format::widen), gathered.
template <typename T>
struct Fp8Table {
  double v[256];
  Fp8Table() {
    for (int c = 0; c < 256; ++c) {
      T x;
      const uint8_t b = static_cast<uint8_t>(c);
      std::memcpy(&x, &b, 1);
      v[c] = Format<T>::widen(x);
    }
  }
};
template <typename T>
const double* fp8Table() {
  static const Fp8Table<T> t;
  return t.v;
}
// (The masked form: GCC 12 warns about the plain one's undefined source.)
WEFT_AVX2_INL __m256d gather4(const double* table, __m128i idx) {
  return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), table, idx,
                                  _mm256_castsi256_pd(_mm256_set1_epi64x(-1)), 8);
}
template <typename T>
struct LoadFp8 {
  static constexpr int kVecs = 4;
  static WEFT_AVX2_INL void run(const T* p, __m256d* v) {
    const double* table = fp8Table<T>();
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i i0 = _mm256_cvtepu8_epi32(b);
    const __m256i i1 = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
    v[0] = gather4(table, _mm256_castsi256_si128(i0));
    v[1] = gather4(table, _mm256_extracti128_si256(i0, 1));
    v[2] = gather4(table, _mm256_castsi256_si128(i1));
    v[3] = gather4(table, _mm256_extracti128_si256(i1, 1));
  }
};
template <>
struct Load<fp8e4m3_t> : LoadFp8<fp8e4m3_t> {};
template <>
struct Load<fp8e5m2_t> : LoadFp8<fp8e5m2_t> {};

// TwoSum: s + e == a + x exactly when s is finite.
WEFT_AVX2_INL void twoSum(__m256d a, __m256d x, __m256d* s, __m256d* e) {
  *s = _mm256_add_pd(a, x);
  const __m256d bb = _mm256_sub_pd(*s, a);
  *e = _mm256_add_pd(_mm256_sub_pd(a, _mm256_sub_pd(*s, bb)), _mm256_sub_pd(x, bb));
}

// All-ones lanes where x's exponent field is all ones (inf or NaN).
WEFT_AVX2_INL __m256i nonFinite(__m256d x) {
  const __m256i e = _mm256_and_si256(bitsOf(x), splat64(kExpMask));
  return _mm256_cmpeq_epi64(e, splat64(kExpMask));
}

// q = S / n rounded to odd at 53 bits (S exact, not subnormal-small: every
// nonzero sum of these formats is at least 2^-149).
WEFT_AVX2_INL __m256d divideToOdd(__m256d s, __m256d n) {
  const __m256d q = _mm256_div_pd(s, n);
  const __m256d r = _mm256_fnmadd_pd(q, n, s);  // S - q n, exact
  const __m256i qb = bitsOf(q);
  const __m256i one = splat64(1);
  const __m256i even = _mm256_cmpeq_epi64(_mm256_and_si256(qb, one), _mm256_setzero_si256());
  const __m256i inexact = bitsOf(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_NEQ_OQ));
  // Towards S / n: the magnitude grows when r has q's sign.
  const __m256i away = _mm256_srli_epi64(_mm256_xor_si256(bitsOf(r), qb), 63);  // 0: grow
  const __m256i step = _mm256_sub_epi64(one, _mm256_add_epi64(away, away));     // +1 or -1
  return doubleOf(_mm256_add_epi64(qb, _mm256_and_si256(step, _mm256_and_si256(inexact, even))));
}

// roundMagnitude (exact_format.h) in 64-bit lanes, for the bits b of a
// double (its sign becomes T's sign bit): T's code, sign included.
template <typename T>
WEFT_AVX2_INL __m256i roundToCode(__m256i b) {
  using F = Format<T>;
  constexpr int kShift = 52 - F::kMant;
  const __m256i a = _mm256_andnot_si256(splat64(kSignMask), b);
  const __m256i one = splat64(1);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi64(a, kShift), one);
  const __m256i normal = _mm256_sub_epi64(
      _mm256_srli_epi64(
          _mm256_add_epi64(_mm256_add_epi64(a, splat64((uint64_t{1} << (kShift - 1)) - 1)), lsb),
          kShift),
      splat64(static_cast<uint64_t>(1023 - F::kBias) << F::kMant));
  constexpr uint64_t kMinNormal = static_cast<uint64_t>(1023 - F::kBias + 1) << 52;
  const __m256i isNormal = _mm256_cmpgt_epi64(a, splat64(kMinNormal - 1));
  __m256i code = normal;
  if (!_mm256_testc_si256(isNormal, splat64(~uint64_t{0}))) {  // some lane is subnormal in T
    // Subnormal: quanta of 2^(1 - bias - mant), shift clamped to [1, 54].
    const __m256i e = _mm256_srli_epi64(a, 52);
    const __m256i eZero = _mm256_cmpeq_epi64(e, _mm256_setzero_si256());
    const __m256i m = _mm256_or_si256(_mm256_and_si256(a, splat64(kMantMask)),
                                      _mm256_andnot_si256(eZero, splat64(uint64_t{1} << 52)));
    __m256i shift = _mm256_sub_epi64(splat64(static_cast<uint64_t>(1076 - F::kBias - F::kMant)),
                                     _mm256_blendv_epi8(e, one, eZero));
    shift = _mm256_blendv_epi8(shift, splat64(54), _mm256_cmpgt_epi64(shift, splat64(54)));
    shift = _mm256_blendv_epi8(shift, one, _mm256_cmpgt_epi64(one, shift));
    const __m256i subHalf = _mm256_sllv_epi64(one, _mm256_sub_epi64(shift, one));
    const __m256i subLsb = _mm256_and_si256(_mm256_srlv_epi64(m, shift), one);
    const __m256i sub = _mm256_srlv_epi64(
        _mm256_add_epi64(_mm256_add_epi64(m, _mm256_sub_epi64(subHalf, one)), subLsb), shift);
    code = _mm256_blendv_epi8(sub, normal, isNormal);
  }
  const uint64_t over = F::kInfCode != 0 ? F::kInfCode : F::kMaxCode;
  code = _mm256_blendv_epi8(code, splat64(over), _mm256_cmpgt_epi64(code, splat64(F::kMaxCode)));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi64(b, 64 - F::kWidth),
                                        splat64(uint64_t{1} << (F::kWidth - 1)));
  return _mm256_or_si256(code, sign);
}

// Two registers of 64-bit codes (elements 0-3, 4-7) to eight 32-bit lanes.
WEFT_AVX2_INL __m256i narrow32(__m256i c0, __m256i c1) {
  const __m256i x = _mm256_or_si256(c0, _mm256_slli_epi64(c1, 32));  // 0 4 1 5 | 2 6 3 7
  return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}

// Sixteen 64-bit codes (in order) to sixteen 16-bit ones, in order.
WEFT_AVX2_INL __m256i narrow16(const __m256i* c) {
  const __m256i w = _mm256_packus_epi32(narrow32(c[0], c[1]), narrow32(c[2], c[3]));
  return _mm256_permute4x64_epi64(w, 0xd8);  // the lane-wise pack's order undone
}

// Rounds the exact sums (the double lanes hi; float64: hi + lo) of one
// group to T and stores them at out; flags lanes the slow path must redo.
template <typename T>
struct Round {
  static constexpr int kVecs = Load<T>::kVecs;
  static WEFT_AVX2_INL void run(const __m256d* hi, const __m256d*, __m256i* flag, bool average,
                                __m256d n, __m256d, T* out) {
    __m256d q[kVecs];
    for (int v = 0; v < kVecs; ++v) q[v] = average ? divideToOdd(hi[v], n) : hi[v];
    if constexpr (std::is_same<T, float>::value) {
      for (int v = 0; v < kVecs; v += 2) {
        const __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(q[v + 1]), _mm256_cvtpd_ps(q[v]));
        _mm256_storeu_ps(out + 4 * v, f);
      }
    } else {
      __m256i c[kVecs];
      for (int v = 0; v < kVecs; ++v) c[v] = roundToCode<T>(bitsOf(q[v]));
      const __m256i w = narrow16(c);
      if constexpr (sizeof(T) == 2) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), w);
      } else {
        const __m128i b =
            _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), b);
      }
    }
    (void)flag;
  }
};

// float64: SUM rounds hi + lo with one addition (hi itself where lo == 0);
// AVG divides hi where lo == 0, else averageDoubleDouble (exact_sum.cc) in
// lanes; its range condition joins the flag.
template <>
struct Round<double> {
  static constexpr int kVecs = Load<double>::kVecs;
  static WEFT_AVX2_INL __m256d average2(__m256d hi, __m256d lo, __m256d n, __m256d invN,
                                        __m256i* bad) {
    __m256d h, l;
    twoSum(hi, lo, &h, &l);
    const __m256i sign = _mm256_and_si256(bitsOf(h), splat64(kSignMask));
    h = doubleOf(_mm256_xor_si256(bitsOf(h), sign));
    l = doubleOf(_mm256_xor_si256(bitsOf(l), sign));
    const __m256d ok =
        _mm256_and_pd(_mm256_cmp_pd(h, _mm256_set1_pd(0x1p-900), _CMP_GE_OQ),
                      _mm256_cmp_pd(h, _mm256_set1_pd(0x1.fffffffffffffp1023), _CMP_LE_OQ));
    *bad = _mm256_andnot_si256(bitsOf(ok), splat64(~uint64_t{0}));
    const __m256d q0 = _mm256_div_pd(h, n);
    const __m256d c = _mm256_mul_pd(_mm256_add_pd(_mm256_fnmadd_pd(q0, n, h), l), invN);
    const __m256d q = _mm256_add_pd(q0, c);
    const __m256d rem = _mm256_fnmadd_pd(q, n, h);  // exact
    const __m256i qb = bitsOf(q);
    const __m256d u =
        doubleOf(_mm256_sub_epi64(_mm256_and_si256(qb, splat64(kExpMask)), splat64(52ull << 52)));
    const __m256i pow2 =
        _mm256_cmpeq_epi64(_mm256_and_si256(qb, splat64(kMantMask)), _mm256_setzero_si256());
    const __m256d below =
        _mm256_blendv_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), u),
                         _mm256_mul_pd(_mm256_set1_pd(0.25), u), _mm256_castsi256_pd(pow2));
    const __m256d up = _mm256_add_pd(
        _mm256_sub_pd(rem, _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), u), n)), l);
    const __m256d down = _mm256_add_pd(_mm256_add_pd(rem, _mm256_mul_pd(below, n)), l);
    const __m256d zero = _mm256_setzero_pd();
    const __m256d odd =
        _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(qb, splat64(1)), splat64(1)));
    const __m256d inc = _mm256_or_pd(_mm256_cmp_pd(up, zero, _CMP_GT_OQ),
                                     _mm256_and_pd(_mm256_cmp_pd(up, zero, _CMP_EQ_OQ), odd));
    const __m256d dec = _mm256_or_pd(_mm256_cmp_pd(down, zero, _CMP_LT_OQ),
                                     _mm256_and_pd(_mm256_cmp_pd(down, zero, _CMP_EQ_OQ), odd));
    // inc and dec are all-ones masks: -1 each.
    const __m256i r = _mm256_add_epi64(_mm256_sub_epi64(qb, bitsOf(inc)), bitsOf(dec));
    return doubleOf(_mm256_or_si256(r, sign));
  }
  static WEFT_AVX2_INL void run(const __m256d* hi, const __m256d* lo, __m256i* flag, bool average,
                                __m256d n, __m256d invN, double* out) {
    const __m256d zero = _mm256_setzero_pd();
    for (int v = 0; v < kVecs; ++v) {
      const __m256d loZero = _mm256_cmp_pd(lo[v], zero, _CMP_EQ_OQ);
      __m256d r;
      if (average) {
        __m256i bad;
        const __m256d dd = average2(hi[v], lo[v], n, invN, &bad);
        r = _mm256_blendv_pd(dd, _mm256_div_pd(hi[v], n), loZero);
        flag[v] = _mm256_or_si256(flag[v], _mm256_andnot_si256(bitsOf(loZero), bad));
      } else {
        r = _mm256_blendv_pd(_mm256_add_pd(hi[v], lo[v]), hi[v], loZero);
      }
      flag[v] = _mm256_or_si256(flag[v], nonFinite(r));
      _mm256_storeu_pd(out + 4 * v, r);
    }
  }
};

// One group at element i: sums, rounds into out, returns the lanes to redo
// (bit j for element i + j).
template <typename T, bool kCheck>
WEFT_AVX2_INL uint32_t group(const void* const* srcs, int nsrc, size_t i, bool average, __m256d n,
                             __m256d invN, T* out) {
  constexpr int V = Load<T>::kVecs;
  constexpr bool kDouble = std::is_same<T, double>::value;
  __m256d hi[V], lo[V];
  __m256i flag[V];
  Load<T>::run(static_cast<const T*>(srcs[0]) + i, hi);
  for (int v = 0; v < V; ++v) {
    lo[v] = _mm256_setzero_pd();
    flag[v] = _mm256_setzero_si256();
  }
  for (int k = 1; k < nsrc; ++k) {
    __m256d x[V];
    Load<T>::run(static_cast<const T*>(srcs[k]) + i, x);
    for (int v = 0; v < V; ++v) {
      if constexpr (kDouble) {
        __m256d s, e, t, e2;
        twoSum(hi[v], x[v], &s, &e);
        twoSum(lo[v], e, &t, &e2);
        hi[v] = s;
        lo[v] = t;
        flag[v] = _mm256_or_si256(flag[v], bitsOf(e2));
      } else if constexpr (kCheck) {
        __m256d s, e;
        twoSum(hi[v], x[v], &s, &e);
        hi[v] = s;
        flag[v] = _mm256_or_si256(flag[v], bitsOf(e));
      } else {
        hi[v] = _mm256_add_pd(hi[v], x[v]);
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    // The error bits without their sign (a -0 error is no error).
    flag[v] = _mm256_andnot_si256(splat64(kSignMask), flag[v]);
    flag[v] = _mm256_or_si256(flag[v], nonFinite(hi[v]));
  }
  Round<T>::run(hi, lo, flag, average, n, invN, out);
  uint32_t mask = 0;
  for (int v = 0; v < V; ++v) {
    const __m256i clear = _mm256_cmpeq_epi64(flag[v], _mm256_setzero_si256());
    mask |= static_cast<uint32_t>(~_mm256_movemask_pd(_mm256_castsi256_pd(clear)) & 0xf) << (4 * v);
  }
  return mask;
}

// The narrow types' float lanes (groupFloat and its helpers).
#include "kernels/cpu/exact_avx2_float.h"

// The end of one block of m elements at element i: the lanes `redo` flags
// (a bit per lane, a word per group of G) go to the slow path; then the
// block is stored. Every source's block was read before dst's is written,
// so dst may be any source. Returns the elements redone.
template <typename T, size_t G>
uint64_t finishBlock(void* dst, const void* const* srcs, int nsrc, size_t i, size_t m, bool average,
                     const uint32_t* redo, uint32_t any, T* out) {
  uint64_t slow = 0;
  if (any != 0) {
    for (size_t j = 0; j < m; j += G) {
      for (uint32_t r = redo[j / G]; r != 0; r &= r - 1) {
        const size_t e = j + static_cast<size_t>(__builtin_ctz(r));
        out[e] = slowElement<T>(srcs, nsrc, i + e, average);
        ++slow;
      }
    }
  }
  std::memcpy(static_cast<T*>(dst) + i, out, m * sizeof(T));
  return slow;
}

template <typename T, bool kCheck>
WEFT_AVX2 void body(void* dst, const void* const* srcs, int nsrc, size_t count, bool average,
                    ExactSumCounters& counters) {
  constexpr size_t G = 4 * Load<T>::kVecs;
  const __m256d n = _mm256_set1_pd(static_cast<double>(nsrc));
  const __m256d invN = _mm256_set1_pd(1.0 / static_cast<double>(nsrc));
  // Average over one source is the sum (the divisions below would be exact anyway).
  average = average && nsrc > 1;
  alignas(32) T out[kBlock];
  uint32_t redo[kBlock / G];
  uint64_t slow = 0;
  const size_t whole = count - count % G;
  for (size_t i = 0; i < whole; i += kBlock) {
    const size_t m = whole - i < kBlock ? whole - i : kBlock;
    uint32_t any = 0;
    for (size_t j = 0; j < m; j += G) {
      redo[j / G] = group<T, kCheck>(srcs, nsrc, i + j, average, n, invN, out + j);
      any |= redo[j / G];
    }
    slow += finishBlock<T, G>(dst, srcs, nsrc, i, m, average, redo, any, out);
  }
  counters.fast += whole - slow;
  counters.slow += slow;
  if (whole < count) exactSumPortable<T>(dst, srcs, nsrc, whole, count, average, counters);
}

// The narrow types in float lanes, groups of 16; a group with a lane the
// float path cannot prove is redone whole by the double path (group<T,
// kCheckD>), whose own flagged lanes go to the slow path.
template <typename T, bool kCheckF, bool kCheckD>
WEFT_AVX2 void bodyFloat(void* dst, const void* const* srcs, int nsrc, size_t count, bool average,
                         ExactSumCounters& counters) {
  constexpr size_t G = 16;
  const __m256d n = _mm256_set1_pd(static_cast<double>(nsrc));
  const __m256d invN = _mm256_set1_pd(1.0 / static_cast<double>(nsrc));
  const __m256 nf = _mm256_set1_ps(static_cast<float>(nsrc));
  average = average && nsrc > 1;
  alignas(32) T out[kBlock];
  uint32_t redo[kBlock / G];
  uint64_t slow = 0, floatFast = 0;
  const size_t whole = count - count % G;
  for (size_t i = 0; i < whole; i += kBlock) {
    const size_t m = whole - i < kBlock ? whole - i : kBlock;
    uint32_t any = 0;
    for (size_t j = 0; j < m; j += G) {
      uint32_t r = groupFloat<T, kCheckF>(srcs, nsrc, i + j, average, nf, out + j);
      if (r != 0) {
        r = group<T, kCheckD>(srcs, nsrc, i + j, average, n, invN, out + j);
      } else {
        floatFast += G;
      }
      redo[j / G] = r;
      any |= r;
    }
    slow += finishBlock<T, G>(dst, srcs, nsrc, i, m, average, redo, any, out);
  }
  counters.fast += whole - slow;
  counters.slow += slow;
  counters.floatFast += floatFast;
  if (whole < count) exactSumPortable<T>(dst, srcs, nsrc, whole, count, average, counters);
}

// Where every sum of nsrc values of T is exact in double, the TwoSum check is skipped.
template <typename T>
WEFT_AVX2 void kernel(void* dst, const void* const* srcs, int nsrc, size_t count, bool average,
                      ExactSumCounters& counters) {
  constexpr int kSpan = Format<T>::kSpanBits;
  constexpr int kExactSources = kSpan >= 53 ? 0 : 53 - kSpan;  // log2
  const bool exactD = kExactSources > 0 && nsrc <= (int64_t{1} << kExactSources);
  if constexpr (Format<T>::kNarrow) {
    // In float, only e4m3 fits (n <= 64) without the check.
    constexpr int kFloatSources = kSpan >= 24 ? 0 : 24 - kSpan;  // log2
    const bool exactF = kFloatSources > 0 && nsrc <= (int64_t{1} << kFloatSources);
    if (nsrc <= (1 << 24) && defaultFloatMode()) {
      if (exactF) {
        bodyFloat<T, false, false>(dst, srcs, nsrc, count, average, counters);
      } else if (exactD) {
        bodyFloat<T, true, false>(dst, srcs, nsrc, count, average, counters);
      } else {
        bodyFloat<T, true, true>(dst, srcs, nsrc, count, average, counters);
      }
      return;
    }
  }
  if (exactD) {
    body<T, false>(dst, srcs, nsrc, count, average, counters);
  } else {
    body<T, true>(dst, srcs, nsrc, count, average, counters);
  }
}

}  // namespace
}  // namespace exact

namespace cpu {

bool fillAvx2ExactSum(HostKernels* k) {
  using namespace exact;
  k->exactSum[WEFT_FLOAT16] = &kernel<half_t>;
  k->exactSum[WEFT_FLOAT32] = &kernel<float>;
  k->exactSum[WEFT_FLOAT64] = &kernel<double>;
  k->exactSum[WEFT_BFLOAT16] = &kernel<bf16_t>;
  k->exactSum[WEFT_FP8_E4M3] = &kernel<fp8e4m3_t>;
  k->exactSum[WEFT_FP8_E5M2] = &kernel<fp8e5m2_t>;
  return true;
}

}  // namespace cpu
}  // namespace weft

#else  // not x86

namespace weft {
namespace cpu {
bool fillAvx2ExactSum(HostKernels*) { return false; }
}  // namespace cpu
}  // namespace weft

#endif
