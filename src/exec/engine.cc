// The engine's queue (engine.h says what the engine is): construction,
// enqueue (an op placed, its scratch taken), the rounds of progress() over
// the queued ops, and fail(), which ends them all. One op's steps run in
// op_steps.cc, a round ends in stall_check.cc, waiting is idle_wait.cc and
// drive.cc, memory kept between ops scratch_pool.cc.
#include "exec/engine.h"

#include <poll.h>

#include <algorithm>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/log.h"
#include "core/sanitizer.h"
#include "exec/placement.h"

namespace weft {

Engine::Engine(int rank, int nranks, const Config& cfg, std::vector<Endpoint*> eps,
               std::vector<Transport*> owners, std::vector<Transport*> transports,
               std::vector<PeerInfo> peers)
    : rank_(rank),
      nranks_(nranks),
      cfg_(cfg),
      routes_(rank, std::move(eps)),
      owners_(std::move(owners)),
      transports_(std::move(transports)),
      peers_(std::move(peers)),
      sendGen_(nranks, 0),
      recvGen_(nranks, 0) {
  for (Transport* t : transports_) {
    int fd = t->pollFd();
    if (fd >= 0) pollFds_.push_back(pollfd{fd, POLLIN, 0});
    doorbells_ |= t->caps().doorbell;
  }
  lastProgressNs_ = nowNs();
  lastLivenessNs_ = lastProgressNs_;  // a first op soon after init does not look (checkBeforeStart)
  // Spin before sleeping: long when every rank of this host has a core,
  // barely when they share cores (then spinning steals the peer's slice).
  int local = 0;
  for (const PeerInfo& p : peers_)
    if (p.hostHash == peers_[rank_].hostHash) ++local;
  oversubscribed_ = local > hostCpus(peers_, rank_);
  spin_.configure(cfg_.spinUs, oversubscribed_);
  local_ = localWorkFromConfig(cfg_);
  if (local_) WEFT_INFO(kColl, "rank %d: local steps run on %s", rank_, local_->name());
}

Engine::~Engine() {
  // A backend may still be writing into buffers that go away with us.
  if (!localPending_) return;
  if (local_) local_->drain(cfg_.timeoutS);
  if (streamLocal_) streamLocal_->drain(cfg_.timeoutS);
  if (deviceLocal_) deviceLocal_->drain(cfg_.timeoutS);
}

void Engine::setDeviceTransport(Transport* t, std::vector<Endpoint*> eps,
                                std::unique_ptr<LocalWork> deviceLocal) {
  if (t) transports_.push_back(t);  // no poll fd, no doorbell: pollFds_ stays as it is
  routes_.setDevice(std::move(eps));
  deviceLocal_ = std::move(deviceLocal);
}

void Engine::enqueue(std::unique_ptr<Op> op) {
  // The caller's clock reading, or the telemetry's entry time: one clock
  // read less.
  if (!op->enqueueNs) op->enqueueNs = op->rec.entryNs ? op->rec.entryNs : nowNs();
  op->state.assign(op->schedule().steps.size(), Op::kPending);
  op->comps.resize(op->schedule().steps.size());
  const Status ps = place(*op);
  if (op->lw) op->local.assign(op->schedule().steps.size(), 0);
  if (ops_.empty()) {
    lastProgressNs_ = op->enqueueNs;
    selfGapNs_ = 0;
    checkBeforeStart(*op);
  }
  if (!error_.isOk()) {
    finishOp(*op, error_);
    recycle(op);
    return;
  }
  if (ps.isError()) {
    finishOp(*op, ps.withContext(strFormat("rank %d: %s", rank_, op->describe().c_str())));
    recycle(op);
    return;
  }
  // What the op kept (recycle) is host memory: back to the pool when too
  // small, or when the op runs on a backend.
  if (op->scratch && (op->lw || op->scratchLen < op->schedule().scratchBytes)) dropScratch(*op);
  if (op->schedule().scratchBytes && !op->scratch) {
    Status st = takeScratch(*op);
    if (st.isError()) {
      finishOp(*op, st.withContext(strFormat("rank %d: %s", rank_, op->describe().c_str())));
      recycle(op);
      return;
    }
  }
  if (op->schedule().steps.empty() && !op->runner) {
    // Nothing to run (one rank in place, a zero-count call): done now, and
    // the op goes back to the free list.
    finishOp(*op, Status());
    recycle(op);
    return;
  }
  ops_.push_back(std::move(op));
  fresh_ = true;
}

Status Engine::place(Op& op) {
  PlacementFacts pf;
  pf.streamOp = op.tracker && op.tracker->gate;
  pf.directOp = op.tracker && op.tracker->direct;
  pf.deviceEndpoints = routes_.anyDevice();
  pf.haveLocal = local_ != nullptr;
  pf.haveStreamLocal = streamLocal_ != nullptr;
  pf.haveDeviceLocal = deviceLocal_ != nullptr;
  OpPlacement place;
  Status ps = placeOp(pf, nranks_, &place);
  // Host transfers on host endpoints (every op that is not stream-ordered)
  // need no check of their routes.
  if (ps.isOk() && !op.runner && (place.deviceEndpoints || place.mem != MemType::Host))
    ps = routes_.check(place, op.schedule());
  switch (place.local) {
    case LocalRun::Host:
      op.lw = nullptr;
      break;
    case LocalRun::Local:
      op.lw = local_.get();
      break;
    case LocalRun::StreamLocal:
      op.lw = streamLocal_.get();
      break;
    case LocalRun::DeviceLocal:
      op.lw = deviceLocal_.get();
      break;
  }
  op.deviceEps = place.deviceEndpoints;
  op.mem = place.mem;
  return ps;
}

bool Engine::deviceOpsInFlight() const {
  return routes_.anyDevice() &&
         std::any_of(ops_.begin(), ops_.end(),
                     [](const std::unique_ptr<Op>& o) { return o->deviceEps; });
}

void Engine::finishOp(Op& op, const Status& st) {
  if (op.finished) return;
  op.finished = true;
  op.status = st;
  if (tel_ && op.rec.entryNs) {
    roundClockNs_ = nowNs();  // progress() reuses it
    tel_->end(op.rec, st.code(), roundClockNs_);
  }
  if (op.tracker) op.tracker->finishOne(st);
  // Nothing reads a finished op's tracker: the caller may reuse it at once.
  op.tracker.reset();
}

void Engine::fail(const Status& st, bool fromNotices) {
  if (error_.isOk()) {
    // A lost peer may have left because it timed out on another: its
    // notice names that one.
    error_ = st;
    if (st.code() == WEFT_ERR_REMOTE && hooks_.explainLoss && !fromNotices) {
      // What this rank waits for, unless it had not run for a second (it was
      // stopped itself, and what it waits for is not stuck).
      std::vector<int> waiting;
      if (nowNs() - lastNowNs_.load(std::memory_order_relaxed) < 1000000000ull) {
        waitingFor(&waiting);
        waiting.erase(std::remove(waiting.begin(), waiting.end(), rank_), waiting.end());
      }
      error_ = hooks_.explainLoss(st, waiting);
    }
    if (st.code() == WEFT_ERR_REVOKED)  // this rank's own choice: nothing to warn of
      WEFT_INFO(kColl, "%s", error_.message().c_str());
    else
      WEFT_WARN(kColl, "%s", error_.message().c_str());
    // A mismatch this rank found: its peers would otherwise wait for it
    // until their timeout (they may have returned from the mismatched call
    // already, e.g. a send of another size).
    if (st.code() == WEFT_ERR_INVALID_USAGE)
      for (Transport* t : transports_) t->stopped(StopCause::Mismatch);
  }
  if (localPending_) {
    // Local work still running writes into the ops' buffers: it must end
    // before the ops end (the caller may then free its buffers).
    for (LocalWork* lw : {local_.get(), streamLocal_.get(), deviceLocal_.get()}) {
      if (!lw || lw->drain(cfg_.timeoutS)) continue;
      WEFT_WARN(kColl, "rank %d: local work on %s still running after %.0f s; leaking its buffers",
                rank_, lw->name(), cfg_.timeoutS);
      for (auto& op : ops_)
        if (op->lw == lw) leakOnPurpose(op->scratch.release());
    }
    localPending_ = 0;
  }
  xfersInFlight_ = 0;
  if (alone_) finishOp(*alone_, error_);
  for (auto& op : ops_) finishOp(*op, error_);
  ops_.clear();
  spare_.clear();
  spareBytes_ = 0;
  if (tel_) tel_->dumpFlightRecorder(error_.message());
}

void Engine::nextGen() {
  if (++gen_ != 0) return;
  // Wrapped: no stale mark may equal a new generation.
  std::fill(sendGen_.begin(), sendGen_.end(), 0);
  std::fill(recvGen_.begin(), recvGen_.end(), 0);
  gen_ = 1;
}

// One pass over the ops in order: gates, runners, and every op's steps
// (posting what is ready, collecting what completed). True if anything
// moved; stops early on an error (error_ set).
bool Engine::passOverOps() {
  bool moved = false;
  nextGen();
  size_t budget = kScanBudget;
  bool runnerAhead = false;  // an earlier runner op is still running
  for (auto& op : ops_) {
    if (op->finished) continue;
    if (op->tracker && op->tracker->gate && !op->gateOpen) {
      // Stream-ordered: waits for the stream's earlier work; later ops stay behind it.
      bool open = false;
      Status gs = op->tracker->gate(&open);
      if (gs.isError()) {
        fail(gs.withContext(strFormat("rank %d: %s", rank_, op->describe().c_str())));
        return true;
      }
      if (!open) {
        lastProgressNs_ = nowNs();  // the gate has its own timeout
        break;
      }
      op->gateOpen = true;
      // Stream-ordered: this rank enters the op when its stream gets there,
      // not when the call was made (arrival skew counts from here).
      if (tel_ && op->rec.entryNs) tel_->begin(op->rec, nowNs());
    }
    if (op->runner) {
      if (runnerAhead) continue;
      Status st;
      if (op->runner->progress(&st, &moved)) {
        moved = true;
        if (st.isError()) {
          fail(st);
          return true;
        }
        finishOp(*op, st);
      } else {
        runnerAhead = true;
      }
      continue;
    }
    moved |= advanceOp(*op, &budget);
    if (!error_.isOk()) return true;
    if (budget == 0) break;
  }
  return moved;
}

bool Engine::progress() {
  if (!error_.isOk()) {
    lastNowNs_.store(nowNs(), std::memory_order_relaxed);
    return false;
  }
  bool moved = false;
  roundClockNs_ = 0;
  if (fresh_) {
    // Ops enqueued since the last call post their first steps before the
    // transports are polled: a small collective's sends leave one poll (a
    // system call on sockets) sooner, and its receives are posted before
    // the peer's data arrives.
    fresh_ = false;
    moved = passOverOps();
    if (!error_.isOk()) return true;
  }
  // No poll when that pass finished everything (pollUnlessDone).
  const bool allDone =
      moved && std::all_of(ops_.begin(), ops_.end(),
                           [](const std::unique_ptr<Op>& o) { return o->finished; });
  bool active = false;
  if (!pollUnlessDone(allDone, &active)) return true;
  if (ops_.empty()) {
    lastNowNs_.store(nowNs(), std::memory_order_relaxed);
    return moved;
  }
  moved |= passOverOps();
  if (!error_.isOk()) return true;
  while (!ops_.empty() && ops_.front()->finished) {
    recycle(ops_.front());
    ops_.pop_front();
  }
  if (std::any_of(ops_.begin(), ops_.end(),
                  [](const std::unique_ptr<Op>& o) { return o->finished; })) {
    for (auto& o : ops_)
      if (o->finished) recycle(o);
    ops_.erase(
        std::remove_if(ops_.begin(), ops_.end(), [](const std::unique_ptr<Op>& o) { return !o; }),
        ops_.end());
  }
  endRound(moved, active);
  return moved || active;
}

bool Engine::pollTransports(bool* active) {
  uint64_t activity = 0;
  for (Transport* t : transports_) {
    Status st = t->progress();
    if (st.isError()) {
      fail(st.withContext(strFormat("rank %d", rank_)));
      return false;
    }
    activity += t->activity();
  }
  // Bytes moved without completing a step (a long message arriving piece
  // by piece): not idle, so the spin budget is not spent and the rank does
  // not sleep between the pieces; but no progress for the stall checks.
  *active = activity != lastActivity_;
  lastActivity_ = activity;
  return true;
}

bool Engine::pollUnlessDone(bool allDone, bool* active) {
  if (allDone && ++unpolled_ < 32) return true;
  unpolled_ = 0;
  return pollTransports(active);
}

}  // namespace weft
