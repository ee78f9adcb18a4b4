#include "telemetry/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "algo/schedule.h"
#include "core/clock.h"
#include "core/log.h"
#include "telemetry/telemetry.h"

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

class TimelineFile {
 public:
  ~TimelineFile() {
    if (fd_ >= 0) close(fd_);
  }
  // Creates (truncates) `path` with the header and the process row's name.
  Status create(const std::string& path, int pid, const std::string& processName) {
    path_ = path;
    pid_ = pid;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      return Status(WEFT_ERR_SYSTEM,
                    strFormat("WEFT_TIMELINE: cannot create %s: %s", path.c_str(), strerror(errno)));
    write(strFormat(
        "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["
        "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}},"
        "\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
        pid, jsonEscape(processName).c_str(), pid, pid));
    return Status();
  }
  int pid() const { return pid_; }
  // Appends events (each starting with ",\n": the header holds the first).
  void write(const std::string& events) {
    std::lock_guard<std::mutex> lk(mu_);
    if (fd_ < 0 || events.empty()) return;
    std::string out = events + kTrailer;
    // One write: the file goes from valid JSON to valid JSON.
    ssize_t w = pwrite(fd_, out.data(), out.size(), static_cast<off_t>(trailerOff_));
    if (w != static_cast<ssize_t>(out.size())) {
      WEFT_WARN(kTelemetry, "WEFT_TIMELINE: writing %s failed (%s); timeline stopped",
                path_.c_str(), w < 0 ? strerror(errno) : "short write");
      close(fd_);
      fd_ = -1;
      return;
    }
    trailerOff_ += events.size();
  }
  // A thread id for a new track of this file.
  uint64_t nextTid() {
    std::lock_guard<std::mutex> lk(mu_);
    return ++lastTid_;
  }

 private:
  std::mutex mu_;
  int fd_ = -1;
  int pid_ = 0;
  uint64_t trailerOff_ = 0;  // where the closing "]}" starts
  uint64_t lastTid_ = 0;
  std::string path_;
};

namespace {

// The files of this process, by path.
std::mutex gFilesMu;
std::map<std::string, std::weak_ptr<TimelineFile>> gFiles;

}  // namespace

Timeline::~Timeline() { flush(); }

Status Timeline::open(const std::string& pattern, int rank, int nranks, uint64_t commId,
                      const std::string& host) {
  const std::string path = expandRankPath(pattern, rank);
  {
    std::lock_guard<std::mutex> lk(gFilesMu);
    file_ = gFiles[path].lock();
    if (!file_) {
      auto f = std::make_shared<TimelineFile>();
      WEFT_RETURN_IF_ERROR(f->create(path, rank, strFormat("rank %d (%s)", rank, host.c_str())));
      gFiles[path] = f;
      file_ = f;
    }
  }
  pid_ = file_->pid();
  tid_ = file_->nextTid();
  buf_ = strFormat(
      ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":"
      "\"comm %06llx (rank %d of %d)\"}}",
      pid_, static_cast<unsigned long long>(tid_),
      static_cast<unsigned long long>(commId & 0xffffff), rank, nranks);
  flush();
  return Status();
}

void Timeline::eventOn(uint64_t tid, const char* name, uint64_t beginNs, uint64_t endNs,
                       const char* args) {
  // Microseconds with three decimals, printed as integers (an event costs
  // one snprintf without floating point).
  const uint64_t dur = endNs - beginNs;
  char line[256];
  int n = snprintf(line, sizeof line,
                   ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%llu,\"ts\":%llu.%03u,"
                   "\"dur\":%llu.%03u",
                   name, pid_, static_cast<unsigned long long>(tid),
                   static_cast<unsigned long long>(beginNs / 1000),
                   static_cast<unsigned>(beginNs % 1000), static_cast<unsigned long long>(dur / 1000),
                   static_cast<unsigned>(dur % 1000));
  buf_.append(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
  if (*args) {
    buf_ += ",\"args\":{";
    buf_ += args;
    buf_ += '}';
  }
  buf_ += '}';
}

void Timeline::add(const OpRecord& r, int64_t off, double busbw) {
  if (!file_) return;
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
  if (r.fusedCalls) {
    // A fused allreduce (tensor fusion): says so in its name and args.
    const size_t at = strlen(args);
    snprintf(args + at, sizeof args - at, ",\"fused_calls\":%u", r.fusedCalls);
    name += strFormat(" (%u fused)", r.fusedCalls);
  }
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
  maybeFlush();
}

void Timeline::maybeFlush() {
  const uint64_t now = nowNs();
  if (buf_.size() >= kFlushBytes || now - lastFlushNs_ >= kFlushNs) flush();
}

void Timeline::span(const std::string& track, const std::string& name, uint64_t beginNs,
                    uint64_t endNs, const std::vector<std::pair<std::string, std::string>>& args) {
  if (!file_) return;
  auto it = tracks_.find(track);
  if (it == tracks_.end()) {
    // A thread of its own, named once.
    it = tracks_.emplace(track, file_->nextTid()).first;
    buf_ += strFormat(
        ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":\"%s\"}}",
        pid_, static_cast<unsigned long long>(it->second), jsonEscape(track).c_str());
  }
  std::string a;
  for (const auto& kv : args) {
    if (!a.empty()) a += ',';
    a += '"' + jsonEscape(kv.first) + "\":";
    char* end = nullptr;
    const double v = strtod(kv.second.c_str(), &end);
    const bool number = !kv.second.empty() && end && *end == '\0' && std::isfinite(v) &&
                        kv.second.find_first_of("xXnNiI") == std::string::npos;
    a += number ? kv.second : '"' + jsonEscape(kv.second) + '"';
  }
  // eventOn formats into a fixed line: a name of up to 60 bytes, escaped,
  // always fits it (the track's name, in the metadata, has no limit).
  eventOn(it->second, jsonEscape(name.substr(0, 60)).c_str(), beginNs, std::max(beginNs, endNs),
          a.c_str());
  maybeFlush();
}

void Timeline::flush() {
  lastFlushNs_ = nowNs();
  if (!file_ || buf_.empty()) return;
  file_->write(buf_);
  buf_.clear();
}

}  // namespace telemetry
}  // namespace weft
