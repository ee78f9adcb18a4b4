// The one loop that drives the engine until a caller's wait is over
// (Engine::drive), and runAlone, the blocking call that runs its one op
// through that loop without the queue. Every waiter goes through drive(), so
// that the order of its checks (done, cancel, round, done, deadline) and its
// lock discipline (prepareIdle under the comm's lock, sleepIdle without it)
// are written once.
#include <new>

#include "core/clock.h"
#include "exec/engine.h"

namespace weft {

Engine::DriveEnd Engine::drive(const Drive& d) {
  int idle = 0;  // rounds in a row that moved nothing
  for (;;) {
    if (d.lock && !d.lock->owns_lock()) d.lock->lock();
    if (d.done()) return DriveEnd::kDone;
    if (d.cancel && d.cancel->load(std::memory_order_relaxed)) return DriveEnd::kCancelled;
    idle = (alone_ ? aloneRound() : progress()) ? 0 : idle + 1;
    if (d.done()) return DriveEnd::kDone;
    if (d.deadline && d.deadline->expired()) return DriveEnd::kExpired;
    if (!d.lock) {
      if (idle) idleWait(idle, d.maxSleepUs);
      continue;
    }
    // Decided under the lock, slept without it.
    const IdleWait w = prepareIdle(idle, d.maxSleepUs);
    d.lock->unlock();
    sleepIdle(w);
  }
}

Op& Engine::aloneOp() {
  if (!aloneOp_) aloneOp_.reset(new Op());
  Op& op = *aloneOp_;
  // What runAlone and fillOp do not set again: the record, the run's state.
  new (&op.rec) telemetry::OpRecord;
  op.firstPending = 0;
  op.doneCount = 0;
  op.finished = false;
  op.status = Status();
  return op;
}

Status Engine::runAlone(Op& op, const std::atomic<bool>& aborting) {
  const size_t n = op.schedule().steps.size();
  if (!op.enqueueNs) op.enqueueNs = op.rec.entryNs ? op.rec.entryNs : nowNs();
  op.state.assign(n, Op::kPending);
  if (op.comps.size() < n) op.comps.resize(n);
  op.lw = nullptr;
  op.deviceEps = false;
  op.mem = MemType::Host;
  checkBeforeStart(op);
  if (!error_.isOk()) {
    finishOp(op, error_);
    return op.status;
  }
  const size_t need = op.schedule().scratchBytes;
  if (op.scratch && op.scratchLen < need) dropScratch(op);
  if (need && !op.scratch) {
    Status st = takeScratch(op);
    if (st.isError()) {
      finishOp(op, st.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
      return op.status;
    }
  }
  if (n == 0) {
    finishOp(op, Status());
    return op.status;
  }
  lastProgressNs_ = op.enqueueNs;
  selfGapNs_ = 0;
  alone_ = &op;
  fresh_ = true;  // its ready steps are posted before the first poll
  // An error finishes the op too (fail() finishes alone_).
  Drive d;
  d.done = [&op] { return op.finished; };
  d.cancel = &aborting;
  if (drive(d) == DriveEnd::kCancelled) fail(Status(WEFT_ERR_ABORTED, "communicator was aborted"));
  alone_ = nullptr;
  // A large buffer goes back to the pool, as a queued op's does.
  if (op.scratchLen > kKeepScratch) dropScratch(op);
  return op.status;
}

bool Engine::aloneRound() {
  Op& op = *alone_;
  const bool first = fresh_;
  fresh_ = false;
  // The first round's clock is the call's (a few hundred nanoseconds old).
  roundClockNs_ = first ? op.enqueueNs : 0;
  bool active = false;
  if (!first && !pollUnlessDone(false, &active)) return true;
  nextGen();
  size_t budget = kScanBudget;
  const bool moved = advanceOp(op, &budget);
  if (!error_.isOk()) return true;
  // Done in the first round, without a poll (sends taken at once): polled
  // only as progress() would.
  if (op.finished && first && !pollUnlessDone(true, &active)) return true;
  endRound(moved || op.finished, active);
  return moved || active;
}

}  // namespace weft
