#include "exec/engine.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/log.h"
#include "exec/placement.h"
#include "kernels/cpu/reduce.h"

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
  // Spin before sleeping: long when every rank of this host has a core,
  // barely when they share cores (then spinning steals the peer's slice).
  int local = 0;
  for (const PeerInfo& p : peers_)
    if (p.hostHash == peers_[rank_].hostHash) ++local;
  oversubscribed_ = local > hostCpus(peers_, rank_);
  spin_.configure(cfg_.spinUs, oversubscribed_);
  if (cfg_.testThrottleMBps > 0) throttleNsPerByte_ = 1e3 / cfg_.testThrottleMBps;
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

std::unique_ptr<Op> Engine::newOp() {
  if (freeOps_.empty()) return std::unique_ptr<Op>(new Op());
  std::unique_ptr<Op> op = std::move(freeOps_.back());
  freeOps_.pop_back();
  return op;
}

size_t Engine::releaseSpareScratch() {
  if (busy()) return 0;
  size_t bytes = 0;
  for (const Spare& sp : spare_) bytes += sp.len;
  spare_.clear();
  for (auto& op : freeOps_) bytes += op->scratchLen;
  freeOps_.clear();
  return bytes;
}

size_t Engine::spareScratchBytes(bool device) const {
  size_t bytes = 0;
  for (const Spare& sp : spare_)
    if ((sp.from != nullptr) == device) bytes += sp.len;
  if (!device)
    for (const auto& op : freeOps_) bytes += op->scratchLen;
  return bytes;
}

void Engine::recycle(std::unique_ptr<Op>& op) {
  constexpr size_t kFreeOps = 16;
  if (freeOps_.size() < kFreeOps) {
    // A small host scratch buffer stays with the op: the next op of a loop
    // of small collectives takes it back without a search of the pool.
    ScratchPtr keep;
    size_t keepLen = 0;
    if (op->scratch && !op->lw && op->scratchLen <= kKeepScratch) {
      keep = std::move(op->scratch);
      keepLen = op->scratchLen;
    } else {
      giveBackScratch(*op, op->lw);
    }
    op->reset();
    op->scratch = std::move(keep);
    op->scratchLen = keepLen;
    freeOps_.push_back(std::move(op));
    return;
  }
  giveBackScratch(*op, op->lw);
  op.reset();
}

void Engine::enqueue(std::unique_ptr<Op> op) {
  // The caller's clock reading, or the telemetry's entry time: one clock
  // read less.
  if (!op->enqueueNs) op->enqueueNs = op->rec.entryNs ? op->rec.entryNs : nowNs();
  op->state.assign(op->schedule().steps.size(), Op::kPending);
  op->comps.resize(op->schedule().steps.size());
  const Status ps = place(*op);
  if (op->lw) op->local.assign(op->schedule().steps.size(), 0);
  if (ops_.empty()) lastProgressNs_ = op->enqueueNs;
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

uint8_t* Engine::bind(Op& op, BufRef ref) const {
  switch (ref.buf) {
    case BufId::Send:
      return op.send ? op.send + ref.off : nullptr;
    case BufId::Recv:
      return op.recv ? op.recv + ref.off : nullptr;
    case BufId::Scratch:
      return op.scratch ? op.scratch.get() + ref.off : nullptr;
  }
  return nullptr;
}

Status Engine::takeScratch(Op& op) {
  const size_t need = op.schedule().scratchBytes;
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i)
    if (spare_[i].from == op.lw && spare_[i].len >= need &&
        (best == spare_.size() || spare_[i].len < spare_[best].len))
      best = i;
  if (best < spare_.size()) {
    op.scratch = std::move(spare_[best].buf);
    op.scratchLen = spare_[best].len;
    spare_.erase(spare_.begin() + static_cast<long>(best));
    return Status();
  }
  // Not zeroed: steps write before they read.
  if (op.lw) {
    WEFT_RETURN_IF_ERROR(op.lw->allocScratch(need, &op.scratch));
  } else {
    op.scratch.reset(new uint8_t[need]);
  }
  op.scratchLen = need;
  return Status();
}

void Engine::dropScratch(Op& op) {
  giveBackScratch(op, nullptr);
  op.scratch.reset();  // the pool kept larger ones
  op.scratchLen = 0;
}

void Engine::giveBackScratch(Op& op, const LocalWork* from) {
  if (!op.scratch) return;
  if (spare_.size() >= kSpareScratch) {
    // Keep the largest buffers.
    size_t smallest = 0;
    for (size_t i = 1; i < spare_.size(); ++i)
      if (spare_[i].len < spare_[smallest].len) smallest = i;
    if (spare_[smallest].len >= op.scratchLen) return;
    spare_.erase(spare_.begin() + static_cast<long>(smallest));
  }
  spare_.push_back(Spare{op.scratchLen, std::move(op.scratch), from});
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

void Engine::fail(const Status& st) {
  if (error_.isOk()) {
    error_ = st;
    WEFT_WARN(kColl, "%s", st.message().c_str());
  }
  if (localPending_) {
    // Local work still running writes into the ops' buffers: it must end
    // before the ops end (the caller may then free its buffers).
    for (LocalWork* lw : {local_.get(), streamLocal_.get(), deviceLocal_.get()}) {
      if (!lw || lw->drain(cfg_.timeoutS)) continue;
      WEFT_WARN(kColl, "rank %d: local work on %s still running after %.0f s; leaking its buffers",
                rank_, lw->name(), cfg_.timeoutS);
      for (auto& op : ops_)
        if (op->lw == lw) (void)op->scratch.release();
    }
    localPending_ = 0;
  }
  xfersInFlight_ = 0;
  if (alone_) finishOp(*alone_, error_);
  for (auto& op : ops_) finishOp(*op, error_);
  ops_.clear();
  spare_.clear();
  if (tel_) tel_->dumpFlightRecorder(error_.message());
}

void Engine::noteRecv(Op& op, const Completion& c) {
  if (!tel_) return;
  if (!op.rec.firstByteNs) op.rec.firstByteNs = nowNs();
  op.rec.stamp = telemetry::laterStamp(op.rec.stamp, c.stamp);
}

namespace {
// Set in Op::local[i] once step i was seen pending while a transfer was in flight.
constexpr uint64_t kOverlapBit = uint64_t{1} << 63;
}  // namespace

bool Engine::submitted(Op& op, size_t i, const Status& st, uint64_t ticket, Status* out) {
  if (st.isError()) {
    *out = st;
    return false;
  }
  op.local[i] = ticket | (xfersInFlight_ ? kOverlapBit : 0);
  ++localPending_;
  localWorkCounters().steps.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool Engine::localDone(Op& op, size_t i, Status* st) {
  uint64_t& t = op.local[i];
  bool fin = false;
  *st = op.lw->done(t & ~kOverlapBit, &fin);
  if (st->isError()) return false;
  if (!fin) {
    // Another chunk's transfer is posted and not yet complete while this
    // step's work runs: the pipeline overlaps.
    if (xfersInFlight_) t |= kOverlapBit;
    return false;
  }
  --localPending_;
  if (t & kOverlapBit) localWorkCounters().overlapped.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Engine::reduceStep(Op& op, size_t i, Status* st) {
  const Step& s = op.schedule().steps[i];
  const size_t count = s.bytes / op.args.eltSize;
  if (op.lw) {
    uint64_t t = 0;
    Status ss = s.kind == StepKind::Divide
                    ? op.lw->submitDivide(bind(op, s.dst), count, op.dtype,
                                          static_cast<uint64_t>(nranks_), &t)
                    : op.lw->submitReduce(bind(op, s.dst), bind(op, s.a), bind(op, s.b), count,
                                          op.dtype, op.args.op, &t);
    return submitted(op, i, ss, t, st);
  }
  const bool timed = tel_ && op.rec.timeWork;
  const uint64_t t0 = timed ? nowNs() : 0;
  if (s.kind == StepKind::Divide)
    divideByCount(bind(op, s.dst), count, op.dtype, static_cast<uint64_t>(nranks_));
  else
    reduceHost(bind(op, s.dst), bind(op, s.a), bind(op, s.b), count, op.dtype, op.args.op);
  if (timed) op.rec.addWork(telemetry::SpanKind::Reduce, t0, nowNs(), tel_->wantSpans());
  return true;
}

bool Engine::copyStep(Op& op, size_t i, Status* st) {
  const Step& s = op.schedule().steps[i];
  if (!s.bytes) return true;
  if (op.lw) {
    uint64_t t = 0;
    Status ss = op.lw->submitCopy(bind(op, s.dst), bind(op, s.a), s.bytes, &t);
    return submitted(op, i, ss, t, st);
  }
  const bool timed = tel_ && op.rec.timeWork;
  const uint64_t t0 = timed ? nowNs() : 0;
  memmove(bind(op, s.dst), bind(op, s.a), s.bytes);
  if (timed) op.rec.addWork(telemetry::SpanKind::Copy, t0, nowNs(), tel_->wantSpans());
  return true;
}

// Runs or posts step i (pending, dependencies done). Returns false when the
// transport had no room (the step stays pending and blocks its peer's queue).
bool Engine::runStep(Op& op, size_t i) {
  const Step& s = op.schedule().steps[i];
  Completion& c = op.comps[i];
  Status st;
  bool local = false;  // handed to op.lw, not done yet
  Routes::Post to{};
  switch (s.kind) {
    case StepKind::Send:
      if (throttleNsPerByte_ > 0) {
        const uint64_t now = nowNs();
        if (now < throttleNextNs_) return false;
        throttleNextNs_ = std::max(throttleNextNs_, now) +
                          static_cast<uint64_t>(static_cast<double>(s.bytes) * throttleNsPerByte_);
      }
      c.reset();
      c.stamp = op.rec.stamp;
      to = routes_.post(op, s);
      st = to.ep->postSend(bind(op, s.a), s.bytes, op.tag, to.mem, &c);
      if (tel_ && st.code() != kNoResource) op.rec.sent[peerTx_[s.peer]] += s.bytes;
      break;
    case StepKind::Recv:
      c.reset();
      to = routes_.post(op, s);
      st = to.ep->postRecv(bind(op, s.dst), s.bytes, op.tag, to.mem, &c);
      if (st.isOk()) noteRecv(op, c);
      break;
    case StepKind::RecvReduce:
      c.reset();
      to = routes_.post(op, s);
      st = to.ep->postRecv(bind(op, s.b), s.bytes, op.tag, to.mem, &c);
      if (st.isOk()) {
        noteRecv(op, c);
        local = !reduceStep(op, i, &st);
      }
      break;
    case StepKind::Copy:
      local = !copyStep(op, i, &st);
      break;
    case StepKind::Reduce:
    case StepKind::Divide:
      local = !reduceStep(op, i, &st);
      break;
  }
  if (st.code() == kNoResource) return false;
  if (st.isError()) {
    fail(st.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
    return true;
  }
  if (st.code() == WEFT_IN_PROGRESS) {
    op.state[i] = Op::kPosted;
    ++xfersInFlight_;
  } else if (local) {
    op.state[i] = Op::kLocal;
  } else {
    op.state[i] = Op::kDone;
    op.doneCount++;
  }
  return true;
}

// Step i finished after it was posted or handed to local work.
void Engine::stepDone(Op& op, size_t i) {
  op.state[i] = Op::kDone;
  op.doneCount++;
  if (i == op.firstPending) op.firstPending++;
}

bool Engine::advanceOp(Op& op, std::vector<uint32_t>& sendGen, std::vector<uint32_t>& recvGen,
                       uint32_t gen, size_t* budget) {
  bool moved = false;
  const size_t n = op.schedule().steps.size();
  for (size_t i = op.firstPending; i < n && (*budget) > 0; ++i, --*budget) {
    uint8_t st = op.state[i];
    if (st == Op::kDone) {
      if (i == op.firstPending) op.firstPending++;
      continue;
    }
    const Step& s = op.schedule().steps[i];
    const bool isSend = s.kind == StepKind::Send;
    const bool isRecv = s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce;
    if (st == Op::kPosted) {
      Completion& c = op.comps[i];
      if (!c.done) continue;
      --xfersInFlight_;
      if (c.status.isError()) {
        fail(c.status.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
        return true;
      }
      if (s.kind != StepKind::Send) noteRecv(op, c);
      Status ls;
      if (s.kind == StepKind::RecvReduce && !reduceStep(op, i, &ls)) {
        if (ls.isError()) {
          fail(ls.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
          return true;
        }
        op.state[i] = Op::kLocal;
        moved = true;
        continue;
      }
      stepDone(op, i);
      moved = true;
      continue;
    }
    if (st == Op::kLocal) {
      Status ls;
      if (!localDone(op, i, &ls)) {
        if (ls.isError()) {
          fail(ls.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
          return true;
        }
        continue;
      }
      stepDone(op, i);
      moved = true;
      continue;
    }
    if ((isSend && sendGen[s.peer] == gen) || (isRecv && recvGen[s.peer] == gen)) continue;
    bool ready = true;
    for (uint32_t d = 0; d < s.depCount && ready; ++d)
      ready = op.state[op.schedule().deps[s.depBegin + d]] == Op::kDone;
    if (ready && runStep(op, i)) {
      moved = true;
      if (!error_.isOk()) return true;
      if (op.state[i] == Op::kDone && i == op.firstPending) op.firstPending++;
      continue;
    }
    // Not ready, or no room: later messages to/from this peer must wait.
    if (isSend) sendGen[s.peer] = gen;
    if (isRecv) recvGen[s.peer] = gen;
  }
  if (op.doneCount == n) finishOp(op, Status());
  return moved;
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
    moved |= advanceOp(*op, sendGen_, recvGen_, gen_, &budget);
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

void Engine::endRound(bool moved, bool active) {
  // At most one clock read per round, which idleWait (following every
  // round) reuses, and while nothing moves only every 16th round: a poll
  // round of the shm FIFOs takes tens of nanoseconds, and reading the
  // clock every round was 13% of a small collective's time. The spin
  // budget and the stall checks it serves count microseconds and seconds.
  if (moved || active || ++idleCalls_ >= 16) {
    idleCalls_ = 0;
    // An op that finished in this round read the clock for its record.
    const uint64_t now = roundClockNs_ ? roundClockNs_ : nowNs();
    lastNowNs_.store(now, std::memory_order_relaxed);
    if (moved) {
      lastProgressNs_ = now;
    } else if (!ops_.empty() || alone_) {
      checkStalled(now);
    }
  }
}

void Engine::checkStalled(uint64_t now) {
  const double idleS = static_cast<double>(now - lastProgressNs_) * 1e-9;
  if (idleS < 1.0) return;
  // The peers the oldest unfinished op waits for.
  std::vector<int> waiting;
  const Op* oldest = alone_ && !alone_->finished ? alone_ : nullptr;
  for (auto& op : ops_) {
    if (oldest) break;
    if (!op->finished) oldest = op.get();
  }
  if (!oldest) return;
  if (oldest->runner) {
    oldest->runner->waitingFor(&waiting);
  } else {
    for (size_t i = oldest->firstPending; i < oldest->state.size(); ++i) {
      const Step& s = oldest->schedule().steps[i];
      if (oldest->state[i] == Op::kDone || s.peer < 0) continue;
      if (std::find(waiting.begin(), waiting.end(), s.peer) == waiting.end())
        waiting.push_back(s.peer);
      if (waiting.size() >= 8) break;
    }
  }
  if (tel_) tel_->checkStall(oldest->rec, waiting, now);
  if (now - lastLivenessNs_ > 1000000000ull) {
    lastLivenessNs_ = now;
    for (int p : waiting) {
      Status st = owners_[p] ? owners_[p]->checkPeer(p) : Status();
      if (st.isError()) {
        fail(st.withContext(strFormat("rank %d: %s", rank_, oldest->describe().c_str())));
        return;
      }
    }
  }
  if (idleS < cfg_.timeoutS) return;
  std::string who;
  for (int p : waiting) {
    if (!who.empty()) who += ", ";
    who += strFormat("rank %d (%s, pid %d)", p, peers_[p].hostname.c_str(), peers_[p].pid);
  }
  if (localPending_) {
    const LocalWork* lw = local_         ? local_.get()
                          : streamLocal_ ? streamLocal_.get()
                                         : deviceLocal_.get();
    who += strFormat("%s%zu local step(s) (%s)", who.empty() ? "" : ", ", localPending_,
                     lw ? lw->name() : "?");
  }
  fail(Status(WEFT_ERR_TIMEOUT,
              strFormat("rank %d: %s made no progress for %.0f s (WEFT_TIMEOUT_S); waiting for %s",
                        rank_, oldest->describe().c_str(), idleS, who.c_str())));
}

}  // namespace weft
