// Fuzz target: environment values (src/core/config.cc). parseBytes on the
// whole input, then Config::fromEnv with the input cut at NUL bytes into
// the values of the numeric WEFT_* variables, and what weft does next with
// the numbers it accepted (deadlines from the timeouts).
//
// Checks: parseBytes accepts exactly digits with an optional K/M/G and B
// suffix and returns their exact value, refusing what does not fit in
// size_t (a reference computed here in 128 bits); fromEnv keeps every
// number in the range its variable documents, and a Deadline built from a
// timeout it accepted is well defined (UBSan: float-to-integer overflow).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/clock.h"
#include "core/config.h"

namespace {

// The bytes "s" stands for, or false: the grammar written independently.
bool referenceBytes(const std::string& s, size_t* out) {
  size_t i = 0;
  unsigned __int128 v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + static_cast<unsigned>(s[i] - '0');
    if (v > SIZE_MAX) return false;
    ++i;
  }
  if (i == 0) return false;
  if (i < s.size()) {
    int shift;
    switch (s[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    v <<= shift;
    ++i;
    if (i < s.size() && (s[i] == 'b' || s[i] == 'B')) ++i;
    if (i != s.size() || v > SIZE_MAX) return false;
  }
  *out = static_cast<size_t>(v);
  return true;
}

const char* const kVars[] = {
    "WEFT_TIMEOUT_S",        "WEFT_BOOTSTRAP_TIMEOUT_S", "WEFT_NSOCKS_PER_PEER",
    "WEFT_SOCKET_BUF_BYTES", "WEFT_CHUNK_BYTES",         "WEFT_SHM_SLOT_BYTES",
    "WEFT_SHM_SLOTS",        "WEFT_SHM_ARENA_CHUNK",     "WEFT_SPIN_US",
    "WEFT_SHM_DIRECT_MIN",   "WEFT_TELEMETRY",           "WEFT_STATS_INTERVAL_S",
    "WEFT_STALL_WARN_S",     "WEFT_FLIGHT_RECORDER",     "WEFT_IB_GID_INDEX",
    "WEFT_IB_QPS_PER_PEER",  "WEFT_UCX_FAST_RNDV",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (setenv("WEFT_DEBUG", "NONE", 1), true);
  (void)quiet;
  const std::string in(reinterpret_cast<const char*>(data), size);

  size_t got = 12345, want = 0;
  bool ok = weft::parseBytes(in, &got);
  bool refOk = in.find('\0') == std::string::npos && referenceBytes(in, &want);
  if (ok != refOk) abort();
  if (ok && got != want) abort();
  if (!ok && got != 12345) abort();  // output set on failure

  // Values cut at NUL, one per variable in turn; the rest unset.
  size_t pos = 0;
  for (const char* v : kVars) {
    if (pos <= in.size()) {
      size_t end = in.find('\0', pos);
      if (end == std::string::npos) end = in.size();
      setenv(v, in.substr(pos, end - pos).c_str(), 1);
      pos = end + 1;
    } else {
      unsetenv(v);
    }
  }
  weft::Config c = weft::Config::fromEnv();
  if (!(c.timeoutS > 0) || !(c.bootstrapTimeoutS > 0) || !(c.stallWarnS > 0) ||
      !(c.statsIntervalS >= 0))
    abort();
  if (c.nsocksPerPeer < 1 || c.nsocksPerPeer > 16 || c.shmSlots < 2 || c.shmSlots > 1024 ||
      c.shmSlotBytes < 4096 || c.socketBufBytes > (1u << 30) || c.ibQpsPerPeer < 1 ||
      c.ibQpsPerPeer > 16 || c.ibGidIndex < -1 || c.ibGidIndex > 255 || c.spinUs < -1 ||
      c.flightRecorder < 0)
    abort();
  // What the library then does with the times.
  weft::Deadline a(c.timeoutS), b(c.bootstrapTimeoutS), s(c.stallWarnS), t(c.statsIntervalS);
  (void)a.remainingMs();
  (void)b.remainingMs();
  (void)s.remainingMs();
  (void)t.remainingMs();
  (void)c.entries();
  return 0;
}
