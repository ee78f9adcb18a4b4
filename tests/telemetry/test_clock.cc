// nowNs() (core/clock.h): read from the time-stamp counter where the
// kernel keeps time with it, it must still follow the system's monotonic
// clock and never go back on a thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/clock.h"

using namespace weft;

TEST_CASE("clock: nowNs follows the system clock and never goes back", "[telemetry][clock]") {
  auto check = [](int64_t* worstSkew, bool* backwards) {
    uint64_t last = 0;
    const uint64_t end = systemNowNs() + 300000000;  // 300 ms, across many re-anchorings
    while (systemNowNs() < end) {
      const uint64_t a = systemNowNs(), v = nowNs(), b = systemNowNs();
      if (v < last) *backwards = true;
      last = v;
      // v should fall in [a, b]; how far outside it falls is the error.
      const int64_t skew = v < a ? static_cast<int64_t>(a - v) : v > b ? static_cast<int64_t>(v - b) : 0;
      *worstSkew = std::max(*worstSkew, skew);
    }
  };
  int64_t skew = 0;
  bool back = false;
  check(&skew, &back);
  CHECK_FALSE(back);
  // Re-anchored every millisecond: a counter rate off by even 100 ppm
  // stays within 100 ns; allow scheduling noise on a busy machine.
  CHECK(skew < 20000);
  // Every thread keeps its own anchor.
  std::vector<int64_t> skews(2, 0);
  bool backs[2] = {false, false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t) ts.emplace_back([&, t] { check(&skews[t], &backs[t]); });
  for (auto& t : ts) t.join();
  for (int t = 0; t < 2; ++t) {
    CHECK_FALSE(backs[t]);
    CHECK(skews[t] < 20000);
  }
  // Elapsed time agrees with the system clock over a longer stretch.
  const uint64_t s0 = systemNowNs(), f0 = nowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t s1 = systemNowNs(), f1 = nowNs();
  const double ratio = static_cast<double>(f1 - f0) / static_cast<double>(s1 - s0);
  CHECK(ratio > 0.999);
  CHECK(ratio < 1.001);
}
