// The runner of arena plans (src/algo/arena_plan.h): one collective over
// the shared-memory arena of one host (transports/shm/arena.h). The plan
// says what this rank stages, reads and reduces in each round and which
// flags it waits for; this file binds the plan's locations to memory
// (the user's buffers, the ranks' staging buffers, flag lines and ring
// slots), runs the actions, publishes and waits for flags, and compares
// the ranks' calls (round 0: each rank's call beside its flag, so ranks
// that called different collectives fail naming both).
//
// A broadcast root does not wait in B, so it does not compare; but every
// descriptor also carries a hash of the calls before it (Arena::chainCall),
// so the next collective that compares calls (any with an all-rank wait)
// finds it, on every rank. A rank that finds a mismatch marks itself failed
// in the arena, so that ranks waiting for it fail at once.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "algo/arena_plan.h"
#include "exec/op.h"
#include "kernels/cpu/fold.h"
#include "kernels/cpu/reduce.h"
#include "telemetry/telemetry.h"

namespace weft {
namespace shm {
class Arena;
}

// The arena's figures a plan is built for.
ArenaShape arenaShapeOf(const shm::Arena& arena);

class ArenaOp : public OpRunner {
 public:
  // Reserves this collective's rounds in the arena's sequence: create arena
  // ops in issue order. `plan` (built for this rank and `args` with
  // arenaShapeOf(*arena)) must outlive the op, or be kept by keepPlan().
  // Buffers as bound by the API (recv may be null where the collective
  // writes none on this rank).
  ArenaOp(shm::Arena* arena, const ArenaPlan& plan, const CollArgs& args, weft_datatype_t dt,
          const void* send, void* recv, uint64_t seq);
  void keepPlan(std::shared_ptr<const ArenaPlan> plan) { keep_ = std::move(plan); }

  bool progress(Status* st, bool* moved) override;
  void waitingFor(std::vector<int>* ranks) const override;
  // Runs to the end on the calling thread, waiting on the arena (bounded by
  // timeoutS without progress; *cancel set by another thread aborts it).
  Status run(double timeoutS, const std::atomic<bool>* cancel) {
    // A one-round plan (every small collective) straight through.
    if (plan_.rounds == 1 && round_ == 0 && stage_ == 0 && !timed_)
      return plan_.oneShot                         ? runOneShot(timeoutS, cancel)
             : plan_.mode == ArenaPlan::Mode::Ring ? runRing(timeoutS, cancel)
                                                   : runOneRound(timeoutS, cancel);
    return runRounds(timeoutS, cancel);
  }

  // Where to record arrival, local work and stalls (the op's record; both
  // outlive the op). Without it, nothing is recorded.
  // `tx`: the telemetry index of the shm transport (staged bytes count as
  // sent over it).
  void setTelemetry(telemetry::Telemetry* tel, telemetry::OpRecord* rec, int tx) {
    tel_ = tel;
    rec_ = rec;
    tx_ = tx;
    spans_ = tel && tel->wantSpans();
    timed_ = rec && rec->timeWork;
  }

 private:
  // Whether the current stage of the current round (g) may run now;
  // waits until it may (bounded as waitTarget).
  bool ready(uint64_t g) const;
  Status awaitStage(uint64_t g, double timeoutS, const std::atomic<bool>* cancel);
  // run() of any plan, of a one-round plan (untimed), of a one-shot
  // allreduce (ArenaPlan::oneShot), of a ring broadcast.
  Status runRounds(double timeoutS, const std::atomic<bool>* cancel);
  Status runOneRound(double timeoutS, const std::atomic<bool>* cancel);
  Status runOneShot(double timeoutS, const std::atomic<bool>* cancel);
  Status runRing(double timeoutS, const std::atomic<bool>* cancel);
  // Runs it (and publishes its flag), then moves to the next stage or
  // round; false with *st set when it failed.
  bool step(uint64_t g, Status* st);
  // The phases of the current round.
  void phaseA(uint64_t g);
  bool phaseB(uint64_t g, Status* st);
  // Runs the actions of one phase; false with *st set (if st) when a
  // read failed (only B reads other processes' memory).
  bool act(const ArenaPhase& ph, uint64_t g, Status* st);
  // dst = the fold of srcs[0..n) in rank order: reduceHostN, or for a
  // reproducible call foldHost (which divides for AVG itself).
  void reduce(void* dst, const void* const* srcs, int n, size_t count) const {
    if (args_.repro == Repro::Off)
      reduceHostN(dst, srcs, n, count, dt_, args_.op);
    else
      foldHost(dst, srcs, n, count, dt_, args_.op, args_.repro == Repro::Exact);
  }
  // A location of the plan in memory, for round g.
  uint8_t* at(const ArenaLoc& l, uint64_t g) const;
  // Compares every rank's call (or the one B waits for) with mine.
  bool checkCalls(uint64_t g, Status* st);
  // The error naming both calls (or, where the calls agree, saying that
  // the ranks' earlier calls differ); marks this rank failed in the arena.
  Status mismatch(int p, const uint64_t* d);
  // Waits until every rank (or the plan's waitOnly) reached target().
  Status waitTarget(double timeoutS, const std::atomic<bool>* cancel);
  // The flag every rank must reach before the current stage.
  uint64_t target() const;
  // A ring reader: the root's slot already holds round g.
  bool ringReady(uint64_t g) const;
  std::string describe() const;

  shm::Arena* arena_;
  const ArenaPlan& plan_;
  std::shared_ptr<const ArenaPlan> keep_;
  CollArgs args_;
  weft_datatype_t dt_;
  uint8_t* send_;
  uint8_t* recv_;
  uint64_t seq_;
  uint64_t w0_, w1_;  // my call and the call history, as described beside my flag
  uint64_t base_ = 0;
  size_t round_ = 0;
  size_t lo_ = 0, len_ = 0;  // the current round's bytes
  int stage_ = 0;            // 0: run A; 1: wait, run B; 2: wait, run C
  telemetry::Telemetry* tel_ = nullptr;
  telemetry::OpRecord* rec_ = nullptr;
  bool spans_ = false;
  bool timed_ = false;  // phases are timed (telemetry, and big enough rounds)
  int tx_ = 0;
};

}  // namespace weft
