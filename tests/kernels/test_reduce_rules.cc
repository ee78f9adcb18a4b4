// The reductions' rules: integer wrap-around, NaN and signed zero in MIN
// and MAX, fp8 saturation, AVG's division, streaming stores.
#include "kernels/kernel_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace kref;

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
