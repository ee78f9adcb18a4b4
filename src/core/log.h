// Logging, filtered by level (WEFT_DEBUG=WARN|INFO|TRACE) and subsystem
// (WEFT_DEBUG_SUBSYS=INIT,BOOTSTRAP,TRANSPORT,COLL,TUNING,TELEMETRY or ALL;
// ^X excludes),
// written to stderr or WEFT_DEBUG_FILE (%h host, %p pid). Errors are logged
// once, where first detected; callers above only add context.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum Subsys : uint32_t {
  kInit = 1u << 0,
  kBootstrap = 1u << 1,
  kTransport = 1u << 2,
  kColl = 1u << 3,
  kTuning = 1u << 4,
  kTelemetry = 1u << 5,
  kAllSubsys = 0xffffffffu,
};

// The threshold level once WEFT_DEBUG was read (-1 before): messages above
// it are off, whatever their subsystem.
extern std::atomic<int> gLogThreshold;
bool logEnabledSlow(LogLevel level, uint32_t subsys);
// True when a message of this level and subsystem would be printed. Inline:
// every collective asks (its trace line), and the answer is almost always a
// level above the threshold.
inline bool logEnabled(LogLevel level, uint32_t subsys) {
  const int t = gLogThreshold.load(std::memory_order_relaxed);
  if (t >= 0 && static_cast<int>(level) > t) return false;
  return logEnabledSlow(level, subsys);
}
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt,
                ...) __attribute__((format(printf, 5, 6)));
// Re-reads the WEFT_DEBUG* variables (tests change them at run time).
void logReconfigure();

}  // namespace weft

#define WEFT_LOG(level, subsys, ...)                                          \
  do {                                                                        \
    if (::weft::logEnabled(level, subsys))                                    \
      ::weft::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)
#define WEFT_WARN(subsys, ...) WEFT_LOG(::weft::LogLevel::Warn, subsys, __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG(::weft::LogLevel::Info, subsys, __VA_ARGS__)
#define WEFT_TRACE(subsys, ...) WEFT_LOG(::weft::LogLevel::Trace, subsys, __VA_ARGS__)
