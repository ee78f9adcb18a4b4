// Internal to the exact-sum kernel (exact_sum.h): what it knows of each float
// format (field widths, largest finite code, infinity or saturation, the
// canonical NaN), the exact widening of a stored value to double (and, for
// the narrow formats, to float), and the single nearest-even rounding of a
// double magnitude (narrow formats: of a float) to the format.
#pragma once

#include <cstddef>
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kernels/cpu/exact_sum.h"
#include "kernels/ops.h"

namespace weft {
namespace exact {

// MB stored mantissa bits, BIAS the exponent bias, kMaxCode the largest finite
// magnitude's code, kInfCode infinity's (0 where the format saturates),
// kNanCode the canonical quiet NaN, kSpanBits = log2(largest finite / smallest
// subnormal) rounded up: a sum of up to 2^(53 - kSpanBits) values is exact in
// double whatever they are (2^(24 - kSpanBits) in float). The narrow formats
// (f16, bf16, fp8) also have kNarrow, widenFloat (exact) and narrow: the
// ops.h conversion of a float, rounded to nearest even once (fp8 saturates).
template <typename T>
struct Format;
template <>
struct Format<double> {
  using Bits = uint64_t;
  static constexpr int kMant = 52, kBias = 1023, kWidth = 64, kSpanBits = 2098;
  static constexpr uint64_t kMaxCode = 0x7fefffffffffffffull, kInfCode = 0x7ff0000000000000ull,
                            kNanCode = 0x7ff8000000000000ull;
  static double widen(double x) { return x; }
  static constexpr bool kNarrow = false;
};
template <>
struct Format<float> {
  using Bits = uint32_t;
  static constexpr int kMant = 23, kBias = 127, kWidth = 32, kSpanBits = 277;
  static constexpr uint64_t kMaxCode = 0x7f7fffff, kInfCode = 0x7f800000, kNanCode = 0x7fc00000;
  static double widen(float x) { return x; }
  static constexpr bool kNarrow = false;
};
template <>
struct Format<half_t> {
  using Bits = uint16_t;
  static constexpr int kMant = 10, kBias = 15, kWidth = 16, kSpanBits = 40;
  static constexpr uint64_t kMaxCode = 0x7bff, kInfCode = 0x7c00, kNanCode = 0x7e00;
  static double widen(half_t x) { return halfToFloat(x); }
  static constexpr bool kNarrow = true;
  static float widenFloat(half_t x) { return halfToFloat(x); }
  static half_t narrow(float x) { return floatToHalf(x); }
};
template <>
struct Format<bf16_t> {
  using Bits = uint16_t;
  static constexpr int kMant = 7, kBias = 127, kWidth = 16, kSpanBits = 261;
  static constexpr uint64_t kMaxCode = 0x7f7f, kInfCode = 0x7f80, kNanCode = 0x7fc0;
  static double widen(bf16_t x) { return bitsFloat(static_cast<uint32_t>(x.bits) << 16); }
  static constexpr bool kNarrow = true;
  static float widenFloat(bf16_t x) { return bf16ToFloat(x); }
  static bf16_t narrow(float x) { return floatToBf16(x); }
};
template <>
struct Format<fp8e4m3_t> {
  using Bits = uint8_t;
  static constexpr int kMant = 3, kBias = 7, kWidth = 8, kSpanBits = 18;
  static constexpr uint64_t kMaxCode = 0x7e, kInfCode = 0, kNanCode = 0x7f;
  static double widen(fp8e4m3_t x) { return fp8e4m3ToFloat(x); }
  static constexpr bool kNarrow = true;
  static float widenFloat(fp8e4m3_t x) { return fp8e4m3ToFloat(x); }
  static fp8e4m3_t narrow(float x) { return floatToFp8e4m3(x); }
};
template <>
struct Format<fp8e5m2_t> {
  using Bits = uint8_t;
  static constexpr int kMant = 2, kBias = 15, kWidth = 8, kSpanBits = 32;
  static constexpr uint64_t kMaxCode = 0x7b, kInfCode = 0, kNanCode = 0x7e;
  static double widen(fp8e5m2_t x) { return fp8e5m2ToFloat(x); }
  static constexpr bool kNarrow = true;
  static float widenFloat(fp8e5m2_t x) { return fp8e5m2ToFloat(x); }
  static fp8e5m2_t narrow(float x) { return floatToFp8e5m2(x); }
};

// The code (exponent << kMant | mantissa) of the magnitude a (double bits,
// sign cleared) rounded to nearest-even in T's format, subnormals included;
// overflow gives infinity, or the largest finite value where the format
// saturates. *tie is set when a lies exactly halfway between two codes (the
// AVG path needs to know). Inputs other than finite magnitudes give some
// code, never undefined behaviour. Branch-free, so loops of it vectorize.
template <typename T>
inline uint64_t roundMagnitude(uint64_t a, bool* tie) {
  using F = Format<T>;
  constexpr int kShift = 52 - F::kMant;
  constexpr uint64_t kHalf = uint64_t{1} << (kShift - 1);
  constexpr uint64_t kMinNormal = static_cast<uint64_t>(1023 - F::kBias + 1) << 52;
  // Normal in the target: drop kShift bits; a carry moves into the exponent.
  const uint64_t low = a & ((uint64_t{1} << kShift) - 1);
  const uint64_t normal = ((a + (kHalf - 1) + ((a >> kShift) & 1)) >> kShift) -
                          (static_cast<uint64_t>(1023 - F::kBias) << F::kMant);
  // Subnormal in the target: count quanta of 2^(1 - bias - mant). The shift
  // is at least 53 - kMant; past 54 every value rounds to 0 (no tie).
  const uint64_t e = a >> 52;
  const uint64_t m = (a & 0xfffffffffffffull) | (e != 0 ? uint64_t{1} << 52 : 0);
  uint64_t shift = static_cast<uint64_t>(1076 - F::kBias - F::kMant) - (e != 0 ? e : 1);
  shift = shift > 54 ? 54 : shift;
  shift = shift < 1 ? 1 : shift;  // only for normal inputs, whose result is not this one
  const uint64_t subLow = m & ((uint64_t{1} << shift) - 1);
  const uint64_t subHalf = uint64_t{1} << (shift - 1);
  const uint64_t sub = (m + (subHalf - 1) + ((m >> shift) & 1)) >> shift;
  const bool isNormal = a >= kMinNormal;
  uint64_t code = isNormal ? normal : sub;
  *tie = isNormal ? low == kHalf : subLow == subHalf;
  const uint64_t over = F::kInfCode != 0 ? F::kInfCode : F::kMaxCode;
  return code > F::kMaxCode ? over : code;
}

// Whether float arithmetic runs in IEEE's default mode here: round to
// nearest, subnormals neither flushed nor read as zero (x86: MXCSR's RC, FTZ
// and DAZ clear). The float-lane path of the narrow types needs it: bf16
// subnormals are float subnormals. (Their widening to double is immune.)
inline bool defaultFloatMode() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & 0xe040u) == 0;
#else
  return true;
#endif
}

// T's bits for a sign (0 or 1) and a magnitude code.
template <typename T>
inline T fromCode(uint64_t sign, uint64_t code) {
  using F = Format<T>;
  const typename F::Bits b = static_cast<typename F::Bits>(code | sign << (F::kWidth - 1));
  T out;
  __builtin_memcpy(&out, &b, sizeof out);
  return out;
}

// The exact slow path for element i (exact_slow.cc): special values, then a
// fixed-point sum of every source's value over T's whole range, divided by
// nsrc for AVG, rounded once. Returns T's bits.
template <typename T>
T slowElement(const void* const* srcs, int nsrc, size_t i, bool average);

// The portable fast path with its slow fallback (exact_sum.cc), for the
// elements [begin, count): the reference the vector kernels must equal, and
// their tail.
template <typename T>
void exactSumPortable(void* dst, const void* const* srcs, int nsrc, size_t begin, size_t count,
                      bool average, ExactSumCounters& counters);

}  // namespace exact
}  // namespace weft
