// The wire-format kernels (kernels/cpu/wire.h): bf16 and fp16 narrowing is
// ops.h's nearest-even conversion (itself checked against exact references in
// test_convert.cc), the vector and portable kernels agree bit for bit, fp16's
// per-message scale never overflows, keeps small values' precision and picks
// the same scale again for a message's widened values, and widening is exact.
#include <cfloat>

#include "kernels/cpu/wire.h"
#include "kernels/kernel_ref.h"

using namespace kref;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random floats of every magnitude and the awkward ones: ties, specials,
// subnormals, the largest values, fp16's limits.
std::vector<float> edgyFloats(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (g() % 4) {
      case 0:
        v[i] = fromBits(static_cast<uint32_t>(g()));
        break;  // any pattern
      case 1:
        v[i] = std::ldexp(static_cast<float>(g() % 2048) - 1024.0f, -20);
        break;
      case 2:
        v[i] = fromBits((static_cast<uint32_t>(g()) & 0xffff0000u) | 0x8000u);
        break;
      default: {
        static const float special[] = {0.0f,     -0.0f,    INFINITY,  -INFINITY, NAN,
                                        65504.0f, 65520.0f, -65519.0f, 6.1e-5f,   5.96e-8f,
                                        1e-40f,   FLT_MAX,  -FLT_MAX,  FLT_MIN,   1.0f + 0x1p-11f};
        v[i] = special[g() % (sizeof special / sizeof special[0])];
      }
    }
  }
  return v;
}

// Finite values spanning `decades` powers of two around 2^e.
std::vector<float> finiteFloats(size_t n, int e, int decades, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(u(g), e - static_cast<int>(g() % (decades + 1)));
  return v;
}

}  // namespace

TEST_CASE("wire: bf16 narrowing is ops.h's rounding and widening is exact", "[kernels][wire]") {
  for (auto isa : supportedIsas()) {
    IsaGuard guard(isa);
    REQUIRE(guard.ok);
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{33}, size_t{1000}}) {
      const auto x = edgyFloats(n, n);
      std::vector<uint16_t> w(n);
      std::vector<float> back(n), kept(n), sum(n), a(n, 1.5f);
      wireNarrow(w.data(), x.data(), n, Wire::Bf16, kept.data());
      wireWiden(back.data(), w.data(), n, Wire::Bf16);
      wireWidenAdd(sum.data(), a.data(), w.data(), n, Wire::Bf16);
      for (size_t i = 0; i < n; ++i) {
        INFO("isa " << static_cast<int>(isa) << " x bits " << std::hex << bitsOf(x[i]));
        REQUIRE(w[i] == floatToBf16(x[i]).bits);
        REQUIRE(bitsOf(back[i]) == bitsOf(kept[i]));
        REQUIRE(bitsOf(back[i]) == bitsOf(bf16ToFloat(bf16_t{w[i]})));
        const float want = 1.5f + back[i];
        REQUIRE(bitsOf(sum[i]) == bitsOf(want));
      }
    }
  }
}

TEST_CASE("wire: vector and portable kernels give the same bits", "[kernels][wire]") {
  const auto isas = supportedIsas();
  if (isas.size() < 2) return;
  for (Wire f : {Wire::Bf16, Wire::Fp16}) {
    for (size_t n : {size_t{5}, size_t{64}, size_t{1001}}) {
      for (int variant = 0; variant < 3; ++variant) {
        const auto x =
            variant == 0 ? edgyFloats(n, 7 * n) : finiteFloats(n, variant * 40 - 60, 30, n);
        std::vector<std::vector<uint8_t>> wires;
        std::vector<std::vector<float>> kept, added;
        for (auto isa : isas) {
          IsaGuard guard(isa);
          std::vector<uint8_t> w(wireBytes(f, n));
          std::vector<float> k(n), s(n);
          wireNarrow(w.data(), x.data(), n, f, k.data());
          wireWidenAdd(s.data(), x.data(), w.data(), n, f);
          wires.push_back(w);
          kept.push_back(k);
          added.push_back(s);
        }
        for (size_t j = 1; j < isas.size(); ++j) {
          REQUIRE(wires[j] == wires[0]);
          REQUIRE(std::memcmp(kept[j].data(), kept[0].data(), n * 4) == 0);
          REQUIRE(std::memcmp(added[j].data(), added[0].data(), n * 4) == 0);
        }
      }
    }
  }
}

TEST_CASE("wire: fp16 scales each message so nothing finite overflows", "[kernels][wire]") {
  // Values near and far above 65504, tiny values, float subnormals, FLT_MAX.
  for (int e : {-140, -120, -100, -60, -24, -14, 0, 10, 15, 16, 17, 40, 100, 127}) {
    const size_t n = 257;
    const auto x = finiteFloats(n, e, 12, static_cast<uint64_t>(e + 1000));
    std::vector<uint8_t> w(wireBytes(Wire::Fp16, n));
    std::vector<float> back(n), kept(n);
    wireNarrow(w.data(), x.data(), n, Wire::Fp16, kept.data());
    wireWiden(back.data(), w.data(), n, Wire::Fp16);
    float maxAbs = 0;
    for (float v : x) maxAbs = std::max(maxAbs, std::fabs(v));
    const int k = wireFp16ScaleExp(x.data(), n);
    for (size_t i = 0; i < n; ++i) {
      INFO("e " << e << " k " << k << " x " << x[i] << " back " << back[i]);
      REQUIRE(bitsOf(back[i]) == bitsOf(kept[i]));
      REQUIRE(std::isfinite(back[i]));
      // One rounding to 11 bits, or below fp16's normal range an absolute
      // error of half its smallest subnormal (2^-25), scaled back by 2^-k.
      const double err = std::fabs(static_cast<double>(back[i]) - x[i]);
      const double bound =
          std::max(std::fabs(static_cast<double>(x[i])) * 0x1p-11, std::ldexp(1.0, -25 - k));
      REQUIRE(err <= bound);
    }
    // The largest magnitude keeps fp16's full precision: it lands in [2^14, 2^15).
    if (maxAbs >= 0x1p-111f) REQUIRE(std::ldexp(static_cast<double>(maxAbs), k) >= 0x1p13);
  }
  // FLT_MAX rounds to 11 bits as IEEE would: to infinity; its neighbours stay finite.
  const float big[3] = {FLT_MAX, 1e38f, -3e38f};
  std::vector<uint8_t> w(wireBytes(Wire::Fp16, 3));
  float back[3];
  wireNarrow(w.data(), big, 3, Wire::Fp16, nullptr);
  wireWiden(back, w.data(), 3, Wire::Fp16);
  CHECK(std::isinf(back[0]));
  CHECK(std::fabs(back[1] - 1e38f) <= 1e38f * 0x1p-11f);
  CHECK(std::fabs(back[2] + 3e38f) <= 3e38f * 0x1p-11f);
}

TEST_CASE("wire: fp16 specials - NaN and infinities do not set the scale", "[kernels][wire]") {
  const float x[6] = {INFINITY, NAN, 1e6f, -INFINITY, -0.0f, 3.0f};
  std::vector<uint8_t> w(wireBytes(Wire::Fp16, 6));
  float back[6];
  wireNarrow(w.data(), x, 6, Wire::Fp16, nullptr);
  wireWiden(back, w.data(), 6, Wire::Fp16);
  CHECK(back[0] == INFINITY);
  CHECK(std::isnan(back[1]));
  CHECK(std::fabs(back[2] - 1e6f) <= 1e6f * 0x1p-11f);
  CHECK(back[3] == -INFINITY);
  CHECK(bitsOf(back[4]) == 0x80000000u);
  CHECK(back[5] == 3.0f);
  const float none[2] = {NAN, INFINITY};
  CHECK(wireFp16ScaleExp(none, 2) == 0);
}

TEST_CASE("wire: narrowing widened values gives the same message back", "[kernels][wire]") {
  // A rank forwarding a result it received must send exactly the same bits.
  std::mt19937_64 g(42);
  for (Wire f : {Wire::Bf16, Wire::Fp16}) {
    for (int trial = 0; trial < 400; ++trial) {
      const size_t n = 1 + g() % 40;
      auto x = trial % 2 ? edgyFloats(n, g())
                         : finiteFloats(n, static_cast<int>(g() % 280) - 150, 20, g());
      // The largest magnitude just below a power of two: rounding carries it up.
      if (trial % 3 == 0) x[0] = std::ldexp(2.0f - 0x1p-12f, static_cast<int>(g() % 200) - 100);
      std::vector<uint8_t> w1(wireBytes(f, n)), w2(wireBytes(f, n));
      std::vector<float> back(n);
      wireNarrow(w1.data(), x.data(), n, f, nullptr);
      wireWiden(back.data(), w1.data(), n, f);
      wireNarrow(w2.data(), back.data(), n, f, nullptr);
      std::vector<float> back2(n);
      wireWiden(back2.data(), w2.data(), n, f);
      INFO("format " << wireName(f) << " trial " << trial);
      REQUIRE(std::memcmp(back.data(), back2.data(), n * 4) == 0);
    }
  }
}
