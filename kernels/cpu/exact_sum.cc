// The exact-sum kernel (exact_sum.h): a fast path for typical data and an
// always-exact slow path (exact_slow.cc) for the elements the fast path
// cannot prove exact.
//
// Fast path, per block of kBlock elements: widen every source to double and
// add them in order, with TwoSum's error term e = (a - (s - bb)) + (x - bb)
// (bb = s - a) of every addition OR-ed into a per-element flag. TwoSum's e
// is exactly a + x - s whenever s is finite, so a zero flag proves every
// addition exact: the double holds the exact sum S. S is then rounded once
// to the type (AVG: q = S / n, with a round-to-odd fix of q when it lands
// on a midpoint of the type, see the docs). Where the type's whole range
// fits in double for this many sources (f16 below 2^13 sources, fp8 always)
// the check is skipped: every addition is exact by construction.
// float64 keeps a double-double (hi, lo): TwoSum's errors are themselves
// summed with TwoSum, and a zero flag there means hi + lo is the exact sum,
// which one IEEE addition rounds once.
// float64 AVG of such a pair is rounded once by averageDoubleDouble.
// The narrow types (f16, bf16, fp8) first try the same in float (floatBlock):
// TwoSum is error-free in float too, so a zero flag proves the float holds
// S, which ops.h's conversion rounds once (AVG: a float quotient rounded to
// odd first); where e4m3's range fits in float (n <= 64) the check is
// skipped. Elements the float path cannot prove go to the double path.
// Any element with a nonzero flag, a non-finite sum (NaN, infinities,
// overflow), or (float64 AVG with lo != 0) |hi + lo| < 2^-900, goes to the
// slow path.
//
// These plain loops are the portable kernel: the reference, the fallback and
// the tail of the vector kernels (exact_avx2.cc), which the dispatch table
// of dispatch.h picks like the other host kernels (tests force each ISA).
// A multiply feeding an add is either exact (n u / 2) or feeds only the
// approximate quotient of averageDoubleDouble, whose error the proof
// bounds, so FP contraction cannot change a result.
#include "kernels/cpu/exact_sum.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/exact_format.h"
#include "kernels/cpu/fp_mode.h"

namespace weft {
namespace exact {
namespace {

constexpr size_t kBlock = 256;
constexpr uint64_t kExpMask = 0x7ff0000000000000ull;
constexpr uint64_t kSignMask = 0x8000000000000000ull;

struct Scratch {
  double hi[kBlock];
  double lo[kBlock];  // float64 only
  uint64_t flag[kBlock];
  bool tie[kBlock];
};

// TwoSum's sum and error: s + e == a + x exactly when s is finite.
#define WEFT_TWO_SUM(a, x, s, e)       \
  do {                                 \
    s = (a) + (x);                     \
    const double bb_ = s - (a);        \
    e = ((a) - (s - bb_)) + ((x)-bb_); \
  } while (0)

// Sums the block [i, i + m) of every source into s.hi; s.flag is nonzero
// where an addition was not exact or the sum is not finite.
template <typename T>
__attribute__((always_inline)) inline void sumBlock(const void* const* srcs, int nsrc, size_t i,
                                                    size_t m, bool check, Scratch& s) {
  using F = Format<T>;
  const T* s0 = static_cast<const T*>(srcs[0]) + i;
  for (size_t j = 0; j < m; ++j) {
    s.hi[j] = F::widen(s0[j]);
    s.lo[j] = 0.0;
    s.flag[j] = 0;
  }
  for (int k = 1; k < nsrc; ++k) {
    const T* sk = static_cast<const T*>(srcs[k]) + i;
    if constexpr (std::is_same<T, double>::value) {
      for (size_t j = 0; j < m; ++j) {
        const double a = s.hi[j], x = sk[j], l = s.lo[j];
        double sum, e, t, e2;
        WEFT_TWO_SUM(a, x, sum, e);
        WEFT_TWO_SUM(l, e, t, e2);
        s.hi[j] = sum;
        s.lo[j] = t;
        s.flag[j] |= doubleBits(e2) << 1;
      }
    } else if (check) {
      for (size_t j = 0; j < m; ++j) {
        const double a = s.hi[j], x = F::widen(sk[j]);
        double sum, e;
        WEFT_TWO_SUM(a, x, sum, e);
        s.hi[j] = sum;
        s.flag[j] |= doubleBits(e) << 1;
      }
    } else {
      for (size_t j = 0; j < m; ++j) s.hi[j] += F::widen(sk[j]);
    }
  }
  for (size_t j = 0; j < m; ++j) {
    s.flag[j] |= (doubleBits(s.hi[j]) & kExpMask) == kExpMask ? 1 : 0;
  }
}

// float64 AVG: RN(S / n) for the exact sum S = hi + lo (lo != 0, n >= 2),
// without a wider type (docs/reproducibility.md has the proof). (H, L) is S
// renormalized (H = RN(S), L = S - H exactly), made positive; q0 = RN(H / n)
// corrected by an approximate (S - q0 n) / n gives q, within far less than
// half an ulp of any midpoint's distance from S / n, so RN(S / n) is q or a
// neighbour. R = H - q n is exact (one fma), and the signs of
// S - (q + u/2) n = (R - n u/2) + L and S - (q - u'/2) n = (R + n u'/2) + L
// (u, u' the spacings above and below q; each bracket is exact) say whether
// S / n is past the midpoint above or below q, or on it (ties to even).
// *ok is false below |H| = 2^-900 (then q >= 2^-932 and ulp(q) / 4 is a
// normal double built from q's exponent field) and for a non-finite H.
// (the caller's slow path decides those).
inline double averageDoubleDouble(double hi, double lo, double n, double invN, bool* ok) {
  double h, l;
  WEFT_TWO_SUM(hi, lo, h, l);
  const uint64_t sign = doubleBits(h) & kSignMask;
  h = bitsDouble(doubleBits(h) ^ sign);
  l = bitsDouble(doubleBits(l) ^ sign);
  *ok = h >= 0x1p-900 && h <= 0x1.fffffffffffffp1023;  // also false for NaN
  const double q0 = h / n;
  const double q = q0 + (std::fma(-q0, n, h) + l) * invN;
  const double rem = std::fma(-q, n, h);  // exact
  const uint64_t qb = doubleBits(q);
  const double u = bitsDouble((qb & kExpMask) - (uint64_t{52} << 52));       // ulp(q)
  const double below = (qb & 0xfffffffffffffull) == 0 ? 0.25 * u : 0.5 * u;  // half of q - pred(q)
  const double up = (rem - 0.5 * u * n) + l;  // S - (q + u/2) n, its sign exact
  const double down = (rem + below * n) + l;  // S - (q - u'/2) n
  const uint64_t odd = qb & 1;
  const uint64_t inc = (up > 0.0) | ((up == 0.0) & odd);
  const uint64_t dec = (down < 0.0) | ((down == 0.0) & odd);
  return bitsDouble((qb + inc - dec) | sign);
}

// Rounds the exact sums of the block to T into out; sets s.tie where AVG's
// quotient sits on a midpoint of T (fixed by fixTie) and s.flag where the
// slow path must decide.
template <typename T>
__attribute__((always_inline)) inline void roundBlock(size_t m, bool average, double n, Scratch& s,
                                                      T* out) {
  if constexpr (std::is_same<T, double>::value) {
    const double invN = 1.0 / n;
    for (size_t j = 0; j < m; ++j) {
      const double hi = s.hi[j], lo = s.lo[j];
      // lo == 0: hi is the exact sum (and carries IEEE's sign of a zero sum),
      // and one IEEE division rounds hi / n once.
      bool ok = true;
      double r;
      if (!average) {
        r = lo == 0.0 ? hi : hi + lo;
      } else if (lo == 0.0) {
        r = hi / n;
      } else {
        r = averageDoubleDouble(hi, lo, n, invN, &ok);
      }
      out[j] = r;
      s.flag[j] |= !ok || (doubleBits(r) & kExpMask) == kExpMask ? 1 : 0;
    }
  } else {
    if (std::is_same<T, float>::value && !average) {
      for (size_t j = 0; j < m; ++j) {
        const float r = static_cast<float>(s.hi[j]);  // one correct rounding of an exact value
        __builtin_memcpy(&out[j], &r, sizeof r);
        s.tie[j] = false;
      }
      return;
    }
    for (size_t j = 0; j < m; ++j) {
      const double q = average ? s.hi[j] / n : s.hi[j];
      const uint64_t b = doubleBits(q);
      bool tie;
      const uint64_t code = roundMagnitude<T>(b & ~kSignMask, &tie);
      out[j] = fromCode<T>(b >> 63, code);
      s.tie[j] = average && tie;
    }
  }
}

// AVG only: q = RN(S / n) landed on a midpoint of T. Rounding q again would
// be a double rounding; instead move q one double ulp towards S / n when the
// division was inexact (the sign of the exact residual S - q n says which
// way). The result is S / n rounded to odd at 53 bits, which rounds to T
// correctly (53 >= T's precision + 2).
template <typename T>
T fixTie(double sum, double n) {
  const double q = sum / n;
  uint64_t b = doubleBits(q);
  const double r = std::fma(-q, n, sum);  // zero, or of the exact residual's sign
  if (r != 0.0) b = ((r > 0.0) == (q > 0.0)) ? b + 1 : b - 1;
  bool tie;
  return fromCode<T>(b >> 63, roundMagnitude<T>(b & ~kSignMask, &tie));
}

// The double path for the block [i, i + m) into out (dst untouched): sums,
// one rounding, the midpoint fix, and the slow path for flagged elements,
// whose number is added to *slow.
template <typename T>
__attribute__((always_inline)) inline void doubleBlock(const void* const* srcs, int nsrc, size_t i,
                                                       size_t m, bool check, bool average, double n,
                                                       Scratch& s, T* out, uint64_t* slow) {
  sumBlock<T>(srcs, nsrc, i, m, check, s);
  roundBlock<T>(m, average, n, s, out);
  uint64_t any = 0;
  for (size_t j = 0; j < m; ++j) any |= s.flag[j];
  if constexpr (!std::is_same<T, double>::value) {
    for (size_t j = 0; j < m; ++j) any |= static_cast<uint64_t>(s.tie[j]);
  }
  if (any != 0) {
    for (size_t j = 0; j < m; ++j) {
      if (s.flag[j] != 0) {
        out[j] = slowElement<T>(srcs, nsrc, i + j, average);
        ++*slow;
      } else if constexpr (!std::is_same<T, double>::value) {
        if (s.tie[j]) out[j] = fixTie<T>(s.hi[j], n);
      }
    }
  }
}

// TwoSum in float: s + e == a + x exactly when s is finite.
#define WEFT_TWO_SUM_F(a, x, s, e)     \
  do {                                 \
    s = (a) + (x);                     \
    const float bb_ = s - (a);         \
    e = ((a) - (s - bb_)) + ((x)-bb_); \
  } while (0)

// The narrow types' float path for the block [i, i + m) into out: widen to
// float, add in order (with TwoSum's error bits OR-ed into flag where
// `check`), round once; flag is nonzero where the float sum is not proven
// exact or not finite (those elements are redone by the double path).
// AVG: q = RN24(S / n), rounded to odd at 24 bits with the exact residual
// S - q n (exact in double: q n has at most 49 bits), then rounded to T:
// correct for T's precision <= 22 (docs/reproducibility.md). n <= 2^24.
template <typename T>
__attribute__((always_inline)) inline void floatBlock(const void* const* srcs, int nsrc, size_t i,
                                                      size_t m, bool check, bool average, float* hi,
                                                      uint32_t* flag, T* out) {
  using F = Format<T>;
  const T* s0 = static_cast<const T*>(srcs[0]) + i;
  for (size_t j = 0; j < m; ++j) {
    hi[j] = F::widenFloat(s0[j]);
    flag[j] = 0;
  }
  for (int k = 1; k < nsrc; ++k) {
    const T* sk = static_cast<const T*>(srcs[k]) + i;
    if (check) {
      for (size_t j = 0; j < m; ++j) {
        const float a = hi[j], x = F::widenFloat(sk[j]);
        float sum, e;
        WEFT_TWO_SUM_F(a, x, sum, e);
        hi[j] = sum;
        flag[j] |= floatBits(e) << 1;
      }
    } else {
      for (size_t j = 0; j < m; ++j) hi[j] += F::widenFloat(sk[j]);
    }
  }
  const float nf = static_cast<float>(nsrc);
  const double n = static_cast<double>(nsrc);
  for (size_t j = 0; j < m; ++j) {
    const float sum = hi[j];
    flag[j] |= (floatBits(sum) & 0x7f800000u) == 0x7f800000u ? 1 : 0;
    float q = sum;
    if (average) {
      q = sum / nf;
      const double r = static_cast<double>(sum) - static_cast<double>(q) * n;  // exact
      const uint32_t b = floatBits(q);
      // Towards S / n (the magnitude grows when r has q's sign) when inexact and even.
      const uint32_t step = (r > 0.0) == ((b >> 31) == 0) ? 1u : ~0u;
      q = bitsFloat(b + (r != 0.0 && (b & 1) == 0 ? step : 0u));
    }
    out[j] = F::narrow(q);
  }
}

template <typename T>
__attribute__((always_inline)) inline void exactSumBody(void* dst, const void* const* srcs,
                                                        int nsrc, size_t begin, size_t count,
                                                        bool average, ExactSumCounters& counters) {
  using F = Format<T>;
  constexpr int kExactSources = F::kSpanBits >= 53 ? 0 : 53 - F::kSpanBits;  // log2
  const bool check = kExactSources == 0 || nsrc > (int64_t{1} << kExactSources);
  const double n = static_cast<double>(nsrc);
  Scratch s;
  T out[kBlock];
  uint64_t slow = 0, floatFast = 0;
  if constexpr (F::kNarrow) {
    constexpr int kFloatSources = F::kSpanBits >= 24 ? 0 : 24 - F::kSpanBits;  // log2
    const bool checkF = kFloatSources == 0 || nsrc > (int64_t{1} << kFloatSources);
    if (nsrc <= (1 << 24) && defaultFloatMode()) {
      float hi[kBlock];
      uint32_t flag[kBlock];
      for (size_t i = begin; i < count; i += kBlock) {
        const size_t m = count - i < kBlock ? count - i : kBlock;
        floatBlock<T>(srcs, nsrc, i, m, checkF, average, hi, flag, out);
        uint32_t any = 0;
        for (size_t j = 0; j < m; ++j) any |= flag[j];
        size_t redone = 0;
        if (any != 0) {
          for (size_t j = 0; j < m; ++j) {
            if (flag[j] != 0) {
              doubleBlock<T>(srcs, nsrc, i + j, 1, check, average, n, s, out + j, &slow);
              ++redone;
            }
          }
        }
        floatFast += m - redone;
        // Every source's block is read before dst's is written: dst may be any source.
        std::memcpy(static_cast<T*>(dst) + i, out, m * sizeof(T));
      }
      counters.fast += count - begin - slow;
      counters.slow += slow;
      counters.floatFast += floatFast;
      return;
    }
  }
  for (size_t i = begin; i < count; i += kBlock) {
    const size_t m = count - i < kBlock ? count - i : kBlock;
    doubleBlock<T>(srcs, nsrc, i, m, check, average, n, s, out, &slow);
    // Every source's block is read before dst's is written: dst may be any source.
    std::memcpy(static_cast<T*>(dst) + i, out, m * sizeof(T));
  }
  counters.fast += count - begin - slow;
  counters.slow += slow;
}

}  // namespace

template <typename T>
void exactSumPortable(void* dst, const void* const* srcs, int nsrc, size_t begin, size_t count,
                      bool average, ExactSumCounters& counters) {
  exactSumBody<T>(dst, srcs, nsrc, begin, count, average, counters);
}

namespace {

template <typename T>
void exactSumKernel(void* dst, const void* const* srcs, int nsrc, size_t count, bool average,
                    ExactSumCounters& counters) {
  exactSumPortable<T>(dst, srcs, nsrc, 0, count, average, counters);
}

}  // namespace
template void exactSumPortable<double>(void*, const void* const*, int, size_t, size_t, bool,
                                       ExactSumCounters&);
template void exactSumPortable<float>(void*, const void* const*, int, size_t, size_t, bool,
                                      ExactSumCounters&);
template void exactSumPortable<half_t>(void*, const void* const*, int, size_t, size_t, bool,
                                       ExactSumCounters&);
template void exactSumPortable<bf16_t>(void*, const void* const*, int, size_t, size_t, bool,
                                       ExactSumCounters&);
template void exactSumPortable<fp8e4m3_t>(void*, const void* const*, int, size_t, size_t, bool,
                                          ExactSumCounters&);
template void exactSumPortable<fp8e5m2_t>(void*, const void* const*, int, size_t, size_t, bool,
                                          ExactSumCounters&);

}  // namespace exact

ExactSumCounters& exactSumCounters() {
  static thread_local ExactSumCounters counters;
  return counters;
}

namespace cpu {

void fillPortableExactSum(HostKernels* k) {
  using namespace exact;
  k->exactSum[WEFT_FLOAT16] = &exactSumKernel<half_t>;
  k->exactSum[WEFT_FLOAT32] = &exactSumKernel<float>;
  k->exactSum[WEFT_FLOAT64] = &exactSumKernel<double>;
  k->exactSum[WEFT_BFLOAT16] = &exactSumKernel<bf16_t>;
  k->exactSum[WEFT_FP8_E4M3] = &exactSumKernel<fp8e4m3_t>;
  k->exactSum[WEFT_FP8_E5M2] = &exactSumKernel<fp8e5m2_t>;
}

}  // namespace cpu

bool exactSumHost(void* dst, const void* const* srcs, int nsrc, size_t count, weft_datatype_t dt,
                  bool average) {
  if (dt < 0 || dt >= WEFT_NUM_DATATYPES || nsrc < 1) return false;
  const cpu::ExactSumFn f = cpu::activeHostKernels().exactSum[dt];
  if (f == nullptr) return false;
  const DefaultFloatMode ieee;  // the proofs assume it (fp_mode.h)
  f(dst, srcs, nsrc, count, average, exactSumCounters());
  return true;
}

}  // namespace weft
