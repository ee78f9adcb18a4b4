#include "core/clock.h"

#include <atomic>
#include <fstream>
#include <string>

#include "core/file.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define WEFT_HAVE_TSC 1
#endif

namespace weft {
namespace {

struct TscClock {
  bool ok = false;
  double nsPerTick = 0;
  uint64_t reanchorTicks = 0;
};

#ifdef WEFT_HAVE_TSC
// The counter is usable when it ticks at a constant rate through sleep
// states (constant_tsc, nonstop_tsc) and the kernel trusts it enough to
// keep its own time with it (clocksource tsc): then it is also synchronized
// across cores.
bool tscTrusted() {
  if (readFirstLine("/sys/devices/system/clocksource/clocksource0/current_clocksource") != "tsc")
    return false;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, 5, "flags") == 0)
      return line.find(" constant_tsc") != std::string::npos &&
             line.find(" nonstop_tsc") != std::string::npos;
  return false;
}

TscClock calibrate() {
  TscClock c;
  if (!tscTrusted()) return c;
  // Two milliseconds of the system clock against the counter: the rate to
  // within some 20 ppm, which re-anchoring every millisecond turns into
  // 20 ns at most.
  const uint64_t t0 = systemNowNs(), c0 = __rdtsc();
  uint64_t t1 = t0;
  while (t1 - t0 < 2000000) t1 = systemNowNs();
  const uint64_t c1 = __rdtsc();
  if (c1 <= c0) return c;
  c.nsPerTick = static_cast<double>(t1 - t0) / static_cast<double>(c1 - c0);
  if (!(c.nsPerTick > 0.01 && c.nsPerTick < 10)) return c;  // 100 MHz .. 100 GHz
  c.reanchorTicks = static_cast<uint64_t>(1e6 / c.nsPerTick);
  c.ok = true;
  return c;
}
#endif

}  // namespace

#ifdef WEFT_HAVE_TSC
namespace {

// This thread's anchor: the counter and the system clock read together,
// and the last value returned. Read through a TLS descriptor
// (-mtls-dialect=gnu2): no call to __tls_get_addr, and no initial-exec
// model, which would make libweft.so refuse to load with dlopen.
// One struct, so that a read of all three is one descriptor call.
struct Anchor {
  uint64_t tsc = 0;
  uint64_t ns = 0;
  uint64_t last = 0;
};
thread_local Anchor tAnchor;

// The system clock between two counter reads, the pair taken at their
// midpoint; a pair the thread was preempted in (wider than 2 us) is taken
// again, up to 4 times, keeping the tightest. An anchor taken across a
// preemption would put every reading of the next millisecond behind by as
// long as the preemption lasted. Out of line: nowNs() then stays a leaf
// that saves no registers (a fifth of its instructions).
__attribute__((noinline, cold)) uint64_t reanchor(const TscClock& clock) {
  uint64_t best = ~0ull;
  for (int i = 0; i < 4 && best > clock.reanchorTicks / 500; ++i) {
    const uint64_t c0 = __rdtsc(), ns = systemNowNs(), c1 = __rdtsc();
    if (c1 - c0 < best) {
      best = c1 - c0;
      tAnchor.ns = ns;
      tAnchor.tsc = c0 + (c1 - c0) / 2;
    }
  }
  uint64_t v = tAnchor.ns;
  if (v < tAnchor.last) v = tAnchor.last;
  tAnchor.last = v;
  return v;
}

}  // namespace
#endif

#ifdef WEFT_HAVE_TSC
namespace {

// The calibration, once per process; gClockReady says it is done (and ok).
const TscClock& tscClock() {
  static const TscClock clock = calibrate();
  return clock;
}
std::atomic<bool> gClockReady{false};
TscClock gClock;  // a copy of tscClock() once gClockReady

// The first call, a thread's first call, a re-anchoring, or no usable
// counter. Out of line: nowNs() stays a leaf that saves no registers.
__attribute__((noinline)) uint64_t nowNsSlow() {
  const TscClock& clock = tscClock();
  if (!clock.ok) return systemNowNs();
  if (!gClockReady.load(std::memory_order_acquire)) {
    gClock = clock;
    gClockReady.store(true, std::memory_order_release);
  }
  const uint64_t t = __rdtsc();
  if (tAnchor.ns != 0 && t - tAnchor.tsc < clock.reanchorTicks) {
    uint64_t v = tAnchor.ns +
                 static_cast<uint64_t>(static_cast<int64_t>(
                     static_cast<double>(static_cast<int64_t>(t - tAnchor.tsc)) * clock.nsPerTick));
    if (v < tAnchor.last) v = tAnchor.last;
    tAnchor.last = v;
    return v;
  }
  return reanchor(clock);
}

}  // namespace
#endif

uint64_t nowNs() {
#ifdef WEFT_HAVE_TSC
  // gClock is written once, before gClockReady (which only goes true).
  if (gClockReady.load(std::memory_order_acquire)) {
    const uint64_t t = __rdtsc();
    if (tAnchor.ns != 0 && t - tAnchor.tsc < gClock.reanchorTicks) {
      // Through int64: unsigned 64-bit <-> double conversions take a dozen
      // instructions each on x86-64 (the difference is under a millisecond
      // of ticks: the anchor is renewed that often).
      uint64_t v =
          tAnchor.ns +
          static_cast<uint64_t>(static_cast<int64_t>(
              static_cast<double>(static_cast<int64_t>(t - tAnchor.tsc)) * gClock.nsPerTick));
      if (v < tAnchor.last) v = tAnchor.last;
      tAnchor.last = v;
      return v;
    }
  }
  return nowNsSlow();
#else
  return systemNowNs();
#endif
}

}  // namespace weft
