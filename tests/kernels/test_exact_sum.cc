// exactSumHost (kernels/cpu/exact_sum.h) against an independent wide
// reference: MPFR sums the inputs exactly (mpfr_sum at 2400 bits holds any
// sum of up to 2^100 doubles), divides by n for AVG and rounds once to the
// format's precision; emin / emax and mpfr_subnormalize give the format's
// subnormals, and the special-value, zero-sign and fp8 saturation rules are
// applied here explicitly. Also: permutations of the sources give identical
// bits, dst may alias a source, and typical data takes the fast path; each
// on every instruction set this CPU runs (IsaGuard), so the vector kernels
// are checked bit for bit like the portable one.
#include <mpfr.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cpu/exact_sum.h"
#include "kernels/kernel_ref.h"

using namespace kref;

namespace {

const weft_datatype_t kExactTypes[] = {WEFT_FLOAT16,  WEFT_FLOAT32,  WEFT_FLOAT64,
                                       WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_FP8_E5M2};

// The reference's view of a format: precision, MPFR's emin / emax (x = 0.1b *
// 2^e), the largest finite value and the bits of the special results.
struct RefFormat {
  int prec, emin, emax;
  double maxFinite;
  bool saturate;
  uint64_t infBits, maxBits, nanBits, signBit;
  int mbits, bias;
};

RefFormat refFormat(weft_datatype_t dt) {
  auto make = [](int mbits, int bias, double maxFinite, bool sat, uint64_t inf, uint64_t max,
                 uint64_t nan, uint64_t sign) {
    return RefFormat{
        mbits + 1, 2 - bias - mbits, bias + 1, maxFinite, sat, inf, max, nan, sign, mbits, bias};
  };
  switch (dt) {
    case WEFT_FLOAT16:
      return make(10, 15, 65504.0, false, 0x7c00, 0x7bff, 0x7e00, 0x8000);
    case WEFT_BFLOAT16:
      return make(7, 127, std::ldexp(255.0, 120), false, 0x7f80, 0x7f7f, 0x7fc0, 0x8000);
    case WEFT_FLOAT32:
      return make(23, 127, FLT_MAX, false, 0x7f800000, 0x7f7fffff, 0x7fc00000, 0x80000000u);
    case WEFT_FLOAT64:
      return make(52, 1023, DBL_MAX, false, 0x7ff0000000000000ull, 0x7fefffffffffffffull,
                  0x7ff8000000000000ull, 0x8000000000000000ull);
    case WEFT_FP8_E4M3: {
      RefFormat f = make(3, 7, 448.0, true, 0, 0x7e, 0x7f, 0x80);
      f.emax = 9;  // no infinity: exponent field 15 holds 256 .. 448
      return f;
    }
    default:  // E5M2
      return make(2, 15, 57344.0, true, 0, 0x7b, 0x7e, 0x80);
  }
}

uint64_t loadBits(weft_datatype_t dt, const uint8_t* p) {
  uint64_t u = 0;
  std::memcpy(&u, p, datatypeSize(dt));
  return u;
}

// An input element's value, decoded independently of the kernel (kernel_ref.h).
double decode(weft_datatype_t dt, uint64_t b) {
  if (dt == WEFT_FLOAT32) {
    float f;
    uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (dt == WEFT_FLOAT64) {
    double d;
    std::memcpy(&d, &b, 8);
    return d;
  }
  const Fmt& f = *narrowFmt(dt);
  if (refIsNan(f, static_cast<uint32_t>(b))) return NAN;
  return refDecode(f, static_cast<uint32_t>(b));
}

// The bits of a finite value that the format represents exactly.
uint64_t encodeExact(const RefFormat& f, double v) {
  const uint64_t sign = std::signbit(v) ? f.signBit : 0;
  v = std::fabs(v);
  if (v == 0) return sign;
  int e;
  std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  const int unbiased = e - 1;
  if (unbiased < 1 - f.bias) {  // subnormal: a multiple of 2^(1 - bias - mbits)
    return sign | static_cast<uint64_t>(std::ldexp(v, f.bias - 1 + f.mbits));
  }
  const uint64_t mant =
      static_cast<uint64_t>(std::ldexp(v, f.mbits - unbiased)) - (uint64_t{1} << f.mbits);
  return sign | static_cast<uint64_t>(unbiased + f.bias) << f.mbits | mant;
}

// The reference result's bits for the values xs.
uint64_t reference(weft_datatype_t dt, const std::vector<double>& xs, bool average) {
  const RefFormat f = refFormat(dt);
  bool nan = false, pinf = false, ninf = false, allNegZero = true;
  for (double x : xs) {
    nan = nan || std::isnan(x);
    pinf = pinf || x == INFINITY;
    ninf = ninf || x == -INFINITY;
    allNegZero = allNegZero && x == 0 && std::signbit(x);
  }
  if (nan || (pinf && ninf)) return f.nanBits;
  if (pinf || ninf) return (ninf ? f.signBit : 0) | (f.saturate ? f.maxBits : f.infBits);
  std::vector<mpfr_t> v(xs.size());
  std::vector<mpfr_ptr> ptrs(xs.size());
  for (size_t k = 0; k < xs.size(); ++k) {
    mpfr_init2(v[k], 53);
    mpfr_set_d(v[k], xs[k], MPFR_RNDN);
    ptrs[k] = v[k];
  }
  mpfr_t sum, r;
  mpfr_init2(sum, 2400);
  mpfr_init2(r, f.prec);
  mpfr_sum(sum, ptrs.data(), xs.size(), MPFR_RNDN);  // exact at this precision
  uint64_t out;
  if (mpfr_zero_p(sum)) {
    out = allNegZero ? f.signBit : 0;
  } else {
    // One rounding to the format's precision with an unbounded exponent,
    // then the format's range: overflow (IEEE: judged on that result),
    // results below the smallest subnormal by hand, the rest by
    // mpfr_subnormalize, which uses the ternary value against double rounding.
    int t = average ? mpfr_div_ui(r, sum, xs.size(), MPFR_RNDN) : mpfr_set(r, sum, MPFR_RNDN);
    const double rd = mpfr_get_d(r, MPFR_RNDN);  // exact: prec <= 53, in double's range
    const double minSub = std::ldexp(1.0, f.emin - 1);
    const uint64_t sign = mpfr_signbit(r) ? f.signBit : 0;
    if (std::fabs(rd) > f.maxFinite || std::isinf(rd)) {
      out = sign | (f.saturate ? f.maxBits : f.infBits);
    } else if (std::fabs(rd) < minSub) {
      // |exact| vs half the smallest subnormal (a value of the format's
      // precision, so rd is on the same side; on it, t says which side).
      // Scaled by 2^200 first: below double's subnormals mpfr_get_d would round.
      mpfr_t scaled;
      mpfr_init2(scaled, f.prec);
      mpfr_mul_2si(scaled, r, 200, MPFR_RNDN);  // exact
      const double a = std::fabs(mpfr_get_d(scaled, MPFR_RNDN));
      mpfr_clear(scaled);
      const double half = std::ldexp(minSub, 199);  // half the smallest subnormal, scaled
      const bool exactAbove = a > half || (a == half && (sign ? t > 0 : t < 0));
      out = sign | (exactAbove ? encodeExact(f, minSub) : 0);
    } else {
      const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
      mpfr_set_emin(f.emin);
      mpfr_set_emax(f.emax);
      t = mpfr_check_range(r, t, MPFR_RNDN);
      mpfr_subnormalize(r, t, MPFR_RNDN);
      const double x = mpfr_get_d(r, MPFR_RNDN);
      mpfr_set_emin(emin);
      mpfr_set_emax(emax);
      out = (std::fabs(x) > f.maxFinite || std::isinf(x))
                ? sign | (f.saturate ? f.maxBits : f.infBits)
                : encodeExact(f, x);
    }
  }
  mpfr_clear(sum);
  mpfr_clear(r);
  for (auto& x : v) mpfr_clear(x);
  return out;
}

// Sources as byte buffers of one type.
using Sources = std::vector<std::vector<uint8_t>>;

std::vector<const void*> pointers(const Sources& s) {
  std::vector<const void*> p;
  for (const auto& b : s) p.push_back(b.data());
  return p;
}

void storeBits(weft_datatype_t dt, uint8_t* p, uint64_t b) { std::memcpy(p, &b, datatypeSize(dt)); }

// A finite value of the type, rounded from x (to produce inputs only).
uint64_t toType(weft_datatype_t dt, double x) {
  switch (dt) {
    case WEFT_FLOAT32: {
      const float f = static_cast<float>(x);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case WEFT_FLOAT64: {
      uint64_t u;
      std::memcpy(&u, &x, 8);
      return u;
    }
    case WEFT_FLOAT16:
      return floatToHalf(static_cast<float>(x)).bits;
    case WEFT_BFLOAT16:
      return floatToBf16(static_cast<float>(x)).bits;
    case WEFT_FP8_E4M3:
      return floatToFp8e4m3(static_cast<float>(x)).bits;
    default:
      return floatToFp8e5m2(static_cast<float>(x)).bits;
  }
}

// Random finite bits of the type: every exponent, subnormals included.
uint64_t randomFinite(weft_datatype_t dt, std::mt19937_64& rng) {
  for (;;) {
    uint64_t b = rng();
    if (datatypeSize(dt) < 8) b &= (uint64_t{1} << (8 * datatypeSize(dt))) - 1;
    if (std::isfinite(decode(dt, b))) return b;
  }
}

enum class Pattern { kRawBits, kNormal, kCancel, kTies, kSpecials, kOverflow, kMixed };

// nsrc sources of count elements, element by element in the given pattern.
Sources makeSources(weft_datatype_t dt, int nsrc, size_t count, Pattern pat, std::mt19937_64& rng) {
  const size_t es = datatypeSize(dt);
  const RefFormat f = refFormat(dt);
  Sources s(nsrc, std::vector<uint8_t>(count * es));
  std::normal_distribution<double> normal(0.0, 1.0);
  for (size_t i = 0; i < count; ++i) {
    Pattern p = pat;
    if (p == Pattern::kMixed) p = static_cast<Pattern>(rng() % 6);
    for (int k = 0; k < nsrc; ++k) {
      uint64_t b = 0;
      switch (p) {
        case Pattern::kRawBits:
          b = randomFinite(dt, rng);
          break;
        case Pattern::kNormal:
          b = toType(dt, normal(rng));
          break;
        case Pattern::kCancel:
          // x, -x, x, -x ... and a tiny or a zero of either sign.
          if (k % 2 == 1) {
            b = loadBits(dt, s[k - 1].data() + i * es) ^ f.signBit;
          } else if (k == nsrc - 1) {
            const uint64_t r = rng() % 4;
            b = r == 0 ? 1 : r == 1 ? (1 | f.signBit) : r == 2 ? f.signBit : 0;
          } else {
            b = randomFinite(dt, rng);
          }
          break;
        case Pattern::kTies: {
          // x plus half an ulp of x (split over sources), maybe nudged by the
          // smallest subnormal: exact midpoints and just off them.
          if (k == 0) {
            b = randomFinite(dt, rng) & ~(f.signBit - 1 - ((f.signBit - 1) >> 1));
            b |= rng() & 1 ? f.signBit : 0;
          } else {
            const double x0 = decode(dt, loadBits(dt, s[0].data() + i * es));
            int e;
            std::frexp(x0, &e);
            double half = std::ldexp(1.0, e - 1 - f.mbits - 1) / std::max(1, nsrc - 2);
            if (std::signbit(x0)) half = -half;
            b = k == nsrc - 1 && rng() % 2 ? (rng() % 2 ? 1 : 1 | f.signBit) : toType(dt, half);
            if (!std::isfinite(decode(dt, b))) b = 0;
          }
          break;
        }
        case Pattern::kSpecials: {
          const uint64_t r = rng() % 8;
          b = r == 0   ? f.nanBits
              : r == 1 ? (f.saturate && dt == WEFT_FP8_E4M3 ? f.maxBits : f.infBits)
              : r == 2 ? (f.saturate && dt == WEFT_FP8_E4M3 ? f.maxBits : f.infBits) | f.signBit
              : r == 3 ? f.signBit
              : r == 4 ? 0
                       : randomFinite(dt, rng);
          if (dt == WEFT_FP8_E5M2 && (r == 1 || r == 2)) b = 0x7c | (r == 2 ? 0x80 : 0);
          break;
        }
        default:  // kOverflow: the largest values of one sign, and one of the other
          b = (k == 0 && rng() % 2) ? f.maxBits ^ f.signBit : f.maxBits;
          if (rng() % 3 == 0) b ^= f.signBit;
          break;
      }
      storeBits(dt, s[k].data() + i * es, b);
    }
  }
  return s;
}

// Runs the kernel and compares every element with the reference; then the
// sources reversed and shuffled must give the same bits.
void checkAgainstReference(weft_datatype_t dt, const Sources& s, size_t count, bool average,
                           std::mt19937_64& rng) {
  const size_t es = datatypeSize(dt);
  const int nsrc = static_cast<int>(s.size());
  std::vector<uint8_t> got(count * es + 1, 0xcd);
  auto p = pointers(s);
  REQUIRE(exactSumHost(got.data(), p.data(), nsrc, count, dt, average));
  CHECK(got[count * es] == 0xcd);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    std::vector<double> xs;
    for (int k = 0; k < nsrc; ++k) xs.push_back(decode(dt, loadBits(dt, s[k].data() + i * es)));
    const uint64_t want = reference(dt, xs, average);
    const uint64_t have = loadBits(dt, got.data() + i * es);
    if (have != want && bad++ < 3) {
      std::string in;
      for (int k = 0; k < nsrc && k < 12; ++k) {
        in += " " + hexElem(dt, s[k].data() + i * es);
      }
      FAIL_CHECK(datatypeName(dt) << (average ? " avg" : " sum") << " n=" << nsrc << " element "
                                  << i << ": inputs" << in << " got 0x" << std::hex << have
                                  << " want 0x" << want);
    }
  }
  std::vector<uint8_t> again(count * es);
  std::reverse(p.begin(), p.end());
  REQUIRE(exactSumHost(again.data(), p.data(), nsrc, count, dt, average));
  CHECK(std::memcmp(again.data(), got.data(), count * es) == 0);
  std::shuffle(p.begin(), p.end(), rng);
  REQUIRE(exactSumHost(again.data(), p.data(), nsrc, count, dt, average));
  CHECK(std::memcmp(again.data(), got.data(), count * es) == 0);
}

}  // namespace

TEST_CASE("exactSumHost matches MPFR for every float type - pattern - source count and ISA",
          "[kernels][exact]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    REQUIRE(g.ok);
    std::mt19937_64 rng(7);
    for (weft_datatype_t dt : kExactTypes) {
      for (int nsrc : {1, 2, 3, 4, 5, 6, 7, 8, 9, 100}) {
        for (Pattern pat : {Pattern::kRawBits, Pattern::kNormal, Pattern::kCancel, Pattern::kTies,
                            Pattern::kSpecials, Pattern::kOverflow, Pattern::kMixed}) {
          for (bool average : {false, true}) {
            const size_t count = nsrc >= 100 ? 97 : 1 + rng() % 600;  // crosses block edges
            INFO(isaName(isa) << " " << datatypeName(dt) << " nsrc=" << nsrc << " pattern="
                              << static_cast<int>(pat) << " avg=" << average << " count=" << count);
            checkAgainstReference(dt, makeSources(dt, nsrc, count, pat, rng), count, average, rng);
          }
        }
      }
    }
  }
}

TEST_CASE("exactSumHost with 1000 and 5000 sources", "[kernels][exact]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::mt19937_64 rng(11);
    for (weft_datatype_t dt : kExactTypes) {
      for (int nsrc : {1000, 5000}) {
        for (bool average : {false, true}) {
          INFO(isaName(isa) << " " << datatypeName(dt) << " nsrc=" << nsrc << " avg=" << average);
          checkAgainstReference(dt, makeSources(dt, nsrc, 5, Pattern::kMixed, rng), 5, average,
                                rng);
          checkAgainstReference(dt, makeSources(dt, nsrc, 5, Pattern::kNormal, rng), 5, average,
                                rng);
          checkAgainstReference(dt, makeSources(dt, nsrc, 37, Pattern::kNormal, rng), 37, average,
                                rng);
        }
      }
    }
  }
}

TEST_CASE("exactSumHost hand-picked cases", "[kernels][exact]") {
  auto run = [](weft_datatype_t dt, std::vector<double> vals, bool average) {
    const size_t es = datatypeSize(dt);
    Sources s(vals.size(), std::vector<uint8_t>(es));
    for (size_t k = 0; k < vals.size(); ++k) storeBits(dt, s[k].data(), toType(dt, vals[k]));
    auto p = pointers(s);
    std::vector<uint8_t> d(es);
    REQUIRE(exactSumHost(d.data(), p.data(), static_cast<int>(vals.size()), 1, dt, average));
    return loadBits(dt, d.data());
  };
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    INFO(isaName(isa));
    // 4 x DBL_MAX averaged: the sum overflows double, the average does not.
    CHECK(run(WEFT_FLOAT64, {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX}, true) == 0x7fefffffffffffffull);
    CHECK(run(WEFT_FLOAT64, {DBL_MAX, DBL_MAX, -DBL_MAX}, false) == 0x7fefffffffffffffull);
    CHECK(run(WEFT_FLOAT64, {DBL_MAX, DBL_MAX}, false) == 0x7ff0000000000000ull);
    // 1 + 2^-24 + 2^-24 in float: exact 1 + 2^-23 (a serial float sum gives 1).
    CHECK(run(WEFT_FLOAT32, {1.0, 0x1p-24, 0x1p-24}, false) == 0x3f800001u);
    // A tie: 1 + 2^-24 rounds to even (1); nudged by 2^-149 it rounds up.
    CHECK(run(WEFT_FLOAT32, {1.0, 0x1p-24}, false) == 0x3f800000u);
    CHECK(run(WEFT_FLOAT32, {1.0, 0x1p-24, 0x1p-149}, false) == 0x3f800001u);
    // Zeros: -0 only when every input is -0.
    CHECK(run(WEFT_FLOAT32, {-0.0, -0.0, -0.0}, false) == 0x80000000u);
    CHECK(run(WEFT_FLOAT32, {-0.0, 0.0, -0.0}, false) == 0u);
    CHECK(run(WEFT_FLOAT32, {1.0, -1.0}, false) == 0u);
    CHECK(run(WEFT_FLOAT32, {-1.0, 1.0}, false) == 0u);
    // A nonzero result that rounds to zero keeps its sign (avg of -2^-149 over 3).
    CHECK(run(WEFT_FLOAT32, {-0x1p-149, 0.0, 0.0}, true) == 0x80000000u);
    // Specials: canonical NaN, inf, fp8 saturation.
    CHECK(run(WEFT_FLOAT32, {INFINITY, -INFINITY}, false) == 0x7fc00000u);
    CHECK(run(WEFT_FLOAT32, {-NAN, 1.0}, false) == 0x7fc00000u);
    CHECK(run(WEFT_FLOAT32, {-INFINITY, 1.0}, false) == 0xff800000u);
    CHECK(run(WEFT_FP8_E4M3, {448.0, 448.0}, false) == 0x7eu);
    CHECK(run(WEFT_FP8_E4M3, {448.0, 448.0}, true) == 0x7eu);
    CHECK(run(WEFT_FP8_E5M2, {-57344.0, -57344.0}, false) == 0xfbu);
    CHECK(run(WEFT_FLOAT16, {65504.0, 16.0}, false) == 0x7c00u);  // 65520: the tie above max
    CHECK(run(WEFT_FLOAT16, {65504.0, 8.0}, false) == 0x7bffu);
    // bf16 without double rounding: 1 + 2^-8 + 2^-30 is above the tie.
    CHECK(run(WEFT_BFLOAT16, {1.0, 0x1p-8, 0x1p-30}, false) == 0x3f81u);
    // AVG on a midpoint: (4 + 1 + 5 * 2^-8) / 5 = 1 + 2^-8, halfway between
    // bf16's 1 and 1 + 2^-7; a 2^-100 more or less decides (the double
    // quotient is the midpoint itself, the residual's sign must say which way).
    CHECK(run(WEFT_BFLOAT16, {4.0, 1.0, 0x1.4p-6, 0.0, 0.0}, true) == 0x3f80u);
    CHECK(run(WEFT_BFLOAT16, {4.0, 1.0, 0x1.4p-6, 0x1p-100, 0.0}, true) == 0x3f81u);
    CHECK(run(WEFT_BFLOAT16, {4.0, 1.0, 0x1.4p-6, -0x1p-100, 0.0}, true) == 0x3f80u);
    CHECK(run(WEFT_BFLOAT16, {-4.0, -1.0, -0x1.4p-6, -0x1p-100, 0.0}, true) == 0xbf81u);
    // AVG where the float quotient RN24(S / n) is a midpoint of the format
    // but S / n is not (the float path's round-to-odd step decides; it needs
    // n > 2^(23 - p), docs/reproducibility.md): f16, n = 8193, q = 1 + 2^-11,
    // S = 8197 (+ 2^-10) just below (above) q n.
    // 17 copies: a vector group and the portable tail.
    auto many = [](weft_datatype_t dt, size_t ones, std::vector<double> rest) {
      std::vector<double> vals(ones, 1.0);
      vals.insert(vals.end(), rest.begin(), rest.end());
      const size_t es = datatypeSize(dt), count = 17;
      Sources s(vals.size(), std::vector<uint8_t>(count * es));
      for (size_t k = 0; k < vals.size(); ++k) {
        for (size_t i = 0; i < count; ++i) storeBits(dt, s[k].data() + i * es, toType(dt, vals[k]));
      }
      auto p = pointers(s);
      std::vector<uint8_t> d(count * es);
      REQUIRE(exactSumHost(d.data(), p.data(), static_cast<int>(vals.size()), count, dt, true));
      for (size_t i = 1; i < count; ++i)
        CHECK(loadBits(dt, d.data() + i * es) == loadBits(dt, d.data()));
      return loadBits(dt, d.data());
    };
    CHECK(many(WEFT_FLOAT16, 8190, {7.0, 0.0, 0.0}) == 0x3c00u);
    CHECK(many(WEFT_FLOAT16, 8190, {7.0, 0x1p-10, 0.0}) == 0x3c01u);
    // bf16, n = 65537, q = 1 + 2^-8, S = 65793 (+ 2^-7).
    CHECK(many(WEFT_BFLOAT16, 65534, {256.0, 3.0, 0.0}) == 0x3f80u);
    CHECK(many(WEFT_BFLOAT16, 65534, {256.0, 3.0, 0x1p-7}) == 0x3f81u);
    CHECK(run(WEFT_FLOAT32, {4.0, 1.0, 0x1.4p-22, 0.0, 0.0}, true) == 0x3f800000u);
    CHECK(run(WEFT_FLOAT32, {4.0, 1.0, 0x1.4p-22, 0x1p-140, 0.0}, true) == 0x3f800001u);
    CHECK(run(WEFT_FLOAT32, {4.0, 1.0, 0x1.4p-22, -0x1p-140, 0.0}, true) == 0x3f800000u);
  }
}

// float64 AVG whose exact sum needs more than one double: S / n on, just
// above and just below a midpoint between two doubles (above q and, for a
// power of two q, below it), and a few ulps away, so every branch of the
// fast path's final correction is taken; checked against MPFR.
TEST_CASE("exactSumHost float64 AVG near double midpoints", "[kernels][exact]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::mt19937_64 rng(13);
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    const size_t count = 600;
    for (int nsrc : {4, 5, 7, 8, 13, 100, 1000}) {
      Sources s(nsrc, std::vector<uint8_t>(count * 8, 0));
      for (size_t i = 0; i < count; ++i) {
        // q with a 40-bit mantissa, so that q n is one double for n < 2^13.
        const bool pow2 = rng() % 3 == 0;
        double q = pow2 ? 1.0 : std::ldexp(std::floor(std::ldexp(mant(rng), 39)), -39);
        q = std::ldexp(q, static_cast<int>(rng() % 200) - 100);
        if (rng() % 2) q = -q;
        const double u = std::ldexp(1.0, std::ilogb(q) - 52);  // ulp(q)
        // q n (p + pe, pe = 0 here), half a spacing above q (or below a power
        // of two) times n, and a nudge: 0, +-1 smallest subnormal, a few units
        // of the double-double's last bit (so close to the midpoint that the
        // approximate quotient may land on its wrong side), or a few ulps of q.
        const double n = nsrc;
        const double p = q * n, pe = std::fma(q, n, -p);
        const bool below = pow2 && rng() % 2;
        double half = (below ? -0.25 : 0.5) * u * n;
        if (q < 0) half = -half;
        // The nudges of the order of lo's last bit come from the error of p + half.
        const double ph = p + half, err = (p - (ph - (ph - p))) + (half - (ph - p));
        const int lastBit = (err != 0 ? std::ilogb(err) : std::ilogb(q) - 60) - 52;
        const double tiny = std::ldexp(1.0, lastBit + static_cast<int>(rng() % 4));
        const uint64_t r = rng() % 6;
        const double nudge = r == 0   ? 0.0
                             : r == 1 ? (rng() % 2 ? 0x1p-1074 : -0x1p-1074)
                             : r <= 3
                                 ? (rng() % 2 ? tiny : -tiny) * static_cast<double>(1 + rng() % 5)
                                 : u * static_cast<double>(rng() % 7) - 3 * u;
        const double vals[4] = {p, pe, half, nudge};
        for (int k = 0; k < 4; ++k) std::memcpy(s[k].data() + i * 8, &vals[k], 8);
      }
      INFO(isaName(isa) << " nsrc=" << nsrc);
      const ExactSumCounters before = exactSumCounters();
      checkAgainstReference(WEFT_FLOAT64, s, count, true, rng);
      // Only the +-2^-1074 nudges (a sixth of the elements) need the slow path.
      CHECK(exactSumCounters().slow - before.slow <= 3 * count / 4);
    }
  }
}

TEST_CASE("exactSumHost dst may alias any source", "[kernels][exact]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::mt19937_64 rng(3);
    for (weft_datatype_t dt : kExactTypes) {
      const size_t es = datatypeSize(dt), count = 777;
      const Sources s = makeSources(dt, 4, count, Pattern::kMixed, rng);
      std::vector<uint8_t> want(count * es);
      auto p = pointers(s);
      REQUIRE(exactSumHost(want.data(), p.data(), 4, count, dt, true));
      for (int k = 0; k < 4; ++k) {
        Sources c = s;
        auto q = pointers(c);
        REQUIRE(exactSumHost(c[k].data(), q.data(), 4, count, dt, true));
        CHECK(c[k] == want);
      }
    }
  }
}

TEST_CASE("exactSumHost takes the fast path on typical data", "[kernels][exact]") {
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::mt19937_64 rng(5);
    for (weft_datatype_t dt : kExactTypes) {
      for (bool average : {false, true}) {
        const size_t count = 4096;
        const Sources s = makeSources(dt, 8, count, Pattern::kNormal, rng);
        auto p = pointers(s);
        std::vector<uint8_t> d(count * datatypeSize(dt));
        ExactSumCounters& c = exactSumCounters();
        const ExactSumCounters before = c;
        REQUIRE(exactSumHost(d.data(), p.data(), 8, count, dt, average));
        INFO(isaName(isa) << " " << datatypeName(dt) << " avg=" << average);
        CHECK(c.fast + c.slow - before.fast - before.slow == count);
        CHECK(c.slow - before.slow <= count / 100);
      }
    }
  }
}

// The narrow types' three paths, each reached on purpose and checked against
// MPFR: the float lanes (typical data), the double path (a float sum that is
// not exact, a double sum that is: 25 to 34 bits of spread; e4m3 needs more
// than 64 sources for that), and the slow path (bf16: a spread beyond 53
// bits; the others: a NaN). Counts of 37 cross the vector groups' edge.
TEST_CASE("exactSumHost narrow types reach the float - double and slow paths", "[kernels][exact]") {
  const struct {
    weft_datatype_t dt;
    double big, small;          // big + small: inexact in float, exact in double
    double slowBig, slowSmall;  // 0: a NaN instead
  } cases[] = {{WEFT_BFLOAT16, 1.0, 0x1p-30, 0x1p100, 0x1p-100},
               {WEFT_FLOAT16, 1024.0, 0x1p-24, 0, 0},
               {WEFT_FP8_E4M3, 448.0, 0x1p-9, 0, 0},
               {WEFT_FP8_E5M2, 57344.0, 0x1p-16, 0, 0}};
  for (cpu::HostIsa isa : supportedIsas()) {
    IsaGuard g(isa);
    std::mt19937_64 rng(17);
    for (const auto& c : cases) {
      const size_t es = datatypeSize(c.dt), count = 37;
      const RefFormat f = refFormat(c.dt);
      for (bool average : {false, true}) {
        for (int path = 0; path < 3; ++path) {
          const int nsrc = path == 1 && c.dt == WEFT_FP8_E4M3 ? 100 : 3;
          Sources s;
          if (path == 0) {
            s = makeSources(c.dt, nsrc, count, Pattern::kNormal, rng);
          } else {
            s.assign(nsrc, std::vector<uint8_t>(count * es, 0));
            for (size_t i = 0; i < count; ++i) {
              const double sign = rng() % 2 ? -1.0 : 1.0;
              const double big = path == 1 ? c.big : c.slowBig;
              const double small = path == 1 ? c.small : c.slowSmall;
              // The small value at a random source, big ones at the others but one.
              const int at = static_cast<int>(rng() % nsrc);
              for (int k = 0; k < nsrc; ++k) {
                uint64_t b = k == at                            ? toType(c.dt, sign * small)
                             : k == (at + 1) % nsrc && nsrc > 3 ? 0
                                                                : toType(c.dt, sign * big);
                if (big == 0 && k == at) b = f.nanBits;
                storeBits(c.dt, s[k].data() + i * es, b);
              }
            }
          }
          INFO(isaName(isa) << " " << datatypeName(c.dt) << " avg=" << average << " path=" << path);
          auto p = pointers(s);
          std::vector<uint8_t> d(count * es);
          ExactSumCounters& cnt = exactSumCounters();
          const ExactSumCounters before = cnt;
          REQUIRE(exactSumHost(d.data(), p.data(), nsrc, count, c.dt, average));
          const uint64_t inFloat = cnt.floatFast - before.floatFast;
          const uint64_t fast = cnt.fast - before.fast, slow = cnt.slow - before.slow;
          CHECK(fast + slow == count);
          CHECK(inFloat == (path == 0 ? count : 0));
          CHECK(slow == (path == 2 ? count : 0));
          checkAgainstReference(c.dt, s, count, average, rng);
        }
      }
    }
  }
}

TEST_CASE("exactSumHost refuses non-float types and nsrc < 1", "[kernels][exact]") {
  int32_t a[2] = {1, 2}, d[2] = {7, 7};
  const void* p[1] = {a};
  CHECK_FALSE(exactSumHost(d, p, 1, 2, WEFT_INT32, false));
  CHECK_FALSE(exactSumHost(d, p, 0, 2, WEFT_FLOAT32, false));
  CHECK(d[0] == 7);
  CHECK(d[1] == 7);
}
