#include "telemetry/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "algo/schedule.h"
#include "core/clock.h"
#include "core/log.h"

namespace weft {
namespace telemetry {
namespace {

constexpr size_t kFlushBytes = 64 << 10;
constexpr uint64_t kFlushNs = 500000000ull;
constexpr char kTrailer[] = "\n]}\n";

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += strFormat("\\u%04x", c);
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace

Timeline::~Timeline() {
  flush();
  if (fd_ >= 0) close(fd_);
}

Status Timeline::open(const std::string& path, int rank, uint64_t commId, const std::string& host) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return Status(WEFT_ERR_SYSTEM,
                  strFormat("WEFT_TIMELINE: cannot create %s: %s", path.c_str(), strerror(errno)));
  pid_ = rank;
  tid_ = commId & 0xffffff;
  std::string head = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  buf_ = head;
  buf_ += strFormat(
      "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d (%s)\"}},"
      "\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},"
      "\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":\"comm "
      "%06llx\"}}",
      pid_, rank, jsonEscape(host).c_str(), pid_, rank, pid_,
      static_cast<unsigned long long>(tid_), static_cast<unsigned long long>(tid_));
  first_ = false;
  trailerOff_ = 0;
  flush();
  return Status();
}

void Timeline::event(const char* name, uint64_t beginNs, uint64_t endNs, const char* args) {
  // Microseconds with three decimals, printed as integers (an event costs
  // one snprintf without floating point).
  const uint64_t dur = endNs - beginNs;
  char line[256];
  int n = snprintf(line, sizeof line,
                   "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%llu,\"ts\":%llu.%03u,"
                   "\"dur\":%llu.%03u",
                   first_ ? "\n" : ",\n", name, pid_, static_cast<unsigned long long>(tid_),
                   static_cast<unsigned long long>(beginNs / 1000),
                   static_cast<unsigned>(beginNs % 1000), static_cast<unsigned long long>(dur / 1000),
                   static_cast<unsigned>(dur % 1000));
  first_ = false;
  buf_.append(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
  if (*args) {
    buf_ += ",\"args\":{";
    buf_ += args;
    buf_ += '}';
  }
  buf_ += '}';
}

void Timeline::add(const OpRecord& r, int64_t off, double busbw) {
  if (fd_ < 0) return;
  auto g = [off](uint64_t t) { return t + static_cast<uint64_t>(off); };
  const uint64_t entry = g(r.entryNs), end = g(r.endNs);
  const uint64_t arrival = std::min(std::max(g(r.arrivalNs), entry), end);
  std::string name = collName(static_cast<CollType>(r.type));
  char args[448];
  snprintf(args, sizeof args,
           "\"seq\":%llu,\"bytes\":%llu,\"count\":%llu,\"algorithm\":\"%s\",\"busbw_GBs\":%.3f,"
           "\"last_rank\":%d,\"wait_ns\":%llu,\"first_byte_ns\":%lld,\"reduce_ns\":%llu,"
           "\"copy_ns\":%llu,\"status\":%d,\"repro\":\"%s\",\"wire_format\":\"%s\"",
           static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.bytes),
           static_cast<unsigned long long>(r.count), r.algo, busbw, r.lastRank,
           static_cast<unsigned long long>(arrival - entry),
           r.firstByteNs ? static_cast<long long>(r.firstByteNs - r.entryNs) : -1LL,
           static_cast<unsigned long long>(r.reduceNs), static_cast<unsigned long long>(r.copyNs),
           r.status, reproName(static_cast<Repro>(r.repro)), wireName(static_cast<Wire>(r.wire)));
  if (r.seq) name += strFormat(" #%llu", static_cast<unsigned long long>(r.seq));
  event(name.c_str(), entry, end, args);
  if (arrival > entry) {
    char last[32];
    snprintf(last, sizeof last, "\"last_rank\":%d", r.lastRank);
    event("WAIT_FOR_PEERS", entry, arrival, last);
  }
  if (end > arrival) event("TRANSFER", arrival, end, "");
  for (int i = 0; i < r.nspans; ++i) {
    uint64_t b = std::max(g(r.spans[i].beginNs), arrival), e = std::min(g(r.spans[i].endNs), end);
    if (e > b) event(r.spans[i].kind == SpanKind::Reduce ? "REDUCE" : "COPY", b, e, "");
  }
  const uint64_t now = nowNs();
  if (buf_.size() >= kFlushBytes || now - lastFlushNs_ >= kFlushNs) flush();
}

void Timeline::flush() {
  if (fd_ < 0) return;
  lastFlushNs_ = nowNs();
  buf_ += kTrailer;
  // One write: the file goes from valid JSON to valid JSON.
  ssize_t w = pwrite(fd_, buf_.data(), buf_.size(), static_cast<off_t>(trailerOff_));
  if (w != static_cast<ssize_t>(buf_.size())) {
    WEFT_WARN(kTelemetry, "WEFT_TIMELINE: writing %s failed (%s); timeline stopped",
              path_.c_str(), w < 0 ? strerror(errno) : "short write");
    close(fd_);
    fd_ = -1;
    return;
  }
  trailerOff_ += buf_.size() - (sizeof(kTrailer) - 1);
  buf_.clear();
}

}  // namespace telemetry
}  // namespace weft
