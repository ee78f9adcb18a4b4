// Arrival stamps (src/telemetry/stamp.h): packing, ordering, the 44-bit wrap.
#include <catch2/catch.hpp>

#include "telemetry/stamp.h"

using namespace weft::telemetry;

TEST_CASE("stamp: rank and time survive packing", "[telemetry][stamp]") {
  const uint64_t t = 1795955303917268935ull;  // a realtime-based clock, ns
  for (int rank : {0, 1, 7, 4095, 1000000}) {
    uint64_t s = makeStamp(t, rank);
    REQUIRE(hasStamp(s));
    CHECK(stampRank(s) == rank);
    // 64 ns resolution, reconstructed near any time within days.
    const uint64_t back = stampNs(s, t + 3600ull * 1000000000ull);
    CHECK(back <= t);
    CHECK(t - back < 64);
  }
  CHECK_FALSE(hasStamp(0));
}

TEST_CASE("stamp: the later entry wins, ties go to the higher rank", "[telemetry][stamp]") {
  const uint64_t t = 5000000000ull;
  uint64_t early = makeStamp(t, 3), late = makeStamp(t + 1000, 1);
  CHECK(laterStamp(early, late) == late);
  CHECK(laterStamp(late, early) == late);
  uint64_t tieLow = makeStamp(t, 2), tieHigh = makeStamp(t, 5);
  CHECK(laterStamp(tieLow, tieHigh) == tieHigh);
  CHECK(laterStamp(tieHigh, tieLow) == tieHigh);
  // A missing stamp (a transport that does not carry them) never wins.
  CHECK(laterStamp(0, early) == early);
  CHECK(laterStamp(early, 0) == early);
}

TEST_CASE("stamp: comparisons hold across the 44-bit wrap", "[telemetry][stamp]") {
  // Units of 64 ns modulo 2^44: pick times just before and after a wrap.
  const uint64_t period = (1ull << 44) << 6;
  const uint64_t before = 7 * period - 1000, after = 7 * period + 1000;
  uint64_t a = makeStamp(before, 0), b = makeStamp(after, 1);
  CHECK(laterStamp(a, b) == b);
  CHECK(laterStamp(b, a) == b);
  const uint64_t back = stampNs(b, before);
  CHECK(back > before);
  CHECK(back <= after);
  CHECK(after - back < 64);
}
