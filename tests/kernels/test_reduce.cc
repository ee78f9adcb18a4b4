// reduceHost and reduceHostN (kernels/cpu/reduce.h) against the reference,
// for every type, op and instruction set, and the vector kernels against
// the portable ones bit for bit.
#include "kernels/kernel_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace kref;

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
    for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG})
      CHECK(opSupported(dt, op));
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
