// The independent references of the kernel tests: narrow float formats
// decoded and rounded from exact double arithmetic (frexp / ldexp),
// reductions element by element with plain C++ operators, random data of
// every type, and a guard that forces one instruction set.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "kernels/ops.h"

using namespace weft;

namespace kref {

// ---- Reference narrow-float formats --------------------------------------------

struct Fmt {
  const char* name;
  int ebits, mbits, bias;
  bool hasInf;     // IEEE-like: all-ones exponent is inf / NaN
  bool satfinite;  // overflow and inf go to the largest finite value
  double maxFinite;
};
// inline: one object each in the whole program. The formats are told apart
// by address (implDecode), and narrowFmt, an inline function, hands out
// these addresses: with a copy per translation unit (a namespace-scope const
// alone), a test file compared its own copy against another file's, and
// every format but e5m2 went through e5m2's conversions where narrowFmt was
// not inlined (the -O1 sanitizer build, docs/sanitizers.md).
inline const Fmt kHalf{"half", 5, 10, 15, true, false, 65504.0};
inline const Fmt kBf16{"bf16", 8, 7, 127, true, false, std::ldexp(255.0, 120)};
inline const Fmt kE4M3{"e4m3", 4, 3, 7, false, true, 448.0};
inline const Fmt kE5M2{"e5m2", 5, 2, 15, true, true, 57344.0};

inline uint32_t signBit(const Fmt& f) { return 1u << (f.ebits + f.mbits); }
inline uint32_t expMask(const Fmt& f) { return (1u << f.ebits) - 1; }

inline bool refIsNan(const Fmt& f, uint32_t b) {
  const uint32_t e = (b >> f.mbits) & expMask(f), m = b & ((1u << f.mbits) - 1);
  if (f.hasInf) return e == expMask(f) && m != 0;
  return e == expMask(f) && m == (1u << f.mbits) - 1;  // E4M3: S.1111.111
}

// Value of a finite / infinite pattern; NaN patterns are not asked for.
inline double refDecode(const Fmt& f, uint32_t b) {
  const double s = (b & signBit(f)) ? -1.0 : 1.0;
  const int e = static_cast<int>((b >> f.mbits) & expMask(f));
  const int m = static_cast<int>(b & ((1u << f.mbits) - 1));
  if (f.hasInf && e == static_cast<int>(expMask(f))) return s * INFINITY;
  if (e == 0) return s * std::ldexp(m, 1 - f.bias - f.mbits);
  return s * std::ldexp((1 << f.mbits) + m, e - f.bias - f.mbits);
}

// Round-to-nearest-even of a non-NaN float, from exact double arithmetic.
inline uint32_t refEncode(const Fmt& f, float x) {
  const uint32_t sign = std::signbit(x) ? signBit(f) : 0;
  const double v = std::fabs(static_cast<double>(x));
  const uint32_t maxCode = f.hasInf ? ((expMask(f) - 1) << f.mbits) | ((1u << f.mbits) - 1)
                                    : (expMask(f) << f.mbits) | ((1u << f.mbits) - 2);
  const uint32_t overflow = f.satfinite ? maxCode : expMask(f) << f.mbits;
  if (std::isinf(v)) return sign | overflow;
  if (v == 0) return sign;
  int E;
  std::frexp(v, &E);  // v in [2^(E-1), 2^E)
  const int e = std::max(E - 1, 1 - f.bias);
  const double q = std::ldexp(1.0, e - f.mbits);  // spacing of the format at v
  const double n = v / q;                         // exact: a power-of-two scale
  double k = std::floor(n);
  const double frac = n - k;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(k, 2.0) == 1.0)) k += 1;
  const double r = k * q;
  if (r > f.maxFinite) return sign | overflow;
  if (r == 0) return sign;
  int E2;
  std::frexp(r, &E2);
  const int e2 = E2 - 1;
  if (e2 < 1 - f.bias)
    return sign | static_cast<uint32_t>(r / std::ldexp(1.0, 1 - f.bias - f.mbits));
  const uint32_t mant = static_cast<uint32_t>(r / std::ldexp(1.0, e2 - f.mbits)) - (1u << f.mbits);
  return sign | (static_cast<uint32_t>(e2 + f.bias) << f.mbits) | mant;
}

inline uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint64_t dbits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// The implementation's conversions, by format.
inline float implDecode(const Fmt& f, uint32_t b) {
  if (&f == &kHalf) return halfToFloat(half_t{static_cast<uint16_t>(b)});
  if (&f == &kBf16) return bf16ToFloat(bf16_t{static_cast<uint16_t>(b)});
  if (&f == &kE4M3) return fp8e4m3ToFloat(fp8e4m3_t{static_cast<uint8_t>(b)});
  return fp8e5m2ToFloat(fp8e5m2_t{static_cast<uint8_t>(b)});
}
inline uint32_t implEncode(const Fmt& f, float x) {
  if (&f == &kHalf) return floatToHalf(x).bits;
  if (&f == &kBf16) return floatToBf16(x).bits;
  if (&f == &kE4M3) return floatToFp8e4m3(x).bits;
  return floatToFp8e5m2(x).bits;
}

// The documented NaN results of float -> format.
inline uint32_t nanEncode(const Fmt& f, float x) {
  const uint32_t u = fbits(x);
  const uint32_t sign = (u >> 31) ? signBit(f) : 0;
  if (&f == &kHalf) return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
  if (&f == &kBf16) return (u >> 16) | 0x40u;
  if (&f == &kE4M3) return sign | 0x7fu;
  const uint32_t p = (u >> 21) & 3u;
  return sign | 0x7cu | (p ? p : 2u);
}

// Checks float -> format on one value against the reference.
inline void checkEncode(const Fmt& f, float x) {
  const uint32_t want = std::isnan(x) ? nanEncode(f, x) : refEncode(f, x);
  const uint32_t got = implEncode(f, x);
  if (got != want) {
    INFO(f.name << " encode of float bits 0x" << std::hex << fbits(x) << " (" << x << "): got 0x"
                << got << ", want 0x" << want);
    CHECK(got == want);
  }
}

// Floats around every value of a format: the value, the midpoints to its
// neighbours (exact ties), one float ulp either side of those midpoints.
inline void checkAroundEveryValue(const Fmt& f) {
  const uint32_t n = 1u << (1 + f.ebits + f.mbits);
  for (uint32_t b = 0; b < n; ++b) {
    if (refIsNan(f, b)) continue;
    const double v = refDecode(f, b);
    if (std::isinf(v)) continue;
    checkEncode(f, static_cast<float>(v));
    if (b & signBit(f)) continue;  // the negative side is done by symmetry below
    const double next = refDecode(f, b + 1);
    const double up =
        std::isinf(next) || refIsNan(f, b + 1)
            ? v + std::ldexp(1.0, static_cast<int>(std::floor(std::log2(v))) - f.mbits)
            : next;
    const float mid = static_cast<float>((v + up) / 2);  // exact in float for these formats
    REQUIRE(static_cast<double>(mid) == (v + up) / 2);
    for (float s : {1.0f, -1.0f}) {
      checkEncode(f, s * mid);
      checkEncode(f, s * std::nextafter(mid, 0.0f));
      checkEncode(f, s * std::nextafter(mid, INFINITY));
    }
  }
}

// ---- Typed access to byte buffers ----------------------------------------------

template <typename T>
T ld(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <typename T>
void st(uint8_t* p, T x) {
  std::memcpy(p, &x, sizeof x);
}

const weft_datatype_t kAllTypes[] = {WEFT_INT8,    WEFT_UINT8,    WEFT_INT32,    WEFT_UINT32,
                                     WEFT_INT64,   WEFT_UINT64,   WEFT_FLOAT16,  WEFT_FLOAT32,
                                     WEFT_FLOAT64, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2};
const weft_op_t kAllOps[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN,
                             WEFT_AVG, WEFT_BAND, WEFT_BOR, WEFT_BXOR};

inline const Fmt* narrowFmt(weft_datatype_t dt) {
  switch (dt) {
    case WEFT_FLOAT16:
      return &kHalf;
    case WEFT_BFLOAT16:
      return &kBf16;
    case WEFT_FP8_E4M3:
      return &kE4M3;
    case WEFT_FP8_E5M2:
      return &kE5M2;
    default:
      return nullptr;
  }
}

inline bool isFloatType(weft_datatype_t dt) {
  return dt == WEFT_FLOAT32 || dt == WEFT_FLOAT64 || narrowFmt(dt) != nullptr;
}

// Element i of a buffer of type dt is a NaN.
inline bool elemIsNan(weft_datatype_t dt, const uint8_t* p) {
  if (const Fmt* f = narrowFmt(dt)) {
    const uint32_t b = datatypeSize(dt) == 1 ? p[0] : ld<uint16_t>(p);
    return refIsNan(*f, b);
  }
  if (dt == WEFT_FLOAT32) return std::isnan(ld<float>(p));
  if (dt == WEFT_FLOAT64) return std::isnan(ld<double>(p));
  return false;
}

// Reference fmin / fmax: a NaN loses to a number; of two NaNs, the first;
// -0 is below +0.
template <typename F>
F refMin(F a, F b) {
  if (std::isnan(b)) return a;
  if (std::isnan(a)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
template <typename F>
F refMax(F a, F b) {
  if (std::isnan(b)) return a;
  if (std::isnan(a)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

template <typename F>
F refFloatOp(weft_op_t op, F a, F b) {
  switch (op) {
    case WEFT_PROD:
      return a * b;
    case WEFT_MAX:
      return refMax(a, b);
    case WEFT_MIN:
      return refMin(a, b);
    default:
      return a + b;
  }
}

template <typename I>
I refIntOp(weft_op_t op, I a, I b) {
  const uint64_t ua = static_cast<uint64_t>(static_cast<int64_t>(a));  // sign-extends signed
  const uint64_t ub = static_cast<uint64_t>(static_cast<int64_t>(b));
  switch (op) {
    case WEFT_PROD:
      return static_cast<I>(ua * ub);
    case WEFT_MAX:
      return a < b ? b : a;
    case WEFT_MIN:
      return a < b ? a : b;
    case WEFT_BAND:
      return static_cast<I>(ua & ub);
    case WEFT_BOR:
      return static_cast<I>(ua | ub);
    case WEFT_BXOR:
      return static_cast<I>(ua ^ ub);
    default:
      return static_cast<I>(ua + ub);
  }
}

// Narrow float element -> float, from the reference decoder (NaN: a quiet NaN
// of the same sign; NaN results are compared as "is a NaN" only).
inline float refNarrowToFloat(const Fmt& f, uint32_t b) {
  if (refIsNan(f, b)) return (b & signBit(f)) ? -NAN : NAN;
  return static_cast<float>(refDecode(f, b));
}

// out = op(srcs[0][i], ..., srcs[n-1][i]), left to right; narrow types
// accumulate in float and round once.
inline void refElem(weft_datatype_t dt, weft_op_t op, const std::vector<const uint8_t*>& srcs,
                    size_t i, uint8_t* out) {
  const size_t es = datatypeSize(dt);
#define REF_INT(T)                                                                             \
  {                                                                                            \
    T acc = ld<T>(srcs[0] + i * es);                                                           \
    for (size_t k = 1; k < srcs.size(); ++k) acc = refIntOp(op, acc, ld<T>(srcs[k] + i * es)); \
    st(out, acc);                                                                              \
    return;                                                                                    \
  }
  switch (dt) {
    case WEFT_INT8:
      REF_INT(int8_t)
    case WEFT_UINT8:
      REF_INT(uint8_t)
    case WEFT_INT32:
      REF_INT(int32_t)
    case WEFT_UINT32:
      REF_INT(uint32_t)
    case WEFT_INT64:
      REF_INT(int64_t)
    case WEFT_UINT64:
      REF_INT(uint64_t)
    case WEFT_FLOAT32: {
      float acc = ld<float>(srcs[0] + i * es);
      for (size_t k = 1; k < srcs.size(); ++k)
        acc = refFloatOp(op, acc, ld<float>(srcs[k] + i * es));
      st(out, acc);
      return;
    }
    case WEFT_FLOAT64: {
      double acc = ld<double>(srcs[0] + i * es);
      for (size_t k = 1; k < srcs.size(); ++k)
        acc = refFloatOp(op, acc, ld<double>(srcs[k] + i * es));
      st(out, acc);
      return;
    }
    default:
      break;
  }
#undef REF_INT
  const Fmt& f = *narrowFmt(dt);
  auto elem = [&](size_t k) -> uint32_t {
    return es == 1 ? srcs[k][i] : ld<uint16_t>(srcs[k] + i * es);
  };
  float acc = refNarrowToFloat(f, elem(0));
  for (size_t k = 1; k < srcs.size(); ++k) acc = refFloatOp(op, acc, refNarrowToFloat(f, elem(k)));
  const uint32_t r = std::isnan(acc) ? ((1u << (f.ebits + f.mbits)) - 1) : refEncode(f, acc);
  if (es == 1) {
    out[0] = static_cast<uint8_t>(r);
  } else {
    st(out, static_cast<uint16_t>(r));
  }
}

// Random data: integers get random bits; floats mostly ordinary values of
// every scale, with specials (NaN, inf, +-0, subnormals) and raw bit patterns.
inline std::vector<uint8_t> randomData(weft_datatype_t dt, size_t count, std::mt19937_64& rng) {
  const size_t es = datatypeSize(dt);
  std::vector<uint8_t> v(count * es);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  if (!isFloatType(dt) || dt == WEFT_FP8_E4M3 || dt == WEFT_FP8_E5M2) return v;
  std::uniform_real_distribution<double> mant(-2.0, 2.0);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng() % 100;
    if (r < 10) continue;  // raw bits
    double x;
    if (r < 12) {
      x = NAN;
    } else if (r < 14) {
      x = (rng() & 1) ? INFINITY : -INFINITY;
    } else if (r < 16) {
      x = (rng() & 1) ? 0.0 : -0.0;
    } else if (r < 20) {
      x = (rng() & 1) ? 1.0 : -1.0;  // equal operands (min/max ties)
    } else {
      const int range = dt == WEFT_FLOAT16 ? 14 : 30;
      x = std::ldexp(mant(rng), static_cast<int>(rng() % (2 * range + 1)) - range);
    }
    uint8_t* p = v.data() + i * es;
    switch (dt) {
      case WEFT_FLOAT32:
        st(p, static_cast<float>(x));
        break;
      case WEFT_FLOAT64:
        st(p, x);
        break;
      case WEFT_FLOAT16:
        st(p, floatToHalf(static_cast<float>(x)).bits);
        break;
      default:
        st(p, floatToBf16(static_cast<float>(x)).bits);
        break;
    }
  }
  return v;
}

// Compares element i of `got` against `want`: identical bits, or both NaN.
inline bool sameElem(weft_datatype_t dt, const uint8_t* got, const uint8_t* want) {
  if (elemIsNan(dt, want)) return elemIsNan(dt, got);
  return std::memcmp(got, want, datatypeSize(dt)) == 0;
}

inline std::string hexElem(weft_datatype_t dt, const uint8_t* p) {
  char buf[40];
  uint64_t u = 0;
  std::memcpy(&u, p, datatypeSize(dt));
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(u));
  return buf;
}

// Forces one ISA for the life of the guard.
struct IsaGuard {
  explicit IsaGuard(cpu::HostIsa isa) { ok = cpu::forceHostIsa(isa); }
  ~IsaGuard() { cpu::resetHostIsa(); }
  bool ok;
};

inline std::vector<cpu::HostIsa> supportedIsas() {
  std::vector<cpu::HostIsa> v;
  for (auto isa : {cpu::HostIsa::kPortable, cpu::HostIsa::kAvx2, cpu::HostIsa::kAvx512}) {
    if (cpu::hostIsaSupported(isa)) v.push_back(isa);
  }
  return v;
}

inline const char* isaName(cpu::HostIsa isa) {
  return isa == cpu::HostIsa::kAvx512 ? "avx512" : isa == cpu::HostIsa::kAvx2 ? "avx2" : "portable";
}

const size_t kLengths[] = {0, 1, 7, 31, 1000, 4097};

}  // namespace kref
