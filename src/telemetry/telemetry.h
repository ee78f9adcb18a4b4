// Telemetry of one communicator: always on, a few clock reads and adds per
// op. Every finished op (record.h) goes to
//   * the aggregates: per collective and size class, time split into waiting
//     for peers (arrival skew), transfer and local work; the time each rank
//     made this one wait; the gaps between ops (compute or input time);
//     written as JSON to WEFT_STATS at destroy (and every
//     WEFT_STATS_INTERVAL_S), which weft-report reads;
//   * the flight recorder: the last ops, dumped on timeout or abort
//     (WEFT_FLIGHT_RECORDER);
//   * the timeline (WEFT_TIMELINE), when on;
//   * the board (board.h), where ranks of this host see what the others do:
//     stall reports name the ranks that have not entered an op.
//
// Threads: called by whoever drives the comm's engine, under the comm's lock.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "telemetry/board.h"
#include "telemetry/record.h"
#include "telemetry/stamp.h"

namespace weft {
namespace telemetry {

class Timeline;

struct Setup {
  int rank = 0, nranks = 1;
  uint64_t commId = 0;
  // Names this communicator's board on each host (derived from its key:
  // reveals nothing of the job secret).
  uint64_t boardTag = 0;
  // Added to this rank's monotonic clock, gives the communicator's common
  // clock (clock.h).
  int64_t clockOffsetNs = 0;
  std::vector<std::string> hostnames;  // by rank
  std::vector<uint64_t> hostHashes;    // by rank
  std::vector<int> pids;               // by rank
  // The communicator's transports (index = the one records use), their
  // bandwidth (GB/s, one direction) and the number of peers each serves.
  std::vector<std::string> transports;
  std::vector<double> transportGBs;
  std::vector<int> transportPeers;
  Config config;
  const char* repro = "off";  // the comm's WEFT_REPRO mode (reproName)
  const char* wire = "none";  // the comm's WEFT_WIRE format (wireName)
};

// Collective types the aggregates keep apart (CollType values below this).
constexpr int kCollTypes = 16;
// Size classes of the aggregates, by the op's nccl-tests size.
constexpr int kSizeClasses = 5;
const char* sizeClassName(int c);  // "<=4K", "4K-64K", "64K-1M", "1M-16M", ">16M"
int sizeClassOf(uint64_t bytes);
// nccl-tests' bus bandwidth factor of a collective on n ranks.
double busFactor(uint8_t type, int nranks);

class Telemetry {
 public:
  explicit Telemetry(const Setup& s);
  ~Telemetry();

  bool on() const { return on_; }
  bool wantSpans() const { return timeline_ != nullptr; }
  // A framework's span on the timeline (Timeline::span), times on this
  // rank's monotonic clock; nothing when the timeline is off.
  void span(const std::string& track, const std::string& name, uint64_t beginNs, uint64_t endNs,
            const std::vector<std::pair<std::string, std::string>>& args);
  int rank() const { return s_.rank; }
  uint64_t toGlobal(uint64_t localNs) const {
    return localNs + static_cast<uint64_t>(s_.clockOffsetNs);
  }
  uint64_t toLocal(uint64_t globalNs) const {
    return globalNs - static_cast<uint64_t>(s_.clockOffsetNs);
  }

  // Opens the board (collective among the ranks of this host: call it on
  // every rank before the init barrier) and, after the barrier, lets go of
  // its name (unlinkBoard).
  Status openBoard();
  void unlinkBoard();

  // An op starts: fills entryNs (now), gapNs, and this rank's stamp.
  // Inline: every op calls it.
  void begin(OpRecord& r, uint64_t now) {
    r.entryNs = now;
    r.stamp = makeStamp(toGlobal(now), s_.rank);
    r.gapNs = lastEndNs_ && now > lastEndNs_ ? now - lastEndNs_ : 0;
    if (!firstEntryNs_) firstEntryNs_ = now;
    if (board_ && r.seq) {
      BoardLine& l = board_->line(s_.rank);
      l.entryNs = now;
      l.count = r.count;
      l.type = r.type;
      l.dtype = r.dtype;
      l.op = r.op;
      l.enteredSeq.store(r.seq, std::memory_order_release);
    }
  }
  // It ended with `st`: resolves the arrival from the stamp, files it.
  void end(OpRecord& r, int status, uint64_t nowNs);
  // The next slot of the flight recorder's ring, holding a copy of `shape`
  // (the fields that say what the op is), for an op that ends before the
  // next one opens (a blocking arena op): end() then files it where it is
  // instead of copying it there. recent() does not see it until then.
  OpRecord& openInRing(const OpRecord& shape) {
    // The slot's old record goes now rather than at end(), so that recent()
    // never shows the op half written.
    if (ringCount_ == ring_.size()) --ringCount_;
    OpRecord& slot = ring_[ringNext_];
    memcpy(static_cast<void*>(&slot), &shape, offsetof(OpRecord, spans));
    return slot;
  }

  // Called while `r` has been pending for a while (the engine's and the
  // arena's waits call it about once a second): after WEFT_STALL_WARN_S,
  // logs once which ranks have not entered the op and what they last did.
  // `waitingFor`: the ranks this rank waits on right now.
  void checkStall(const OpRecord& r, const std::vector<int>& waitingFor, uint64_t nowNs);
  // On timeout or abort: the last WEFT_FLIGHT_RECORDER ops, to the log or
  // WEFT_FLIGHT_RECORDER_FILE. Once per communicator.
  void dumpFlightRecorder(const std::string& why);
  // Writes WEFT_STATS now (also done at destroy).
  Status writeStats();
  // The last `n` ops, oldest first (tests, stall reports).
  std::vector<OpRecord> recent(size_t n) const;

  // The ranks of this host that have not entered collective `seq`, each
  // with a line on what it last did ("rank 3 (pid 42): last entered
  // allreduce #11 (...), finished 61 s ago"); ranks of other hosts are
  // listed as not visible from here.
  std::string whoIsMissing(uint64_t seq, uint64_t nowNs) const;

 private:
  struct Agg {
    uint64_t ops = 0, bytes = 0;  // bus bytes: bytes * busFactor (stats time)
    uint64_t timeNs = 0, waitNs = 0, reduceNs = 0, copyNs = 0;
    uint64_t sent[kMaxTransports] = {};
  };
  void account(const OpRecord& r);
  std::string statsJson() const;

  Setup s_;
  bool on_ = true;
  int nTx_ = 0;  // transports with a name (of kMaxTransports)
  uint64_t lastEndNs_ = 0;
  uint64_t firstEntryNs_ = 0;
  uint64_t opsDone_ = 0, opsFailed_ = 0, gapNs_ = 0, waitNs_ = 0, busyNs_ = 0;
  uint64_t fusedOps_ = 0, fusedCalls_ = 0;  // tensor fusion: fused ops, the calls they carried
  std::vector<Agg> agg_;               // [type * kSizeClasses + class]
  std::vector<uint64_t> waitedForNs_;  // by the rank this one waited for
  std::vector<uint64_t> waitedForOps_;
  std::vector<OpRecord> ring_;
  size_t ringNext_ = 0, ringCount_ = 0;
  std::unique_ptr<Timeline> timeline_;
  std::string statsPath_;  // WEFT_STATS for this comm (claimStatsPath: one per comm of a process)
  std::unique_ptr<Board> board_;
  uint64_t nextStatsNs_ = 0;
  uint64_t stallWarnedSeq_ = ~0ull;
  bool flightDumped_ = false;
};

// CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns: ranks publish it at init to
// put their monotonic clocks on a common one (see Setup::clockOffsetNs).
int64_t realtimeMinusMonotonicNs();

// The path with %r replaced by the rank and %p by the pid.
std::string expandRankPath(const std::string& pattern, int rank);

}  // namespace telemetry
}  // namespace weft
