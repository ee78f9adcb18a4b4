#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/clock.h"

namespace weft {
namespace {

struct LogState {
  std::once_flag once;
  std::atomic<bool> ready{false};  // once has run
  std::atomic<int> level{0};
  std::atomic<uint32_t> subsys{kAllSubsys};
  FILE* out = stderr;
  std::mutex mu;
  char host[64] = "?";
};

LogState& state() {
  static LogState s;
  return s;
}

uint32_t parseSubsys(const char* v) {
  if (!v || !*v) return kAllSubsys;
  bool exclude = v[0] == '^';
  if (exclude) ++v;
  uint32_t mask = 0;
  std::string s(v);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (auto& c : tok) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    if (tok == "INIT") mask |= kInit;
    else if (tok == "BOOTSTRAP") mask |= kBootstrap;
    else if (tok == "TRANSPORT" || tok == "NET") mask |= kTransport;
    else if (tok == "COLL") mask |= kColl;
    else if (tok == "TUNING") mask |= kTuning;
    else if (tok == "TELEMETRY") mask |= kTelemetry;
    else if (tok == "ALL") mask |= kAllSubsys;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

std::string expandPath(const char* pattern, const char* host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

void configure(LogState& s) {
  gethostname(s.host, sizeof s.host - 1);
  const char* lv = getenv("WEFT_DEBUG");
  int level = 0;
  if (lv) {
    if (!strcasecmp(lv, "WARN")) level = 1;
    else if (!strcasecmp(lv, "INFO")) level = 2;
    else if (!strcasecmp(lv, "TRACE")) level = 3;
  }
  s.subsys = parseSubsys(getenv("WEFT_DEBUG_SUBSYS"));
  const char* file = getenv("WEFT_DEBUG_FILE");
  if (file && *file) {
    std::string path = expandPath(file, s.host);
    FILE* f = fopen(path.c_str(), "a");
    if (f) {
      setvbuf(f, nullptr, _IOLBF, 0);
      if (s.out != stderr) fclose(s.out);
      s.out = f;
    }
  }
  s.level = level;
  gLogThreshold.store(level == 0 ? 1 : level, std::memory_order_relaxed);
}

}  // namespace

std::atomic<int> gLogThreshold{-1};

void logReconfigure() {
  LogState& s = state();
  std::call_once(s.once, [] {});
  std::lock_guard<std::mutex> lk(s.mu);
  configure(s);
}

bool logEnabledSlow(LogLevel level, uint32_t subsys) {
  LogState& s = state();
  // std::call_once costs a hundred instructions even once done, and every
  // collective asks here (its trace line): a flag first.
  if (!s.ready.load(std::memory_order_acquire)) {
    std::call_once(s.once, [&s] { configure(s); });
    s.ready.store(true, std::memory_order_release);
  }
  // Warnings always print unless WEFT_DEBUG is set to something quieter? No:
  // WARN is the default threshold so that real problems reach the user.
  int threshold = s.level.load(std::memory_order_relaxed);
  if (threshold == 0) threshold = 1;
  return static_cast<int>(level) <= threshold &&
         (level == LogLevel::Warn || (s.subsys.load(std::memory_order_relaxed) & subsys));
}

void logMessage(LogLevel level, uint32_t, const char* file, int line, const char* fmt, ...) {
  LogState& s = state();
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lk(s.mu);
  fprintf(s.out, "%s:%d [%.6f] weft %s %s (%s:%d)\n", s.host, getpid(), nowSeconds(),
          names[static_cast<int>(level)], msg, base, line);
  fflush(s.out);
}

}  // namespace weft
