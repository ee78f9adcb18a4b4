#include "core/config.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

extern char** environ;

namespace weft {
namespace {

constexpr double kMaxSeconds = 1e9;  // 31 years

double envDouble(const char* name, double def) {
  const char* v = getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  double d = strtod(v, &end);
  // NaN and inf too; the bound keeps every seconds-to-nanoseconds
  // conversion of a time read here (deadlines, telemetry) within 64 bits.
  if (*end || !(d > 0) || !(d <= kMaxSeconds)) {
    WEFT_WARN(kInit, "ignoring %s=%s: not a positive number of seconds up to %g", name, v,
              kMaxSeconds);
    return def;
  }
  return d;
}

long envLong(const char* name, long def, long lo, long hi) {
  const char* v = getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (*end || x < lo || x > hi) {
    WEFT_WARN(kInit, "ignoring %s=%s: not an integer in [%ld, %ld]", name, v, lo, hi);
    return def;
  }
  return x;
}

size_t envBytes(const char* name, size_t def) {
  const char* v = getenv(name);
  if (!v || !*v) return def;
  size_t b = 0;
  if (!parseBytes(v, &b)) {
    WEFT_WARN(kInit, "ignoring %s=%s: not a byte count", name, v);
    return def;
  }
  return b;
}

std::string envStr(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

}  // namespace

bool parseBytes(const std::string& s, size_t* out) {
  // Digits only: strtoull alone would take " 4", "+4" and "-1" (as
  // 2^64 - 1), stop at an embedded NUL, and saturate on overflow.
  size_t i = 0;
  size_t x = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const size_t d = static_cast<size_t>(s[i] - '0');
    if (x > (SIZE_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  if (i == 0) return false;
  int shift = 0;
  if (i < s.size()) {
    switch (s[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    ++i;
    if (i < s.size() && (s[i] == 'B' || s[i] == 'b')) ++i;
    if (i != s.size()) return false;
  }
  if (x > (SIZE_MAX >> shift)) return false;  // the unit would overflow
  *out = x << shift;
  return true;
}

Config Config::fromEnv() {
  Config c;
  c.timeoutS = envDouble("WEFT_TIMEOUT_S", c.timeoutS);
  c.bootstrapTimeoutS = envDouble("WEFT_BOOTSTRAP_TIMEOUT_S", c.bootstrapTimeoutS);
  c.shrinkTimeoutS = envDouble("WEFT_SHRINK_TIMEOUT_S", c.shrinkTimeoutS);
  c.transports = envStr("WEFT_TRANSPORTS");
  c.socketIfname = envStr("WEFT_SOCKET_IFNAME");
  c.nsocksPerPeer = static_cast<int>(envLong("WEFT_NSOCKS_PER_PEER", c.nsocksPerPeer, 1, 16));
  c.socketBufBytes = envBytes("WEFT_SOCKET_BUF_BYTES", c.socketBufBytes);
  if (c.socketBufBytes > (1u << 30)) c.socketBufBytes = 1u << 30;
  c.chunkBytes = envBytes("WEFT_CHUNK_BYTES", c.chunkBytes);
  c.shmSlotBytes = envBytes("WEFT_SHM_SLOT_BYTES", c.shmSlotBytes);
  if (c.shmSlotBytes < 4096) c.shmSlotBytes = 4096;
  c.shmSlots = static_cast<int>(envLong("WEFT_SHM_SLOTS", c.shmSlots, 2, 1024));
  c.algo = envStr("WEFT_ALGO");
  c.repro = envStr("WEFT_REPRO");
  c.fusionThreshold = envBytes("WEFT_FUSION_THRESHOLD", c.fusionThreshold);
  c.wire = envStr("WEFT_WIRE");
  c.shmArenaChunk = envBytes("WEFT_SHM_ARENA_CHUNK", c.shmArenaChunk);
  if (c.shmArenaChunk && c.shmArenaChunk < 4096) c.shmArenaChunk = 4096;
  c.spinUs = envLong("WEFT_SPIN_US", c.spinUs, -1, 1000000);
  c.shmDirectMin = envBytes("WEFT_SHM_DIRECT_MIN", c.shmDirectMin);
  c.shmDirectMinSet = getenv("WEFT_SHM_DIRECT_MIN") != nullptr;
  c.telemetry = envLong("WEFT_TELEMETRY", 1, 0, 1) != 0;
  c.timelinePath = envStr("WEFT_TIMELINE");
  c.statsPath = envStr("WEFT_STATS");
  c.statsIntervalS = envDouble("WEFT_STATS_INTERVAL_S", 0);
  c.stallWarnS = envDouble("WEFT_STALL_WARN_S", c.stallWarnS);
  c.flightRecorder = static_cast<int>(envLong("WEFT_FLIGHT_RECORDER", 0, 0, 1 << 20));
  c.flightRecorderPath = envStr("WEFT_FLIGHT_RECORDER_FILE");
#ifdef WEFT_TEST_HOOKS
  c.testThrottleMBps = envDouble("WEFT_TEST_THROTTLE_MBPS", 0);
  c.testAsyncLocalUs = envLong("WEFT_TEST_ASYNC_LOCAL_US", -1, -1, 1000000);
  c.testFaults = envStr("WEFT_TEST_FAULTS");
  c.testFaultSeed = static_cast<uint64_t>(envLong("WEFT_TEST_FAULT_SEED", 1, 0, LONG_MAX));
  // Local steps exist only in schedules: the arena (which has none) is off.
  if (c.testAsyncLocalUs >= 0) c.shmArenaChunk = 0;
#endif
  c.cudaLocalWork = envStr("WEFT_CUDA_LOCAL_WORK");
  c.cudaIpc = envStr("WEFT_CUDA_IPC");
  c.topoFile = envStr("WEFT_TOPO_FILE");
  c.topoDumpFile = envStr("WEFT_TOPO_DUMP_FILE");
  c.ibHca = envStr("WEFT_IB_HCA");
  c.ibGidIndex = static_cast<int>(envLong("WEFT_IB_GID_INDEX", c.ibGidIndex, -1, 255));
  c.ibQpsPerPeer = static_cast<int>(envLong("WEFT_IB_QPS_PER_PEER", c.ibQpsPerPeer, 1, 16));
  c.netGdr = envStr("WEFT_NET_GDR");
  c.ucxFastRndv = envLong("WEFT_UCX_FAST_RNDV", 0, 0, 1) != 0;
  return c;
}

std::vector<std::pair<std::string, std::string>> Config::entries() const {
  auto num = [](double v) {
    char b[32];
    snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  auto n = [](long long v) { return std::to_string(v); };
  return {{"WEFT_TIMEOUT_S", num(timeoutS)},
          {"WEFT_BOOTSTRAP_TIMEOUT_S", num(bootstrapTimeoutS)},
          {"WEFT_SHRINK_TIMEOUT_S", num(shrinkTimeoutS)},
          {"WEFT_TRANSPORTS", transports},
          {"WEFT_SOCKET_IFNAME", socketIfname},
          {"WEFT_NSOCKS_PER_PEER", n(nsocksPerPeer)},
          {"WEFT_SOCKET_BUF_BYTES", n(static_cast<long long>(socketBufBytes))},
          {"WEFT_CHUNK_BYTES", n(static_cast<long long>(chunkBytes))},
          {"WEFT_SHM_SLOT_BYTES", n(static_cast<long long>(shmSlotBytes))},
          {"WEFT_SHM_SLOTS", n(shmSlots)},
          {"WEFT_ALGO", algo},
          {"WEFT_REPRO", repro},
          {"WEFT_FUSION_THRESHOLD", n(static_cast<long long>(fusionThreshold))},
          {"WEFT_WIRE", wire},
          {"WEFT_SHM_ARENA_CHUNK", n(static_cast<long long>(shmArenaChunk))},
          {"WEFT_SHM_DIRECT_MIN", n(static_cast<long long>(shmDirectMin))},
          {"WEFT_SPIN_US", n(spinUs)},
          {"WEFT_IB_HCA", ibHca},
          {"WEFT_IB_GID_INDEX", n(ibGidIndex)},
          {"WEFT_IB_QPS_PER_PEER", n(ibQpsPerPeer)},
          {"WEFT_NET_GDR", netGdr},
          {"WEFT_UCX_FAST_RNDV", n(ucxFastRndv)},
          {"WEFT_CUDA_LOCAL_WORK", cudaLocalWork},
          {"WEFT_CUDA_IPC", cudaIpc},
          {"WEFT_TOPO_FILE", topoFile},
          {"WEFT_TOPO_DUMP_FILE", topoDumpFile},
          {"WEFT_TELEMETRY", n(telemetry)},
          {"WEFT_TIMELINE", timelinePath},
          {"WEFT_STATS", statsPath},
          {"WEFT_STATS_INTERVAL_S", num(statsIntervalS)},
          {"WEFT_STALL_WARN_S", num(stallWarnS)},
          {"WEFT_FLIGHT_RECORDER", n(flightRecorder)},
          {"WEFT_FLIGHT_RECORDER_FILE", flightRecorderPath}};
}

std::vector<std::string> Config::variablesInEffect() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, "WEFT_", 5) == 0) out.emplace_back(*e);
  return out;
}

}  // namespace weft
