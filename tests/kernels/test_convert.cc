// The narrow float conversions (kernels/ops.h) against the exact references
// of kernel_ref.h, every pattern and every rounding case, scalar and vector.
#include "kernels/kernel_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace kref;

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
