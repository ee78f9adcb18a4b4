// foldHost (kernels/cpu/fold.h), the reproducible modes' arithmetic: the
// ordered fold against the definition written out (tests/repro/repro_ref.h)
// for every float type, 1 to 9 sources, SUM / AVG / PROD, with dst aliasing
// any source; and both modes giving the same bits whatever floating-point
// mode the calling thread set.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "kernels/cpu/fold.h"
#include "repro/repro_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace weft;


TEST_CASE("foldHost ordered equals the serial fold for every float type", "[kernels][repro]") {
  for (weft_datatype_t dt : repro::kFloatTypes) {
    repro::withType(dt, [&](auto v) {
      using T = decltype(v);
      for (int n = 1; n <= 9; ++n) {
        for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_PROD}) {
          for (int alias : {-1, 0, n / 2, n - 1}) {
            const size_t count = 1000 + static_cast<size_t>(n);
            std::vector<std::vector<T>> in(n, std::vector<T>(count));
            for (int r = 0; r < n; ++r)
              repro::fillOrderExposing(in[r].data(), count, r, 11 + n, op == WEFT_PROD);
            std::vector<std::vector<T>> work = in;
            std::vector<const void*> srcs(n);
            for (int r = 0; r < n; ++r) srcs[r] = work[r].data();
            std::vector<T> out(count);
            T* dst = alias >= 0 ? work[alias].data() : out.data();
            foldHost(dst, srcs.data(), n, count, dt, op, false);
            std::vector<T> vals(n);
            size_t bad = 0;
            for (size_t i = 0; i < count; ++i) {
              for (int r = 0; r < n; ++r) vals[r] = in[r][i];
              const T want = repro::orderedFold(vals.data(), n, op);
              if (std::memcmp(&want, &dst[i], sizeof(T)) != 0) ++bad;
            }
            INFO("dt " << dt << " n " << n << " op " << op << " alias " << alias);
            CHECK(bad == 0);
          }
        }
      }
    });
  }
}

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("foldHost gives the same bits under flush-to-zero and another rounding mode",
          "[kernels][repro]") {
  // Subnormal-heavy float inputs: flush-to-zero / denormals-are-zero would
  // change them, and round-toward-zero would change most sums.
  const int n = 5;
  const size_t count = 4099;
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      in[r][i] = std::ldexp(1.0f + static_cast<float>((i * 31 + r * 17) % 97) / 97.0f,
                            -140 + static_cast<int>((i + r) % 30)) *
                 ((i + r) % 3 ? 1.0f : -1.0f);
  std::vector<const void*> srcs(n);
  for (int r = 0; r < n; ++r) srcs[r] = in[r].data();
  for (bool exact : {false, true}) {
    std::vector<float> want(count), got(count);
    foldHost(want.data(), srcs.data(), n, count, WEFT_FLOAT32, WEFT_AVG, exact);
    const unsigned saved = _mm_getcsr();
    for (unsigned mode : {0x8040u, 0x6000u, 0x2000u}) {  // FTZ|DAZ, toward zero, down
      _mm_setcsr((saved & ~0xe040u) | mode);
      foldHost(got.data(), srcs.data(), n, count, WEFT_FLOAT32, WEFT_AVG, exact);
      const unsigned after = _mm_getcsr();
      _mm_setcsr(saved);
      INFO("exact " << exact << " mode " << mode);
      CHECK((after & 0xe040u) == mode);  // the caller's mode is back
      CHECK(std::memcmp(want.data(), got.data(), count * 4) == 0);
    }
  }
}
#endif
