// Monotonic time and deadlines: every wait in weft is bounded by a Deadline.
#pragma once

#include <chrono>
#include <cstdint>

namespace weft {

// CLOCK_MONOTONIC (steady_clock) in nanoseconds. Where the CPU's
// time-stamp counter is invariant and the kernel itself keeps time with it,
// read from the counter and re-anchored to the system clock every
// millisecond per thread (clock.cc): 10 ns a read here instead of 24, which
// a small collective pays several times. Never goes back on one thread.
uint64_t nowNs();
// The system clock itself (what nowNs() follows).
inline uint64_t systemNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
inline double nowSeconds() { return static_cast<double>(nowNs()) * 1e-9; }

class Deadline {
 public:
  // NaN or seconds <= 0: already expired; past the clock's range: never.
  explicit Deadline(double seconds) : end_(endNs(seconds)) {}
  bool expired() const { return nowNs() >= end_; }
  // Milliseconds left, clamped to [0, INT32_MAX], for poll().
  int remainingMs() const {
    uint64_t now = nowNs();
    if (now >= end_) return 0;
    uint64_t ms = (end_ - now) / 1000000 + 1;
    return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
  }

 private:
  static uint64_t endNs(double seconds) {
    const uint64_t now = nowNs();
    if (!(seconds > 0)) return now;
    const double ns = seconds * 1e9;  // +inf stays +inf
    if (ns >= static_cast<double>(UINT64_MAX - now)) return UINT64_MAX;
    return now + static_cast<uint64_t>(ns);
  }

  uint64_t end_;
};

}  // namespace weft
