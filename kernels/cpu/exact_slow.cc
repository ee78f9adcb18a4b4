// The exact slow path of the exact-sum kernel (exact_sum.h): one element at a
// time, for the elements whose double sum was not exact (a wide exponent
// spread, cancellation in double, overflow) or held a NaN or an infinity.
//
// Every finite double is m * 2^(e - 1075) with integer m < 2^53, so every
// input is an integer multiple of 2^-1076 (two guard bits below double's
// smallest subnormal, so that AVG's quotient keeps its rounding bit). The sum
// is kept exactly as a fixed-point integer in 32-bit digits held in int64
// limbs: each value adds or subtracts three digits, and a limb absorbs up to
// 2^31 of them before it could overflow, so carries are propagated once, at
// the end. 68 limbs hold 2^2176, above 2^31 sources of DBL_MAX (2^1024 *
// 2^1076 * 2^31 = 2^2131). AVG divides that integer by nsrc (long division,
// the remainder becomes a sticky bit); the result is rounded once to the
// format.
#include <cstring>

#include "kernels/cpu/exact_format.h"

namespace weft {
namespace exact {
namespace {

constexpr int kLimbs = 68;
constexpr int kGuard = 1076;  // bit 0 of the accumulator is 2^-kGuard

struct SuperAccumulator {
  int64_t limb[kLimbs];
  int lo = kLimbs, hi = -1;  // the limbs touched

  SuperAccumulator() { std::memset(limb, 0, sizeof limb); }

  void add(double x) {
    const uint64_t b = doubleBits(x);
    uint64_t e = (b >> 52) & 0x7ff;
    uint64_t m = b & 0xfffffffffffffull;
    if (e != 0) {
      m |= uint64_t{1} << 52;
    } else {
      e = 1;
    }
    if (m == 0) return;
    const int pos = static_cast<int>(e) + 1;  // m's bit 0 is 2^(e - 1075) = bit e + 1
    const int idx = pos >> 5;
    const unsigned __int128 v = static_cast<unsigned __int128>(m) << (pos & 31);
    const int64_t d[3] = {static_cast<int64_t>(static_cast<uint64_t>(v) & 0xffffffffu),
                          static_cast<int64_t>(static_cast<uint64_t>(v >> 32) & 0xffffffffu),
                          static_cast<int64_t>(static_cast<uint64_t>(v >> 64))};
    if (b >> 63) {
      for (int j = 0; j < 3; ++j) limb[idx + j] -= d[j];
    } else {
      for (int j = 0; j < 3; ++j) limb[idx + j] += d[j];
    }
    lo = idx < lo ? idx : lo;
    hi = idx + 2 > hi ? idx + 2 : hi;
  }

  // Propagates carries over [lo, hi + 1]; every limb there ends in
  // [0, 2^32). Returns the carry out of the top: 0, or -1 for a negative sum
  // (its magnitude is below 2^(32 (hi + 1) + 31), so one more limb holds it).
  int64_t propagate() {
    int64_t carry = 0;
    for (int i = lo; i <= hi + 1; ++i) {
      const int64_t v = limb[i] + carry;
      carry = v >> 32;  // arithmetic shift: floor division by 2^32
      limb[i] = v & 0xffffffff;
    }
    return carry;
  }

  // Normalizes to a magnitude; returns whether the sum is negative.
  bool normalize() {
    if (hi < 0) return false;
    if (propagate() == 0) return false;
    // Negative: -(x) is the two's complement; negating each digit and
    // propagating again is the same number with the sign flipped.
    for (int i = lo; i <= hi + 1; ++i) limb[i] = -limb[i];
    propagate();
    return true;
  }

  bool isZero() const {
    for (int i = lo; i <= hi + 1 && i < kLimbs; ++i) {
      if (limb[i] != 0) return false;
    }
    return true;
  }

  // Long division of the magnitude by n (< 2^31); returns whether the
  // remainder is nonzero. Runs down to limb 0: the quotient has bits below lo.
  bool divide(uint64_t n) {
    uint64_t rem = 0;
    for (int i = hi + 1; i >= 0; --i) {
      const uint64_t cur = rem << 32 | static_cast<uint64_t>(limb[i]);
      limb[i] = static_cast<int64_t>(cur / n);
      rem = cur % n;
    }
    lo = 0;
    return rem != 0;
  }

  int topBit() const {
    for (int i = hi + 1; i >= 0; --i) {
      if (limb[i] != 0) return 32 * i + 63 - __builtin_clzll(static_cast<uint64_t>(limb[i]));
    }
    return -1;
  }

  // Bits [pos, pos + 54) of the magnitude.
  uint64_t bitsAt(int pos) const {
    const int idx = pos >> 5;
    unsigned __int128 v = 0;
    for (int j = 2; j >= 0; --j) {
      const uint64_t d = idx + j < kLimbs ? static_cast<uint64_t>(limb[idx + j]) : 0;
      v = v << 32 | d;
    }
    return static_cast<uint64_t>(v >> (pos & 31)) & ((uint64_t{1} << 54) - 1);
  }

  // Whether any bit below pos is set.
  bool anyBelow(int pos) const {
    const int idx = pos >> 5;
    for (int i = 0; i < idx; ++i) {
      if (limb[i] != 0) return true;
    }
    return (static_cast<uint64_t>(limb[idx]) & ((uint64_t{1} << (pos & 31)) - 1)) != 0;
  }
};

// The magnitude code of acc (nonzero, plus `sticky` below its last bit)
// rounded once to nearest-even in T's format. The last kept bit sits at
// position L = max(top - kMant, s0), s0 being the smallest subnormal's
// position; code = ((L - s0) << kMant) + kept works for normal and subnormal
// results alike, and a rounding carry lands in the exponent by itself.
template <typename T>
uint64_t roundAccumulator(const SuperAccumulator& acc, bool sticky) {
  using F = Format<T>;
  constexpr int s0 = 1 - F::kBias - F::kMant + kGuard;
  const int top = acc.topBit();
  const int last = top - F::kMant > s0 ? top - F::kMant : s0;
  const uint64_t kept = acc.bitsAt(last) & ((uint64_t{1} << (F::kMant + 1)) - 1);
  const bool round = (acc.bitsAt(last - 1) & 1) != 0;
  sticky = sticky || acc.anyBelow(last - 1);
  const uint64_t up = round && (sticky || (kept & 1)) ? 1 : 0;
  const uint64_t code = (static_cast<uint64_t>(last - s0) << F::kMant) + kept + up;
  if (code > F::kMaxCode) return F::kInfCode != 0 ? F::kInfCode : F::kMaxCode;
  return code;
}

}  // namespace

template <typename T>
T slowElement(const void* const* srcs, int nsrc, size_t i, bool average) {
  using F = Format<T>;
  bool nan = false, posInf = false, negInf = false, allNegZero = true;
  SuperAccumulator acc;
  for (int k = 0; k < nsrc; ++k) {
    const double x = F::widen(static_cast<const T*>(srcs[k])[i]);
    const uint64_t b = doubleBits(x);
    allNegZero = allNegZero && b == 0x8000000000000000ull;
    if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) {
      if (b & 0xfffffffffffffull) {
        nan = true;
      } else if (b >> 63) {
        negInf = true;
      } else {
        posInf = true;
      }
      continue;
    }
    acc.add(x);
  }
  if (nan || (posInf && negInf)) return fromCode<T>(0, F::kNanCode);
  if (posInf || negInf) {
    return fromCode<T>(negInf ? 1 : 0, F::kInfCode != 0 ? F::kInfCode : F::kMaxCode);
  }
  const bool negative = acc.normalize();
  if (acc.isZero()) return fromCode<T>(allNegZero ? 1 : 0, 0);
  const bool sticky = average && nsrc > 1 && acc.divide(static_cast<uint64_t>(nsrc));
  return fromCode<T>(negative ? 1 : 0, roundAccumulator<T>(acc, sticky));
}

template double slowElement<double>(const void* const*, int, size_t, bool);
template float slowElement<float>(const void* const*, int, size_t, bool);
template half_t slowElement<half_t>(const void* const*, int, size_t, bool);
template bf16_t slowElement<bf16_t>(const void* const*, int, size_t, bool);
template fp8e4m3_t slowElement<fp8e4m3_t>(const void* const*, int, size_t, bool);
template fp8e5m2_t slowElement<fp8e5m2_t>(const void* const*, int, size_t, bool);

}  // namespace exact
}  // namespace weft
