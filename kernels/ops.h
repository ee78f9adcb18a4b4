// The element arithmetic of weft's reductions, shared by the host kernels and
// (later) the CUDA kernels: storage types for the narrow floats, their
// conversions to and from float, and the Sum / Prod / Min / Max functors
// (and BitAnd / BitOr / BitXor for integer types).
//
// Semantics (identical on every path, vectorized or not):
//  * Integers wrap around (two's complement): arithmetic is done in unsigned.
//  * float16, bfloat16 and fp8 are widened to float, combined in float and
//    rounded back to nearest-even once per pairwise op.
//  * float -> half: IEEE binary16 with subnormals and infinities; a NaN stays
//    a NaN and comes back quiet (as F16C's vcvtps2ph does). half -> float
//    quiets a signalling NaN too (as vcvtph2ps does).
//  * float -> bfloat16: round to nearest even; a NaN comes back quiet.
//  * fp8 follows the OCP FP8 spec. E4M3: bias 7, largest 448, no infinity,
//    NaN = S.1111.111. E5M2: bias 15, IEEE-like with infinities and NaNs.
//    float -> fp8 saturates finite overflow and infinities to the largest
//    finite value (CUDA's __NV_SATFINITE); a NaN stays a NaN. Every fp8 bit
//    pattern survives fp8 -> float -> fp8 unchanged.
//  * Min / Max of floats follow IEEE fmin / fmax: a NaN loses to a number; two
//    NaNs give the first one. For equal operands (+0 and -0) Min gives -0 and
//    Max +0, so both are commutative on numbers.
//
// Header-only; needs nothing from <cmath>, so it compiles for the device too.
#pragma once

#include <stdint.h>

#include <type_traits>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__
#else
#define WEFT_HD
#endif

namespace weft {

// ---- Storage types --------------------------------------------------------

struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};
struct fp8e4m3_t {
  uint8_t bits;
};
struct fp8e5m2_t {
  uint8_t bits;
};

// ---- Bit casts ------------------------------------------------------------

WEFT_HD inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}
WEFT_HD inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}
WEFT_HD inline uint64_t doubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  __builtin_memcpy(&u, &d, sizeof u);
  return u;
#endif
}
WEFT_HD inline double bitsDouble(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  __builtin_memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// ---- Conversions ----------------------------------------------------------

namespace detail {

// Rounds |x| (float bits `a`, finite and below the format's overflow bound)
// to nearest-even in a format with MB mantissa bits and exponent bias BIAS;
// returns exponent << MB | mantissa. Subnormals included; a carry into the
// next binade (or into the smallest normal) comes out right by construction.
template <int MB, int BIAS>
WEFT_HD constexpr uint32_t roundMagnitude(uint32_t a) {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - BIAS + 1) << 23;
  if (a >= kMinNormal) {
    const uint32_t r = a + ((1u << (22 - MB)) - 1) + ((a >> (23 - MB)) & 1u);
    return (r >> (23 - MB)) - (static_cast<uint32_t>(127 - BIAS) << MB);
  }
  // Subnormal in the target: count quanta of 2^(1-BIAS-MB). A float subnormal
  // (exponent 0) gets the clamped shift and rounds to 0, whatever its mantissa.
  uint32_t shift = static_cast<uint32_t>(151 - BIAS - MB) - (a >> 23);
  if (shift > 25) shift = 25;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return (m + ((1u << (shift - 1)) - 1) + ((m >> shift) & 1u)) >> shift;
}

}  // namespace detail

WEFT_HD inline float halfToFloat(half_t h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t e = (h.bits >> 10) & 0x1fu;
  const uint32_t m = h.bits & 0x3ffu;
  if (e == 31) return bitsFloat(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) return bitsFloat(sign | floatBits(static_cast<float>(m) * 5.9604644775390625e-8f));
  return bitsFloat(sign | ((e + 112) << 23) | (m << 13));
}

WEFT_HD inline half_t floatToHalf(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t h;
  if (a > 0x7f800000u) {
    h = 0x7e00u | ((a >> 13) & 0x3ffu);  // NaN, quiet
  } else if (a >= 0x477ff000u) {
    h = 0x7c00u;  // >= 65520 (the tie above 65504) rounds to infinity
  } else {
    h = detail::roundMagnitude<10, 15>(a);
  }
  return half_t{static_cast<uint16_t>(sign | h)};
}

WEFT_HD inline float bf16ToFloat(bf16_t b) {
  return bitsFloat(static_cast<uint32_t>(b.bits) << 16);
}

WEFT_HD inline bf16_t floatToBf16(float f) {
  const uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<uint16_t>((x >> 16) | 0x40u)};
  return bf16_t{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}

WEFT_HD inline float fp8e4m3ToFloat(fp8e4m3_t v) {
  const uint32_t sign = static_cast<uint32_t>(v.bits & 0x80u) << 24;
  const uint32_t mag = v.bits & 0x7fu;
  if (mag == 0x7f) return bitsFloat(sign | 0x7fc00000u);
  if (mag < 8) return bitsFloat(sign | floatBits(static_cast<float>(mag) * 0.001953125f));  // 2^-9
  return bitsFloat(sign | ((mag << 20) + (120u << 23)));
}

WEFT_HD inline fp8e4m3_t floatToFp8e4m3(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t c;
  if (a > 0x7f800000u) {
    c = 0x7f;  // NaN
  } else if (a >= 0x43e00000u) {
    c = 0x7e;  // >= 448, infinity included: saturate
  } else {
    c = detail::roundMagnitude<3, 7>(a);
  }
  return fp8e4m3_t{static_cast<uint8_t>(sign | c)};
}

WEFT_HD inline float fp8e5m2ToFloat(fp8e5m2_t v) {
  const uint32_t sign = static_cast<uint32_t>(v.bits & 0x80u) << 24;
  const uint32_t mag = v.bits & 0x7fu;
  if (mag >= 0x7c) return bitsFloat(sign | 0x7f800000u | ((mag & 3u) << 21));  // inf, NaN
  if (mag < 4) return bitsFloat(sign | floatBits(static_cast<float>(mag) * 1.52587890625e-5f));
  return bitsFloat(sign | ((mag << 21) + (112u << 23)));
}

WEFT_HD inline fp8e5m2_t floatToFp8e5m2(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t c;
  if (a > 0x7f800000u) {
    const uint32_t payload = (a >> 21) & 3u;
    c = 0x7cu | (payload ? payload : 2u);  // NaN, payload kept when it fits
  } else if (a >= 0x47600000u) {
    c = 0x7b;  // >= 57344, infinity included: saturate
  } else {
    c = detail::roundMagnitude<2, 15>(a);
  }
  return fp8e5m2_t{static_cast<uint8_t>(sign | c)};
}

// ---- Accumulation types -------------------------------------------------

// Arith<T>::Acc is the type a reduction of T combines in; toAcc / fromAcc
// widen and round back.
template <typename T>
struct Arith {
  using Acc = T;
  WEFT_HD static constexpr Acc toAcc(T x) { return x; }
  WEFT_HD static constexpr T fromAcc(Acc x) { return x; }
};
template <>
struct Arith<half_t> {
  using Acc = float;
  WEFT_HD static Acc toAcc(half_t x) { return halfToFloat(x); }
  WEFT_HD static half_t fromAcc(Acc x) { return floatToHalf(x); }
};
template <>
struct Arith<bf16_t> {
  using Acc = float;
  WEFT_HD static Acc toAcc(bf16_t x) { return bf16ToFloat(x); }
  WEFT_HD static bf16_t fromAcc(Acc x) { return floatToBf16(x); }
};
template <>
struct Arith<fp8e4m3_t> {
  using Acc = float;
  WEFT_HD static Acc toAcc(fp8e4m3_t x) { return fp8e4m3ToFloat(x); }
  WEFT_HD static fp8e4m3_t fromAcc(Acc x) { return floatToFp8e4m3(x); }
};
template <>
struct Arith<fp8e5m2_t> {
  using Acc = float;
  WEFT_HD static Acc toAcc(fp8e5m2_t x) { return fp8e5m2ToFloat(x); }
  WEFT_HD static fp8e5m2_t fromAcc(Acc x) { return floatToFp8e5m2(x); }
};

// ---- Element operations on accumulation types ---------------------------

namespace detail {

// The unsigned type integer arithmetic of I wraps in (never promoted to int).
template <typename I>
using WrapUnsigned =
    std::conditional_t<(sizeof(I) < sizeof(unsigned)), unsigned, std::make_unsigned_t<I>>;

}  // namespace detail

template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accAdd(I a, I b) {
  using U = detail::WrapUnsigned<I>;
  return static_cast<I>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accMul(I a, I b) {
  using U = detail::WrapUnsigned<I>;
  return static_cast<I>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accMin(I a, I b) {
  return b < a ? b : a;
}
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accMax(I a, I b) {
  return a < b ? b : a;
}
// Bitwise ops: integer types only (the kernel tables and the API refuse them
// on floating types; bool tensors travel as uint8, where they are AND/OR/XOR).
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accAnd(I a, I b) {
  return static_cast<I>(a & b);
}
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accOr(I a, I b) {
  return static_cast<I>(a | b);
}
template <typename I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
WEFT_HD constexpr I accXor(I a, I b) {
  return static_cast<I>(a ^ b);
}

WEFT_HD inline float accAdd(float a, float b) { return a + b; }
WEFT_HD inline float accMul(float a, float b) { return a * b; }
WEFT_HD inline double accAdd(double a, double b) { return a + b; }
WEFT_HD inline double accMul(double a, double b) { return a * b; }

// fmin / fmax, as selects (no branches to mispredict on random data):
// a < b ? a : b (what x86 minps computes), then a|b for equal operands (-0
// wins), then a when b is a NaN. The vector kernels do the same three steps.
WEFT_HD inline float accMin(float a, float b) {
  const float m = a < b ? a : b;
  const float e = a == b ? bitsFloat(floatBits(a) | floatBits(b)) : m;
  return b != b ? a : e;
}
WEFT_HD inline float accMax(float a, float b) {
  const float m = a > b ? a : b;
  const float e = a == b ? bitsFloat(floatBits(a) & floatBits(b)) : m;  // +0 wins
  return b != b ? a : e;
}
WEFT_HD inline double accMin(double a, double b) {
  const double m = a < b ? a : b;
  const double e = a == b ? bitsDouble(doubleBits(a) | doubleBits(b)) : m;
  return b != b ? a : e;
}
WEFT_HD inline double accMax(double a, double b) {
  const double m = a > b ? a : b;
  const double e = a == b ? bitsDouble(doubleBits(a) & doubleBits(b)) : m;
  return b != b ? a : e;
}

// ---- Functors ---------------------------------------------------------------

// Each functor combines two T (widening, combining, rounding back once) and
// exposes `combine` on the accumulation type for multi-source reductions that
// round only at the end.
#define WEFT_DEFINE_FUNCTOR(NAME, FN)                                       \
  template <typename T>                                                     \
  struct NAME {                                                             \
    using Acc = typename Arith<T>::Acc;                                     \
    WEFT_HD static Acc combine(Acc a, Acc b) { return FN(a, b); }           \
    WEFT_HD T operator()(T a, T b) const {                                  \
      return Arith<T>::fromAcc(FN(Arith<T>::toAcc(a), Arith<T>::toAcc(b))); \
    }                                                                       \
  };
WEFT_DEFINE_FUNCTOR(Sum, accAdd)
WEFT_DEFINE_FUNCTOR(Prod, accMul)
WEFT_DEFINE_FUNCTOR(Min, accMin)
WEFT_DEFINE_FUNCTOR(Max, accMax)
WEFT_DEFINE_FUNCTOR(BitAnd, accAnd)
WEFT_DEFINE_FUNCTOR(BitOr, accOr)
WEFT_DEFINE_FUNCTOR(BitXor, accXor)
#undef WEFT_DEFINE_FUNCTOR

}  // namespace weft
