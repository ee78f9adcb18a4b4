// Tests of the host reduction kernels (kernels/cpu/reduce.h) and the shared
// arithmetic (kernels/ops.h). References are computed independently here:
// narrow float conversions from exact double arithmetic (frexp / ldexp),
// reductions element by element with plain C++ operators.
#include <catch2/catch.hpp>
#include <algorithm>
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

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace weft;

namespace {

// ---- Reference narrow-float formats --------------------------------------------

struct Fmt {
  const char* name;
  int ebits, mbits, bias;
  bool hasInf;     // IEEE-like: all-ones exponent is inf / NaN
  bool satfinite;  // overflow and inf go to the largest finite value
  double maxFinite;
};
const Fmt kHalf{"half", 5, 10, 15, true, false, 65504.0};
const Fmt kBf16{"bf16", 8, 7, 127, true, false, std::ldexp(255.0, 120)};
const Fmt kE4M3{"e4m3", 4, 3, 7, false, true, 448.0};
const Fmt kE5M2{"e5m2", 5, 2, 15, true, true, 57344.0};

uint32_t signBit(const Fmt& f) { return 1u << (f.ebits + f.mbits); }
uint32_t expMask(const Fmt& f) { return (1u << f.ebits) - 1; }

bool refIsNan(const Fmt& f, uint32_t b) {
  const uint32_t e = (b >> f.mbits) & expMask(f), m = b & ((1u << f.mbits) - 1);
  if (f.hasInf) return e == expMask(f) && m != 0;
  return e == expMask(f) && m == (1u << f.mbits) - 1;  // E4M3: S.1111.111
}

// Value of a finite / infinite pattern; NaN patterns are not asked for.
double refDecode(const Fmt& f, uint32_t b) {
  const double s = (b & signBit(f)) ? -1.0 : 1.0;
  const int e = static_cast<int>((b >> f.mbits) & expMask(f));
  const int m = static_cast<int>(b & ((1u << f.mbits) - 1));
  if (f.hasInf && e == static_cast<int>(expMask(f))) return s * INFINITY;
  if (e == 0) return s * std::ldexp(m, 1 - f.bias - f.mbits);
  return s * std::ldexp((1 << f.mbits) + m, e - f.bias - f.mbits);
}

// Round-to-nearest-even of a non-NaN float, from exact double arithmetic.
uint32_t refEncode(const Fmt& f, float x) {
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

uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint64_t dbits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// The implementation's conversions, by format.
float implDecode(const Fmt& f, uint32_t b) {
  if (&f == &kHalf) return halfToFloat(half_t{static_cast<uint16_t>(b)});
  if (&f == &kBf16) return bf16ToFloat(bf16_t{static_cast<uint16_t>(b)});
  if (&f == &kE4M3) return fp8e4m3ToFloat(fp8e4m3_t{static_cast<uint8_t>(b)});
  return fp8e5m2ToFloat(fp8e5m2_t{static_cast<uint8_t>(b)});
}
uint32_t implEncode(const Fmt& f, float x) {
  if (&f == &kHalf) return floatToHalf(x).bits;
  if (&f == &kBf16) return floatToBf16(x).bits;
  if (&f == &kE4M3) return floatToFp8e4m3(x).bits;
  return floatToFp8e5m2(x).bits;
}

// The documented NaN results of float -> format.
uint32_t nanEncode(const Fmt& f, float x) {
  const uint32_t u = fbits(x);
  const uint32_t sign = (u >> 31) ? signBit(f) : 0;
  if (&f == &kHalf) return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
  if (&f == &kBf16) return (u >> 16) | 0x40u;
  if (&f == &kE4M3) return sign | 0x7fu;
  const uint32_t p = (u >> 21) & 3u;
  return sign | 0x7cu | (p ? p : 2u);
}

// Checks float -> format on one value against the reference.
void checkEncode(const Fmt& f, float x) {
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
void checkAroundEveryValue(const Fmt& f) {
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
                             WEFT_AVG, WEFT_BAND, WEFT_BOR,  WEFT_BXOR};

const Fmt* narrowFmt(weft_datatype_t dt) {
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

bool isFloatType(weft_datatype_t dt) {
  return dt == WEFT_FLOAT32 || dt == WEFT_FLOAT64 || narrowFmt(dt) != nullptr;
}

// Element i of a buffer of type dt is a NaN.
bool elemIsNan(weft_datatype_t dt, const uint8_t* p) {
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
float refNarrowToFloat(const Fmt& f, uint32_t b) {
  if (refIsNan(f, b)) return (b & signBit(f)) ? -NAN : NAN;
  return static_cast<float>(refDecode(f, b));
}

// out = op(srcs[0][i], ..., srcs[n-1][i]), left to right; narrow types
// accumulate in float and round once.
void refElem(weft_datatype_t dt, weft_op_t op, const std::vector<const uint8_t*>& srcs, size_t i,
             uint8_t* out) {
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
std::vector<uint8_t> randomData(weft_datatype_t dt, size_t count, std::mt19937_64& rng) {
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
bool sameElem(weft_datatype_t dt, const uint8_t* got, const uint8_t* want) {
  if (elemIsNan(dt, want)) return elemIsNan(dt, got);
  return std::memcmp(got, want, datatypeSize(dt)) == 0;
}

std::string hexElem(weft_datatype_t dt, const uint8_t* p) {
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

std::vector<cpu::HostIsa> supportedIsas() {
  std::vector<cpu::HostIsa> v;
  for (auto isa : {cpu::HostIsa::kPortable, cpu::HostIsa::kAvx2, cpu::HostIsa::kAvx512}) {
    if (cpu::hostIsaSupported(isa)) v.push_back(isa);
  }
  return v;
}

const char* isaName(cpu::HostIsa isa) {
  return isa == cpu::HostIsa::kAvx512 ? "avx512" : isa == cpu::HostIsa::kAvx2 ? "avx2" : "portable";
}

const size_t kLengths[] = {0, 1, 7, 31, 1000, 4097};

}  // namespace

// ---- Names -----------------------------------------------------------------------

TEST_CASE("datatype and op names match nccl-tests", "[kernels]") {
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int dt = 0; dt < WEFT_NUM_DATATYPES; ++dt) {
    CHECK(std::string(datatypeName(static_cast<weft_datatype_t>(dt))) == names[dt]);
    CHECK(datatypeSize(static_cast<weft_datatype_t>(dt)) == sizes[dt]);
  }
  CHECK(datatypeSize(static_cast<weft_datatype_t>(WEFT_NUM_DATATYPES)) == 0);
  const char* ops[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  for (int op = 0; op < WEFT_NUM_OPS; ++op) {
    CHECK(std::string(opName(static_cast<weft_op_t>(op))) == ops[op]);
  }
}

TEST_CASE("the best ISA is chosen and can be forced", "[kernels]") {
  const std::string isa = hostReduceIsa();
  CHECK((isa == "avx512" || isa == "avx2" || isa == "portable"));
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kPortable));
  if (cpu::hostIsaSupported(cpu::HostIsa::kAvx512)) {
    CHECK(isa == "avx512");
  } else if (cpu::hostIsaSupported(cpu::HostIsa::kAvx2)) {
    CHECK(isa == "avx2");
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  // libgcc's view of the CPU (it checks the OS's saved state as well).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
                    __builtin_cpu_supports("fma");
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kAvx2) == avx2);
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kAvx512) ==
        (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")));
#endif
  {
    IsaGuard g(cpu::HostIsa::kPortable);
    REQUIRE(g.ok);
    CHECK(std::string(hostReduceIsa()) == "portable");
  }
  CHECK(std::string(hostReduceIsa()) == isa);
}

// ---- Conversions -------------------------------------------------------------------

TEST_CASE("half: every pattern decodes exactly and round-trips", "[kernels][convert]") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = halfToFloat(half_t{static_cast<uint16_t>(b)});
    const uint16_t back = floatToHalf(f).bits;
    if (refIsNan(kHalf, b)) {
      REQUIRE(std::isnan(f));
      REQUIRE(std::signbit(f) == ((b & 0x8000) != 0));
      REQUIRE(((fbits(f) >> 13) & 0x3ff) == ((b & 0x3ff) | 0x200));  // payload kept, quiet
      REQUIRE(back == (b | 0x200));  // a signalling NaN comes back quiet
    } else {
      REQUIRE(fbits(f) == fbits(static_cast<float>(refDecode(kHalf, b))));
      REQUIRE(back == b);
    }
  }
}

TEST_CASE("bfloat16: every pattern decodes exactly and round-trips", "[kernels][convert]") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16ToFloat(bf16_t{static_cast<uint16_t>(b)});
    const uint16_t back = floatToBf16(f).bits;
    if (refIsNan(kBf16, b)) {
      REQUIRE(std::isnan(f));
      REQUIRE(back == (b | 0x40));
    } else {
      REQUIRE(fbits(f) == fbits(static_cast<float>(refDecode(kBf16, b))));
      REQUIRE(back == b);
    }
  }
}

TEST_CASE("fp8: every pattern decodes exactly and round-trips", "[kernels][convert]") {
  for (const Fmt* f : {&kE4M3, &kE5M2}) {
    int nans = 0, infs = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const float x = implDecode(*f, b);
      if (refIsNan(*f, b)) {
        ++nans;
        REQUIRE(std::isnan(x));
        REQUIRE(std::signbit(x) == ((b & 0x80) != 0));
      } else {
        if (std::isinf(x)) ++infs;
        REQUIRE(fbits(x) == fbits(static_cast<float>(refDecode(*f, b))));
      }
      // Saturation maps E5M2's infinities to the largest finite value; every
      // other pattern comes back unchanged (NaN payloads included).
      REQUIRE(implEncode(*f, x) == (std::isinf(x) ? (b & 0x80) | 0x7b : b));
    }
    if (f == &kE4M3) {
      CHECK(nans == 2);
      CHECK(infs == 0);
      CHECK(fp8e4m3ToFloat(fp8e4m3_t{0x7e}) == 448.0f);
      CHECK(fp8e4m3ToFloat(fp8e4m3_t{0x01}) == std::ldexp(1.0f, -9));
    } else {
      CHECK(nans == 6);
      CHECK(infs == 2);
      CHECK(fp8e5m2ToFloat(fp8e5m2_t{0x7b}) == 57344.0f);
      CHECK(fp8e5m2ToFloat(fp8e5m2_t{0x01}) == std::ldexp(1.0f, -16));
    }
  }
}

TEST_CASE("float -> narrow rounds to nearest even around every value", "[kernels][convert]") {
  for (const Fmt* f : {&kHalf, &kBf16, &kE4M3, &kE5M2}) {
    INFO(f->name);
    checkAroundEveryValue(*f);
  }
}

TEST_CASE("float -> narrow: specials - overflow - underflow and random floats",
          "[kernels][convert]") {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           -NAN,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(),
                           65504.0f,
                           65519.996f,
                           65520.0f,
                           65536.0f,
                           448.0f,
                           449.0f,
                           464.0f,
                           465.0f,
                           480.0f,
                           57344.0f,
                           61439.0f,
                           61440.0f,
                           1e10f,
                           -1e10f,
                           std::ldexp(1.0f, -24),
                           std::ldexp(1.0f, -25),
                           std::ldexp(1.5f, -25),
                           std::ldexp(1.0f, -26),
                           std::ldexp(1.0f, -10),
                           std::ldexp(1.0f, -17),
                           std::ldexp(1.0f, -18),
                           std::ldexp(1.5f, -17),
                           std::ldexp(3.0f, -11),
                           bitsf(0x7f800001u),
                           bitsf(0xff800001u),
                           bitsf(0x7fa00000u),
                           bitsf(0x7fc00000u),
                           bitsf(0x7fe00000u),
                           bitsf(0x7f812345u),
                           bitsf(0x7f7fffffu),
                           bitsf(0x7f7f8000u),
                           bitsf(0x7f7f7fffu)};
  // Every float with a sparse stride (all exponents, many mantissas) plus
  // random bit patterns.
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) xs.push_back(bitsf(static_cast<uint32_t>(u)));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300000; ++i) xs.push_back(bitsf(static_cast<uint32_t>(rng())));
  for (const Fmt* f : {&kHalf, &kBf16, &kE4M3, &kE5M2}) {
    INFO(f->name);
    for (float x : xs) checkEncode(*f, x);
  }
  // Saturation and overflow, spelled out.
  CHECK(floatToHalf(65520.0f).bits == 0x7c00);
  CHECK(floatToHalf(65519.996f).bits == 0x7bff);
  CHECK(floatToHalf(-INFINITY).bits == 0xfc00);
  CHECK(floatToBf16(std::numeric_limits<float>::max()).bits == 0x7f80);
  CHECK(floatToFp8e4m3(INFINITY).bits == 0x7e);
  CHECK(floatToFp8e4m3(-1e30f).bits == 0xfe);
  CHECK(floatToFp8e4m3(NAN).bits == 0x7f);
  CHECK(floatToFp8e5m2(INFINITY).bits == 0x7b);
  CHECK(floatToFp8e5m2(-INFINITY).bits == 0xfb);
  CHECK((floatToFp8e5m2(NAN).bits & 0x7f) > 0x7c);
  // Ties to even at the bottom of the ranges.
  CHECK(floatToHalf(std::ldexp(1.0f, -25)).bits == 0x0000);
  CHECK(floatToHalf(std::ldexp(3.0f, -25)).bits == 0x0002);
  CHECK(floatToFp8e4m3(std::ldexp(1.0f, -10)).bits == 0x00);
  CHECK(floatToFp8e4m3(std::ldexp(3.0f, -10)).bits == 0x02);
}

#if defined(__x86_64__)
namespace {
__attribute__((target("f16c"))) uint16_t f16cEncode(float x) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float f16cDecode(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
}  // namespace

TEST_CASE("half conversions match F16C bit for bit", "[kernels][convert]") {
  // F16C comes with the AVX2 level.
  if (!cpu::hostIsaSupported(cpu::HostIsa::kAvx2)) {
    SUCCEED("no F16C on this CPU");
  } else {
    for (uint32_t b = 0; b < 65536; ++b) {
      REQUIRE(fbits(halfToFloat(half_t{static_cast<uint16_t>(b)})) ==
              fbits(f16cDecode(static_cast<uint16_t>(b))));
    }
    std::mt19937_64 rng(11);
    for (uint64_t u = 0; u < (1ull << 32); u += 997) {
      const float x = bitsf(static_cast<uint32_t>(u ^ (rng() & 0x1fff)));
      REQUIRE(floatToHalf(x).bits == f16cEncode(x));
    }
  }
}
#endif

// ---- Reductions ------------------------------------------------------------------

TEST_CASE("reduceHost matches the scalar reference for every type - op and ISA", "[kernels]") {
  std::mt19937_64 rng(42);
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    REQUIRE(g.ok);
    for (weft_datatype_t dt : kAllTypes) {
      const size_t es = datatypeSize(dt);
      for (weft_op_t op : kAllOps) {
        if (!opSupported(dt, op)) continue;  // bitwise on a floating type (tested below)
        for (size_t n : kLengths) {
          for (size_t off : {size_t{0}, size_t{1}, size_t{3}}) {
            INFO(isaName(isa) << " " << datatypeName(dt) << " " << opName(op) << " n=" << n
                              << " offset=" << off);
            std::vector<uint8_t> a = randomData(dt, n + off, rng);
            std::vector<uint8_t> b = randomData(dt, n + off, rng);
            std::vector<uint8_t> d((n + off) * es + 1, 0xcd);
            reduceHost(d.data() + off * es, a.data() + off * es, b.data() + off * es, n, dt, op);
            std::vector<uint8_t> want(es);
            size_t bad = 0;
            for (size_t i = 0; i < n; ++i) {
              refElem(dt, op, {a.data() + off * es, b.data() + off * es}, i, want.data());
              const uint8_t* got = d.data() + (off + i) * es;
              if (!sameElem(dt, got, want.data()) && bad++ < 3) {
                FAIL_CHECK("element " << i << ": a=" << hexElem(dt, a.data() + (off + i) * es)
                                      << " b=" << hexElem(dt, b.data() + (off + i) * es) << " got "
                                      << hexElem(dt, got) << " want " << hexElem(dt, want.data()));
              }
            }
            CHECK(bad == 0);
            // Nothing written outside [off, off + n).
            for (size_t i = 0; i < off * es; ++i) REQUIRE(d[i] == 0xcd);
            REQUIRE(d.back() == 0xcd);
          }
        }
      }
    }
  }
}

TEST_CASE("vector kernels give the portable kernels' bits", "[kernels]") {
  std::mt19937_64 rng(5);
  for (cpu::HostIsa isa : supportedIsas()) {
    if (isa == cpu::HostIsa::kPortable) continue;
    for (weft_datatype_t dt : kAllTypes) {
      const size_t es = datatypeSize(dt);
      const size_t n = 20011;
      std::vector<uint8_t> a = randomData(dt, n, rng), b = randomData(dt, n, rng),
                           c = randomData(dt, n, rng);
      for (weft_op_t op : kAllOps) {
        if (!opSupported(dt, op)) continue;
        INFO(isaName(isa) << " " << datatypeName(dt) << " " << opName(op));
        std::vector<uint8_t> p2(n * es), v2(n * es), pN(n * es), vN(n * es), pD(n * es), vD(n * es);
        const void* srcs[3] = {a.data(), b.data(), c.data()};
        {
          IsaGuard g(cpu::HostIsa::kPortable);
          reduceHost(p2.data(), a.data(), b.data(), n, dt, op);
          reduceHostN(pN.data(), srcs, 3, n, dt, op);
          pD = pN;
          divideByCount(pD.data(), n, dt, 3);
        }
        {
          IsaGuard g(isa);
          REQUIRE(g.ok);
          reduceHost(v2.data(), a.data(), b.data(), n, dt, op);
          reduceHostN(vN.data(), srcs, 3, n, dt, op);
          vD = pN;
          divideByCount(vD.data(), n, dt, 3);
        }
        // Min / max / divide pick their NaN explicitly: bits must agree even
        // then. A sum or product of two NaNs may carry either payload (the
        // compiler may swap a commutative scalar op), so only "NaN" must agree.
        const bool exactNan = op == WEFT_MAX || op == WEFT_MIN;
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
          const size_t o = i * es;
          auto same = [&](const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
            return exactNan ? std::memcmp(&x[o], &y[o], es) == 0 : sameElem(dt, &x[o], &y[o]);
          };
          if (!same(p2, v2) || !same(pN, vN) || std::memcmp(&pD[o], &vD[o], es) != 0) {
            if (bad++ < 3) {
              FAIL_CHECK("element " << i << ": a=" << hexElem(dt, &a[o])
                                    << " b=" << hexElem(dt, &b[o]) << " c=" << hexElem(dt, &c[o])
                                    << " reduce portable/vector " << hexElem(dt, &p2[o]) << "/"
                                    << hexElem(dt, &v2[o]) << " reduceN " << hexElem(dt, &pN[o])
                                    << "/" << hexElem(dt, &vN[o]) << " divide "
                                    << hexElem(dt, &pD[o]) << "/" << hexElem(dt, &vD[o]));
            }
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("vector narrow-float conversions agree with the scalar ones on every pattern",
          "[kernels][convert]") {
  // A product with 1.0 goes through decode, multiply and encode: run every
  // 16-bit / 8-bit pattern through it. (volatile: x * 1.0f must really be
  // computed, as it quiets a signalling NaN.)
  volatile float oneF = 1.0f;
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    for (weft_datatype_t dt : {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2}) {
      INFO(isaName(isa) << " " << datatypeName(dt));
      const Fmt& f = *narrowFmt(dt);
      const size_t es = datatypeSize(dt);
      const size_t n = size_t{1} << (8 * es);
      std::vector<uint8_t> a(n * es), one(n * es), d(n * es);
      const uint32_t oneBits = implEncode(f, 1.0f);
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(&a[i * es], &i, es);
        std::memcpy(&one[i * es], &oneBits, es);
      }
      reduceHost(d.data(), a.data(), one.data(), n, dt, WEFT_PROD);
      for (size_t i = 0; i < n; ++i) {
        uint32_t got = 0;
        std::memcpy(&got, &d[i * es], es);
        const uint32_t want = implEncode(f, implDecode(f, static_cast<uint32_t>(i)) * oneF);
        if (got != want) {
          FAIL_CHECK("pattern 0x" << std::hex << i << ": got 0x" << got << " want 0x" << want);
          break;
        }
      }
      // Max with itself: decode + encode with no arithmetic.
      reduceHost(d.data(), a.data(), a.data(), n, dt, WEFT_MAX);
      for (size_t i = 0; i < n; ++i) {
        uint32_t got = 0;
        std::memcpy(&got, &d[i * es], es);
        if (got != implEncode(f, implDecode(f, static_cast<uint32_t>(i)))) {
          FAIL_CHECK("max pattern 0x" << std::hex << i << ": got 0x" << got);
          break;
        }
      }
    }
  }
}

TEST_CASE("vector float -> narrow rounding agrees with the scalar one on many floats",
          "[kernels][convert]") {
  // Sums and products of neighbouring values, values a binade apart and
  // random pairs land on and around rounding ties, subnormals and overflow;
  // each result must be the reference rounding of the float result.
  std::mt19937_64 rng(99);
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    for (weft_datatype_t dt : {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2}) {
      INFO(isaName(isa) << " " << datatypeName(dt));
      const Fmt& f = *narrowFmt(dt);
      const size_t es = datatypeSize(dt);
      const size_t n = 1 << 16;
      std::vector<uint8_t> a(n * es), b(n * es), d(n * es);
      for (size_t i = 0; i < n; ++i) {
        // Neighbouring values and values an ulp or a binade apart: their sums
        // and products fall on and around rounding ties.
        const uint32_t x = static_cast<uint32_t>(rng()) & ((1u << (8 * es)) - 1);
        uint32_t y = x;
        switch (rng() % 4) {
          case 0:
            y = x ^ 1;
            break;
          case 1:
            y = x + (1u << f.mbits);
            break;
          case 2:
            y = x ^ signBit(f) ^ 1;
            break;
          default:
            y = static_cast<uint32_t>(rng());
            break;
        }
        y &= (1u << (8 * es)) - 1;
        std::memcpy(&a[i * es], &x, es);
        std::memcpy(&b[i * es], &y, es);
      }
      for (weft_op_t op : {WEFT_SUM, WEFT_PROD}) {
        reduceHost(d.data(), a.data(), b.data(), n, dt, op);
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
          uint32_t x = 0, y = 0, got = 0;
          std::memcpy(&x, &a[i * es], es);
          std::memcpy(&y, &b[i * es], es);
          std::memcpy(&got, &d[i * es], es);
          const float fx = implDecode(f, x), fy = implDecode(f, y);
          const float r = op == WEFT_SUM ? fx + fy : fx * fy;
          if (std::isnan(r)) {
            if (!refIsNan(f, got) && bad++ < 3) FAIL_CHECK("NaN lost at " << i);
            continue;
          }
          const uint32_t want = refEncode(f, r);
          if (got != want && bad++ < 3) {
            FAIL_CHECK(opName(op) << " 0x" << std::hex << x << " 0x" << y << ": got 0x" << got
                                  << " want 0x" << want);
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("dst may alias either input", "[kernels]") {
  std::mt19937_64 rng(3);
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    for (weft_datatype_t dt : kAllTypes) {
      for (weft_op_t op : {WEFT_SUM, WEFT_MIN}) {
        INFO(isaName(isa) << " " << datatypeName(dt) << " " << opName(op));
        const size_t n = 1037;
        std::vector<uint8_t> a = randomData(dt, n, rng), b = randomData(dt, n, rng);
        std::vector<uint8_t> want(a.size());
        reduceHost(want.data(), a.data(), b.data(), n, dt, op);
        std::vector<uint8_t> x = a;
        reduceHost(x.data(), x.data(), b.data(), n, dt, op);
        CHECK(x == want);
        std::vector<uint8_t> y = b;
        reduceHost(y.data(), a.data(), y.data(), n, dt, op);
        CHECK(y == want);
        std::vector<uint8_t> z = a;
        const void* srcs[4] = {z.data(), b.data(), a.data(), b.data()};
        std::vector<uint8_t> wantN(a.size());
        reduceHostN(wantN.data(), srcs, 4, n, dt, op);
        reduceHostN(z.data(), srcs, 4, n, dt, op);
        CHECK(z == wantN);
      }
    }
  }
}

TEST_CASE("bitwise ops: integer types only - the others are refused and write nothing",
          "[kernels]") {
  for (weft_datatype_t dt : kAllTypes) {
    const bool integer = dt == WEFT_INT8 || dt == WEFT_UINT8 || dt == WEFT_INT32 ||
                         dt == WEFT_UINT32 || dt == WEFT_INT64 || dt == WEFT_UINT64;
    for (weft_op_t op : {WEFT_BAND, WEFT_BOR, WEFT_BXOR}) {
      INFO(datatypeName(dt) << " " << opName(op));
      CHECK(opSupported(dt, op) == integer);
      if (integer) continue;
      const size_t es = datatypeSize(dt);
      std::vector<uint8_t> a(4 * es, 0x3c), b(4 * es, 0x5a), d(4 * es, 0xcd);
      reduceHost(d.data(), a.data(), b.data(), 4, dt, op);
      const void* srcs[2] = {a.data(), b.data()};
      reduceHostN(d.data(), srcs, 2, 4, dt, op);
      CHECK(std::all_of(d.begin(), d.end(), [](uint8_t x) { return x == 0xcd; }));
    }
    for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG}) CHECK(opSupported(dt, op));
  }
  CHECK_FALSE(opSupported(WEFT_INT32, static_cast<weft_op_t>(WEFT_NUM_OPS)));
  CHECK_FALSE(opSupported(static_cast<weft_datatype_t>(WEFT_NUM_DATATYPES), WEFT_SUM));
}

TEST_CASE("reduceHostN matches the reference for 1..8 sources", "[kernels]") {
  std::mt19937_64 rng(17);
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    for (weft_datatype_t dt : kAllTypes) {
      const size_t es = datatypeSize(dt);
      for (weft_op_t op : kAllOps) {
        if (!opSupported(dt, op)) continue;
        for (int nsrc = 1; nsrc <= 8; ++nsrc) {
          for (size_t n : {size_t{0}, size_t{5}, size_t{1031}}) {
            INFO(isaName(isa) << " " << datatypeName(dt) << " " << opName(op) << " nsrc=" << nsrc
                              << " n=" << n);
            std::vector<std::vector<uint8_t>> bufs;
            std::vector<const void*> srcs;
            std::vector<const uint8_t*> srcBytes;
            for (int k = 0; k < nsrc; ++k) {
              bufs.push_back(randomData(dt, n + 1, rng));
              srcs.push_back(bufs.back().data() + es);  // unaligned by one element
              srcBytes.push_back(bufs.back().data() + es);
            }
            std::vector<uint8_t> d(n * es + 1, 0xcd);
            reduceHostN(d.data(), srcs.data(), nsrc, n, dt, op);
            REQUIRE(d.back() == 0xcd);
            std::vector<uint8_t> want(es);
            size_t bad = 0;
            for (size_t i = 0; i < n; ++i) {
              refElem(dt, op, srcBytes, i, want.data());
              if (nsrc == 1) {
                // A copy: bits, NaN payloads included.
                if (std::memcmp(&d[i * es], srcBytes[0] + i * es, es) != 0) ++bad;
              } else if (!sameElem(dt, &d[i * es], want.data()) && bad++ < 3) {
                FAIL_CHECK("element " << i << " got " << hexElem(dt, &d[i * es]) << " want "
                                      << hexElem(dt, want.data()));
              }
            }
            CHECK(bad == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("reduceHostN rounds narrow types once - at the end", "[kernels]") {
  // 1 + 2^-11 + 2^-11 in half: rounding after each add would give 1 twice
  // (ties to even); accumulating in float gives 1 + 2^-10.
  const half_t one = floatToHalf(1.0f), eps = floatToHalf(std::ldexp(1.0f, -11));
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::vector<half_t> a(40, one), b(40, eps), c(40, eps), d(40);
    const void* srcs[3] = {a.data(), b.data(), c.data()};
    reduceHostN(d.data(), srcs, 3, a.size(), WEFT_FLOAT16, WEFT_SUM);
    for (const half_t& h : d) REQUIRE(halfToFloat(h) == 1.0f + std::ldexp(1.0f, -10));
    reduceHost(d.data(), a.data(), b.data(), a.size(), WEFT_FLOAT16, WEFT_SUM);
    reduceHost(d.data(), d.data(), c.data(), a.size(), WEFT_FLOAT16, WEFT_SUM);
    for (const half_t& h : d) REQUIRE(halfToFloat(h) == 1.0f);
  }
}

TEST_CASE("integer sum and product wrap around", "[kernels]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    INFO(isaName(isa));
    const size_t n = 37;
    {
      std::vector<int8_t> a(n, 127), b(n, 1), d(n);
      reduceHost(d.data(), a.data(), b.data(), n, WEFT_INT8, WEFT_SUM);
      for (auto x : d) REQUIRE(x == -128);
      std::vector<int8_t> c(n, -128), m(n, -1);
      reduceHost(d.data(), c.data(), m.data(), n, WEFT_INT8, WEFT_PROD);
      for (auto x : d) REQUIRE(x == -128);
      std::vector<int8_t> p(n, 16), q(n, 17);
      reduceHost(d.data(), p.data(), q.data(), n, WEFT_INT8, WEFT_PROD);
      for (auto x : d) REQUIRE(x == static_cast<int8_t>(272 - 256));
    }
    {
      std::vector<uint8_t> a(n, 255), b(n, 2), d(n);
      reduceHost(d.data(), a.data(), b.data(), n, WEFT_UINT8, WEFT_SUM);
      for (auto x : d) REQUIRE(x == 1);
      reduceHost(d.data(), a.data(), a.data(), n, WEFT_UINT8, WEFT_PROD);
      for (auto x : d) REQUIRE(x == 1);  // 255 * 255 = 65025 = 254 * 256 + 1
    }
    {
      std::vector<int32_t> a(n, INT32_MAX), b(n, 1), d(n);
      reduceHost(d.data(), a.data(), b.data(), n, WEFT_INT32, WEFT_SUM);
      for (auto x : d) REQUIRE(x == INT32_MIN);
      std::vector<int32_t> c(n, 65536);
      reduceHost(d.data(), c.data(), c.data(), n, WEFT_INT32, WEFT_PROD);
      for (auto x : d) REQUIRE(x == 0);
      std::vector<uint32_t> u(n, UINT32_MAX), v(n, UINT32_MAX), w(n);
      reduceHost(w.data(), u.data(), v.data(), n, WEFT_UINT32, WEFT_SUM);
      for (auto x : w) REQUIRE(x == UINT32_MAX - 1);
      reduceHost(w.data(), u.data(), v.data(), n, WEFT_UINT32, WEFT_PROD);
      for (auto x : w) REQUIRE(x == 1);
    }
    {
      std::vector<int64_t> a(n, INT64_MAX), b(n, 2), d(n);
      reduceHost(d.data(), a.data(), b.data(), n, WEFT_INT64, WEFT_SUM);
      for (auto x : d) REQUIRE(x == INT64_MIN + 1);
      reduceHost(d.data(), a.data(), b.data(), n, WEFT_INT64, WEFT_PROD);
      for (auto x : d) REQUIRE(x == -2);
      std::vector<int64_t> p(n, INT64_C(0x123456789)), q(n, INT64_C(-0x987654321));
      reduceHost(d.data(), p.data(), q.data(), n, WEFT_INT64, WEFT_PROD);
      const int64_t want = static_cast<int64_t>(static_cast<uint64_t>(0x123456789) *
                                                static_cast<uint64_t>(INT64_C(-0x987654321)));
      for (auto x : d) REQUIRE(x == want);
      std::vector<uint64_t> u(n, UINT64_MAX), v(n, 3), w(n);
      reduceHost(w.data(), u.data(), v.data(), n, WEFT_UINT64, WEFT_SUM);
      for (auto x : w) REQUIRE(x == 2);
      reduceHost(w.data(), u.data(), v.data(), n, WEFT_UINT64, WEFT_PROD);
      for (auto x : w) REQUIRE(x == UINT64_MAX - 2);
      // Unsigned compare of values with the top bit set.
      std::vector<uint64_t> big(n, UINT64_C(0x8000000000000001)), small(n, 5);
      reduceHost(w.data(), big.data(), small.data(), n, WEFT_UINT64, WEFT_MAX);
      for (auto x : w) REQUIRE(x == UINT64_C(0x8000000000000001));
      reduceHost(w.data(), big.data(), small.data(), n, WEFT_UINT64, WEFT_MIN);
      for (auto x : w) REQUIRE(x == 5);
    }
  }
}

TEST_CASE("MIN and MAX of floats: a NaN loses to a number", "[kernels]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    INFO(isaName(isa));
    const size_t n = 41;  // vector body plus a scalar tail
    // Pairs (a, b): NaN/number either way, NaN/NaN, -0/+0 either way.
    const float as[] = {NAN, 3.0f, NAN, -0.0f, 0.0f, -INFINITY, 2.0f};
    const float bs[] = {3.0f, NAN, NAN, 0.0f, -0.0f, NAN, 2.0f};
    const float wantMin[] = {3.0f, 3.0f, NAN, -0.0f, -0.0f, -INFINITY, 2.0f};
    const float wantMax[] = {3.0f, 3.0f, NAN, 0.0f, 0.0f, -INFINITY, 2.0f};
    for (size_t c = 0; c < 7; ++c) {
      INFO("case " << c);
      for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                 WEFT_FP8_E4M3, WEFT_FP8_E5M2}) {
        INFO(datatypeName(dt));
        const size_t es = datatypeSize(dt);
        auto enc = [&](float x, uint8_t* p) {
          switch (dt) {
            case WEFT_FLOAT32:
              st(p, x);
              break;
            case WEFT_FLOAT64:
              st(p, static_cast<double>(x));
              break;
            case WEFT_FLOAT16:
              st(p, floatToHalf(x).bits);
              break;
            case WEFT_BFLOAT16:
              st(p, floatToBf16(x).bits);
              break;
            case WEFT_FP8_E4M3:
              *p = floatToFp8e4m3(x).bits;
              break;
            default:
              *p = floatToFp8e5m2(x).bits;
              break;
          }
        };
        auto dec = [&](const uint8_t* p) -> double {
          switch (dt) {
            case WEFT_FLOAT32:
              return ld<float>(p);
            case WEFT_FLOAT64:
              return ld<double>(p);
            case WEFT_FLOAT16:
              return halfToFloat(half_t{ld<uint16_t>(p)});
            case WEFT_BFLOAT16:
              return bf16ToFloat(bf16_t{ld<uint16_t>(p)});
            case WEFT_FP8_E4M3:
              return fp8e4m3ToFloat(fp8e4m3_t{*p});
            default:
              return fp8e5m2ToFloat(fp8e5m2_t{*p});
          }
        };
        std::vector<uint8_t> a(n * es), b(n * es), d(n * es);
        for (size_t i = 0; i < n; ++i) {
          enc(as[c], &a[i * es]);
          enc(bs[c], &b[i * es]);
        }
        for (weft_op_t op : {WEFT_MIN, WEFT_MAX}) {
          const float want = op == WEFT_MIN ? wantMin[c] : wantMax[c];
          // fp8 saturates -inf to the most negative finite value.
          const double wantD = !std::isinf(want)     ? want
                               : dt == WEFT_FP8_E4M3 ? -448.0
                               : dt == WEFT_FP8_E5M2 ? -57344.0
                                                     : want;
          reduceHost(d.data(), a.data(), b.data(), n, dt, op);
          for (size_t i = 0; i < n; ++i) {
            const double got = dec(&d[i * es]);
            if (std::isnan(wantD)) {
              REQUIRE(std::isnan(got));
            } else {
              REQUIRE(got == wantD);
              REQUIRE(std::signbit(got) == std::signbit(wantD));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("fp8 sums saturate - AVG reduces as SUM", "[kernels]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    const size_t n = 19;
    std::vector<uint8_t> a(n, 0x7e), d(n);  // e4m3 448
    reduceHost(d.data(), a.data(), a.data(), n, WEFT_FP8_E4M3, WEFT_SUM);
    for (auto x : d) REQUIRE(x == 0x7e);
    std::vector<uint8_t> b(n, 0x7b), inf(n, 0x7c);  // e5m2 57344, +inf
    reduceHost(d.data(), b.data(), b.data(), n, WEFT_FP8_E5M2, WEFT_SUM);
    for (auto x : d) REQUIRE(x == 0x7b);
    reduceHost(d.data(), inf.data(), b.data(), n, WEFT_FP8_E5M2, WEFT_SUM);
    for (auto x : d) REQUIRE(x == 0x7b);  // inf saturates too
    std::vector<float> x(n, 1.5f), y(n, 2.0f), s(n), v(n);
    reduceHost(s.data(), x.data(), y.data(), n, WEFT_FLOAT32, WEFT_SUM);
    reduceHost(v.data(), x.data(), y.data(), n, WEFT_FLOAT32, WEFT_AVG);
    CHECK(s == v);
  }
}

TEST_CASE("divideByCount", "[kernels]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    INFO(isaName(isa));
    {
      std::vector<int32_t> v = {7, -7, 6, -6, 1, -1, INT32_MIN, INT32_MAX, 0};
      std::vector<int32_t> w = v;
      divideByCount(w.data(), w.size(), WEFT_INT32, 2);
      for (size_t i = 0; i < v.size(); ++i) REQUIRE(w[i] == v[i] / 2);  // truncates to zero
      w = v;
      divideByCount(w.data(), w.size(), WEFT_INT32, uint64_t{1} << 40);
      for (auto x : w) REQUIRE(x == 0);
    }
    {
      std::vector<int8_t> v = {-128, 127, -3, 3, -1};
      std::vector<int8_t> w = v;
      divideByCount(w.data(), w.size(), WEFT_INT8, 3);
      for (size_t i = 0; i < v.size(); ++i) REQUIRE(w[i] == v[i] / 3);
      w = v;
      divideByCount(w.data(), w.size(), WEFT_INT8, 128);
      CHECK(w == std::vector<int8_t>{-1, 0, 0, 0, 0});
    }
    {
      std::vector<int64_t> v = {INT64_MIN, INT64_MAX, -5, 5};
      std::vector<int64_t> w = v;
      divideByCount(w.data(), w.size(), WEFT_INT64, 4);
      for (size_t i = 0; i < v.size(); ++i) REQUIRE(w[i] == v[i] / 4);
      w = v;
      divideByCount(w.data(), w.size(), WEFT_INT64, uint64_t{1} << 63);
      CHECK(w == std::vector<int64_t>{-1, 0, 0, 0});
      w = v;
      divideByCount(w.data(), w.size(), WEFT_INT64, UINT64_MAX);
      CHECK(w == std::vector<int64_t>{0, 0, 0, 0});
    }
    {
      std::vector<uint8_t> u = {255, 7, 0};
      divideByCount(u.data(), u.size(), WEFT_UINT8, 2);
      CHECK(u == std::vector<uint8_t>{127, 3, 0});
      std::vector<uint32_t> v = {UINT32_MAX, 10};
      divideByCount(v.data(), v.size(), WEFT_UINT32, 3);
      CHECK(v == std::vector<uint32_t>{UINT32_MAX / 3, 3});
      std::vector<uint64_t> w = {UINT64_MAX, 10};
      divideByCount(w.data(), w.size(), WEFT_UINT64, uint64_t{1} << 63);
      CHECK(w == std::vector<uint64_t>{1, 0});
    }
    {
      std::vector<float> f(37);
      for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * 0.37f - 5.0f;
      std::vector<float> g2 = f;
      divideByCount(g2.data(), g2.size(), WEFT_FLOAT32, 3);
      for (size_t i = 0; i < f.size(); ++i) REQUIRE(fbits(g2[i]) == fbits(f[i] / 3.0f));
      std::vector<double> d(37);
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(i) * 0.37 - 5.0;
      std::vector<double> e = d;
      divideByCount(e.data(), e.size(), WEFT_FLOAT64, 7);
      for (size_t i = 0; i < d.size(); ++i) REQUIRE(dbits(e[i]) == dbits(d[i] / 7.0));
    }
    // Narrow floats: the float quotient rounded once, to nearest even.
    for (weft_datatype_t dt : {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2}) {
      INFO(datatypeName(dt));
      const Fmt& f = *narrowFmt(dt);
      const size_t es = datatypeSize(dt);
      const size_t n = size_t{1} << (8 * es);
      for (uint64_t div : {uint64_t{3}, uint64_t{8}, uint64_t{10}}) {
        std::vector<uint8_t> v(n * es);
        for (size_t i = 0; i < n; ++i) std::memcpy(&v[i * es], &i, es);
        divideByCount(v.data(), n, dt, div);
        for (size_t i = 0; i < n; ++i) {
          uint32_t got = 0;
          std::memcpy(&got, &v[i * es], es);
          if (refIsNan(f, static_cast<uint32_t>(i))) {
            REQUIRE(refIsNan(f, got));
            continue;
          }
          const float q =
              static_cast<float>(refDecode(f, static_cast<uint32_t>(i))) / static_cast<float>(div);
          const uint32_t want = refEncode(f, q);
          if (got != want) {
            FAIL_CHECK("0x" << std::hex << i << " / " << std::dec << div << ": got 0x" << std::hex
                            << got << " want 0x" << want);
            break;
          }
        }
      }
    }
    // n = 1 and n = 0 leave the data alone.
    std::vector<int32_t> v = {5, -5};
    divideByCount(v.data(), v.size(), WEFT_INT32, 1);
    divideByCount(v.data(), v.size(), WEFT_INT32, 0);
    CHECK(v == std::vector<int32_t>{5, -5});
  }
}

TEST_CASE("large buffers: streaming stores - unaligned heads", "[kernels]") {
  // Past the size where the vector kernels may switch to non-temporal stores.
  std::mt19937_64 rng(23);
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_FLOAT16, WEFT_INT8, WEFT_FLOAT64}) {
      INFO(isaName(isa) << " " << datatypeName(dt));
      const size_t es = datatypeSize(dt);
      const size_t n = (9u << 20) / es + 13;
      std::vector<uint8_t> a = randomData(dt, n + 1, rng), b = randomData(dt, n + 1, rng);
      for (size_t off : {size_t{0}, size_t{1}}) {
        std::vector<uint8_t> d((n + 1) * es);
        reduceHost(d.data() + off * es, a.data() + off * es, b.data() + off * es, n - off, dt,
                   WEFT_SUM);
        const void* srcs[3] = {a.data() + off * es, b.data() + off * es, a.data() + off * es};
        std::vector<uint8_t> dn((n + 1) * es);
        reduceHostN(dn.data() + off * es, srcs, 3, n - off, dt, WEFT_MAX);
        std::vector<uint8_t> want(es);
        size_t bad = 0;
        for (size_t i = 0; i < n - off; i += 1 + i % 7) {
          refElem(dt, WEFT_SUM, {a.data() + off * es, b.data() + off * es}, i, want.data());
          if (!sameElem(dt, &d[(off + i) * es], want.data())) ++bad;
          refElem(dt, WEFT_MAX, {a.data() + off * es, b.data() + off * es, a.data() + off * es}, i,
                  want.data());
          if (!sameElem(dt, &dn[(off + i) * es], want.data())) ++bad;
        }
        CHECK(bad == 0);
      }
    }
  }
}
