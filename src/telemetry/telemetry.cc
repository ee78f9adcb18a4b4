#include "telemetry/telemetry.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "algo/schedule.h"
#include "core/clock.h"
#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "telemetry/board.h"
#include "telemetry/timeline.h"

namespace weft {
namespace telemetry {
namespace {

constexpr size_t kMinRing = 64;

std::string describeRecord(const OpRecord& r) {
  CollArgs a;
  a.type = static_cast<CollType>(r.type);
  a.count = r.count;
  a.op = static_cast<weft_op_t>(r.op);
  a.root = r.root;
  a.peer = r.root;
  return describeOp(a, static_cast<weft_datatype_t>(r.dtype), r.seq);
}

}  // namespace

const char* sizeClassName(int c) {
  static const char* names[kSizeClasses] = {"<=4K", "4K-64K", "64K-1M", "1M-16M", ">16M"};
  return c >= 0 && c < kSizeClasses ? names[c] : "?";
}

int sizeClassOf(uint64_t b) {
  if (b <= (4u << 10)) return 0;
  if (b <= (64u << 10)) return 1;
  if (b <= (1u << 20)) return 2;
  if (b <= (16u << 20)) return 3;
  return 4;
}

double busFactor(uint8_t type, int n) {
  if (n <= 1) return 1.0;
  const double dn = n;
  switch (static_cast<CollType>(type)) {
    case CollType::AllReduce:
      return 2.0 * (dn - 1) / dn;
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AllToAll:
      return (dn - 1) / dn;
    default:
      return 1.0;
  }
}

int64_t realtimeMinusMonotonicNs() {
  timespec rt, mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &rt);
  return (static_cast<int64_t>(rt.tv_sec) - mono.tv_sec) * 1000000000ll +
         (rt.tv_nsec - mono.tv_nsec);
}

std::string expandRankPath(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'r') {
      out += std::to_string(rank);
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(getpid());
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

namespace {

// Stats paths in use by this process's communicators: a second one of the
// same rank (a framework's second group) must not overwrite the first's file.
std::mutex gStatsMu;
std::set<std::string> gStatsPaths;

// `path` if no other communicator of this process writes it, else the path
// with ".comm<id>" before its extension (weft-report reports each comm).
std::string claimStatsPath(const std::string& path, uint64_t commId) {
  std::lock_guard<std::mutex> lk(gStatsMu);
  std::string p = path;
  if (gStatsPaths.count(p)) {
    const size_t slash = p.rfind('/'), dot = p.rfind('.');
    const size_t at = dot != std::string::npos && (slash == std::string::npos || dot > slash)
                          ? dot
                          : p.size();
    p.insert(at, strFormat(".comm%06llx", static_cast<unsigned long long>(commId & 0xffffff)));
  }
  gStatsPaths.insert(p);
  return p;
}

void releaseStatsPath(const std::string& path) {
  std::lock_guard<std::mutex> lk(gStatsMu);
  gStatsPaths.erase(path);
}

}  // namespace

Telemetry::Telemetry(const Setup& s)
    : s_(s),
      on_(s.config.telemetry),
      nTx_(static_cast<int>(std::min<size_t>(s.transports.size(), kMaxTransports))),
      agg_(kCollTypes * kSizeClasses),
      waitedForNs_(s.nranks, 0),
      waitedForOps_(s.nranks, 0),
      ring_(std::max<size_t>(kMinRing, static_cast<size_t>(s.config.flightRecorder))) {
  if (!on_) return;
  if (!s_.config.statsPath.empty())
    statsPath_ = claimStatsPath(expandRankPath(s_.config.statsPath, s_.rank), s_.commId);
  if (!s_.config.timelinePath.empty()) {
    timeline_.reset(new Timeline());
    Status st = timeline_->open(s_.config.timelinePath, s_.rank, s_.nranks, s_.commId,
                                s_.hostnames.empty() ? "" : s_.hostnames[s_.rank]);
    if (st.isError()) {
      WEFT_WARN(kTelemetry, "%s", st.message().c_str());
      timeline_.reset();
    }
  }
  if (s_.config.statsIntervalS > 0)
    nextStatsNs_ = nowNs() + static_cast<uint64_t>(s_.config.statsIntervalS * 1e9);
}

Telemetry::~Telemetry() {
  if (!on_) return;
  if (!s_.config.statsPath.empty()) {
    Status st = writeStats();
    if (st.isError()) WEFT_WARN(kTelemetry, "%s", st.message().c_str());
    releaseStatsPath(statsPath_);
  }
}

Status Telemetry::openBoard() {
  if (!on_) return Status();
  int leader = s_.rank, local = 0;
  for (int r = 0; r < s_.nranks; ++r) {
    if (s_.hostHashes[r] != s_.hostHashes[s_.rank]) continue;
    leader = std::min(leader, r);
    ++local;
  }
  if (local < 2) return Status();  // nobody here to see it
  board_.reset(new Board());
  std::string name = strFormat(
      "/weft-board-%016llx-%d",
      static_cast<unsigned long long>(s_.boardTag), leader);
  Status st = board_->map(name, s_.nranks, leader == s_.rank, s_.config.bootstrapTimeoutS);
  if (st.isError()) {
    WEFT_WARN(kTelemetry, "stall reports will not see this host's other ranks: %s",
              st.message().c_str());
    board_.reset();
    return Status();
  }
  board_->line(s_.rank).pid = getpid();
  return Status();
}

void Telemetry::unlinkBoard() {
  if (board_) board_->unlink();
}

void Telemetry::end(OpRecord& r, int status, uint64_t now) {
  r.endNs = now;
  r.status = status;
  if (hasStamp(r.stamp)) {
    r.lastRank = stampRank(r.stamp);
    r.arrivalNs = toLocal(stampNs(r.stamp, toGlobal(r.entryNs)));
    // Clocks of other hosts are aligned only so well: never before entry.
    if (r.arrivalNs < r.entryNs || r.lastRank == s_.rank) r.arrivalNs = r.entryNs;
    if (r.arrivalNs > now) r.arrivalNs = now;
  } else {
    r.arrivalNs = r.entryNs;
  }
  lastEndNs_ = now;
  if (board_ && r.seq) {
    BoardLine& l = board_->line(s_.rank);
    l.endNs = now;
    l.doneSeq.store(r.seq, std::memory_order_release);
  }
  // The record without its unused spans (most ops have none): a whole
  // record is some 350 bytes, a good part of a small collective's budget.
  OpRecord& slot = ring_[ringNext_];
  if (&slot != &r) {  // not opened in place (openInRing)
    memcpy(static_cast<void*>(&slot), &r, offsetof(OpRecord, spans));
    for (uint8_t i = 0; i < r.nspans; ++i) slot.spans[i] = r.spans[i];
  }
  if (++ringNext_ == ring_.size()) ringNext_ = 0;
  ringCount_ = std::min(ringCount_ + 1, ring_.size());
  account(r);
  if (timeline_) {
    const uint64_t t = r.endNs - r.arrivalNs;
    const double bus = t ? static_cast<double>(r.bytes) * busFactor(r.type, s_.nranks) / t : 0;
    timeline_->add(r, s_.clockOffsetNs, bus);
  }
  if (nextStatsNs_ && now >= nextStatsNs_) {
    nextStatsNs_ = now + static_cast<uint64_t>(s_.config.statsIntervalS * 1e9);
    Status st = writeStats();
    if (st.isError()) WEFT_WARN(kTelemetry, "%s", st.message().c_str());
  }
}

void Telemetry::account(const OpRecord& r) {
  if (r.status != 0) {
    ++opsFailed_;
    return;
  }
  ++opsDone_;
  if (r.fusedCalls) {
    ++fusedOps_;
    fusedCalls_ += r.fusedCalls;
  }
  gapNs_ += r.gapNs;
  const uint64_t wait = r.arrivalNs - r.entryNs;
  waitNs_ += wait;
  busyNs_ += r.endNs - r.entryNs;
  if (wait && r.lastRank >= 0 && r.lastRank < s_.nranks) {
    waitedForNs_[r.lastRank] += wait;
    waitedForOps_[r.lastRank]++;
  }
  if (r.type >= kCollTypes) return;
  Agg& a = agg_[r.type * kSizeClasses + sizeClassOf(r.bytes)];
  a.ops++;
  a.bytes += r.bytes;
  a.timeNs += r.endNs - r.entryNs;
  a.waitNs += wait;
  a.reduceNs += r.reduceNs;
  a.copyNs += r.copyNs;
  for (int t = 0; t < nTx_; ++t) a.sent[t] += r.sent[t];
}

std::vector<OpRecord> Telemetry::recent(size_t n) const {
  std::vector<OpRecord> out;
  n = std::min(n, ringCount_);
  for (size_t i = 0; i < n; ++i)
    out.push_back(ring_[(ringNext_ + ring_.size() - n + i) % ring_.size()]);
  return out;
}

std::string Telemetry::whoIsMissing(uint64_t seq, uint64_t now) const {
  std::string out;
  for (int r = 0; r < s_.nranks; ++r) {
    if (r == s_.rank) continue;
    const bool local = s_.hostHashes[r] == s_.hostHashes[s_.rank];
    if (!local || !board_) {
      if (!out.empty()) out += "; ";
      out += strFormat("rank %d (%s): on another host, not visible from here", r,
                       s_.hostnames[r].c_str());
      continue;
    }
    const BoardLine& l = board_->line(r);
    const uint64_t entered = l.enteredSeq.load(std::memory_order_acquire);
    if (entered >= seq) continue;
    OpRecord last;
    last.seq = entered;
    last.type = l.type;
    last.dtype = l.dtype;
    last.op = l.op;
    last.count = l.count;
    const uint64_t done = l.doneSeq.load(std::memory_order_acquire);
    if (!out.empty()) out += "; ";
    if (!entered) {
      out += strFormat("rank %d (pid %d) has not entered any collective yet", r, s_.pids[r]);
    } else if (done >= entered) {
      out +=
          strFormat("rank %d (pid %d) has not entered it: its last call, %s, finished %.1f s ago",
                    r, s_.pids[r], describeRecord(last).c_str(),
                    now > l.endNs ? static_cast<double>(now - l.endNs) * 1e-9 : 0.0);
    } else {
      out += strFormat("rank %d (pid %d) has not entered it: it is still in %s, entered %.1f s ago",
                       r, s_.pids[r], describeRecord(last).c_str(),
                       now > l.entryNs ? static_cast<double>(now - l.entryNs) * 1e-9 : 0.0);
    }
  }
  return out;
}

void Telemetry::checkStall(const OpRecord& r, const std::vector<int>& waiting, uint64_t now) {
  if (!on_ || !r.entryNs || now - r.entryNs < static_cast<uint64_t>(s_.config.stallWarnS * 1e9))
    return;
  const uint64_t key = r.seq ? r.seq : r.entryNs;
  if (stallWarnedSeq_ == key) return;
  stallWarnedSeq_ = key;
  std::string w;
  for (int p : waiting) w += strFormat("%s%d", w.empty() ? "" : ", ", p);
  std::string missing = r.seq ? whoIsMissing(r.seq, now) : std::string();
  WEFT_WARN(kTelemetry,
            "rank %d: %s pending for %.0f s (WEFT_STALL_WARN_S); waiting for rank(s) %s; %s",
            s_.rank, describeRecord(r).c_str(), static_cast<double>(now - r.entryNs) * 1e-9,
            w.empty() ? "?" : w.c_str(),
            missing.empty() ? "every rank of this host has entered it" : missing.c_str());
}

void Telemetry::dumpFlightRecorder(const std::string& why) {
  if (!on_ || s_.config.flightRecorder <= 0 || flightDumped_) return;
  flightDumped_ = true;
  std::vector<OpRecord> ops = recent(static_cast<size_t>(s_.config.flightRecorder));
  std::string text = strFormat("rank %d flight recorder (%s): last %zu ops, oldest first\n",
                               s_.rank, why.c_str(), ops.size());
  for (const OpRecord& r : ops)
    text += strFormat(
        "  %s algo %s entry %+.6f s wait %.1f us (last rank %d) first byte %s time %.1f us "
        "status %d\n",
        describeRecord(r).c_str(), r.algo,
        static_cast<double>(static_cast<int64_t>(r.entryNs - firstEntryNs_)) * 1e-9,
        static_cast<double>(r.arrivalNs - r.entryNs) * 1e-3, r.lastRank,
        r.firstByteNs
            ? strFormat("%.1f us", static_cast<double>(r.firstByteNs - r.entryNs) * 1e-3).c_str()
            : "none",
        static_cast<double>(r.endNs - r.entryNs) * 1e-3, r.status);
  if (s_.config.flightRecorderPath.empty()) {
    WEFT_WARN(kTelemetry, "%s", text.c_str());
    return;
  }
  std::string path = expandRankPath(s_.config.flightRecorderPath, s_.rank);
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    WEFT_WARN(kTelemetry, "WEFT_FLIGHT_RECORDER_FILE %s: cannot write; %s", path.c_str(),
              text.c_str());
    return;
  }
  fputs(text.c_str(), f);
  fclose(f);
}

void Telemetry::span(const std::string& track, const std::string& name, uint64_t beginNs,
                     uint64_t endNs,
                     const std::vector<std::pair<std::string, std::string>>& args) {
  if (timeline_) timeline_->span(track, name, toGlobal(beginNs), toGlobal(endNs), args);
}

}  // namespace telemetry
}  // namespace weft
