// How one op's steps run: advanceOp walks an op's steps in schedule order,
// posting a ready transfer on the endpoint its placement gives it
// (exec/placement.h's Routes), running a ready copy / reduce / divide
// inline or handing it to a LocalWork backend, and collecting what
// completed. Walking in schedule order, and marking a peer blocked for the
// rest of a pass once one of its messages must wait, keeps every peer's
// sends and receives in the order the transports match them.
#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "exec/engine.h"
#include "kernels/cpu/fold.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/wire.h"

namespace weft {

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

// The n pieces of a Fold step, in rank order (schedule.h, StepKind::Fold).
const void* const* Engine::foldSources(Op& op, const Step& s) {
  foldSrcs_.resize(static_cast<size_t>(nranks_));
  const uint8_t* pieces = bind(op, s.b);
  for (int q = 0; q < nranks_; ++q)
    foldSrcs_[q] = q == rank_ ? bind(op, s.a) : pieces + q * s.bytes;
  return foldSrcs_.data();
}

bool Engine::reduceStep(Op& op, size_t i, Status* st) {
  const Step& s = op.schedule().steps[i];
  const size_t count = s.bytes / op.args.eltSize;
  const bool exact = op.args.repro == Repro::Exact;
  // A compressed receive's widening add runs here, on the host (a backend
  // has no wire kernels; compressed calls are host memory).
  const bool wiredReduce = s.kind == StepKind::RecvReduce && op.args.wire != Wire::None;
  if (op.lw && !wiredReduce) {
    uint64_t t = 0;
    Status ss;
    if (s.kind == StepKind::Divide)
      ss = op.lw->submitDivide(bind(op, s.dst), count, op.dtype, static_cast<uint64_t>(nranks_),
                               &t);
    else if (s.kind == StepKind::Fold)
      ss = op.lw->submitFold(bind(op, s.dst), foldSources(op, s), nranks_, count, op.dtype,
                             op.args.op, exact, &t);
    else
      ss = op.lw->submitReduce(bind(op, s.dst), bind(op, s.a), bind(op, s.b), count, op.dtype,
                               op.args.op, &t);
    return submitted(op, i, ss, t, st);
  }
  const bool timed = tel_ && op.rec.timeWork;
  const uint64_t t0 = timed ? nowNs() : 0;
  if (s.kind == StepKind::Divide)
    divideByCount(bind(op, s.dst), count, op.dtype, static_cast<uint64_t>(nranks_));
  else if (s.kind == StepKind::Fold)
    foldHost(bind(op, s.dst), foldSources(op, s), nranks_, count, op.dtype, op.args.op, exact);
  else if (wiredReduce)
    wireWidenAdd(reinterpret_cast<float*>(bind(op, s.dst)),
                 reinterpret_cast<const float*>(bind(op, s.a)), wireAt(op, i), count,
                 op.args.wire);
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
  const bool wired = op.args.wire != Wire::None;
  switch (s.kind) {
    case StepKind::Send: {
      // A compressed op sends the step's bytes narrowed (its wire size),
      // and the test throttle meters what travels.
      const size_t len = wired ? wireBytes(op.args.wire, s.bytes / 4) : s.bytes;
      if (cfg_.testThrottleMBps > 0) {
        const uint64_t now = nowNs();
        if (now < throttleNextNs_) return false;
        const double nsPerByte = 1e3 / cfg_.testThrottleMBps;
        throttleNextNs_ = std::max(throttleNextNs_, now) +
                          static_cast<uint64_t>(static_cast<double>(len) * nsPerByte);
      }
      c.reset();
      c.stamp = op.rec.stamp;
      to = routes_.post(op, s);
      const uint8_t* src = wired ? narrowForSend(op, i) : bind(op, s.a);
      st = to.ep->postSend(src, len, op.tag, to.mem, &c);
      if (tel_ && st.code() != kNoResource) op.rec.sent[peerTx_[s.peer]] += len;
      break;
    }
    case StepKind::Recv:
      c.reset();
      to = routes_.post(op, s);
      st = wired ? to.ep->postRecv(wireAt(op, i), wireBytes(op.args.wire, s.bytes / 4), op.tag,
                                   to.mem, &c)
                 : to.ep->postRecv(bind(op, s.dst), s.bytes, op.tag, to.mem, &c);
      if (st.isOk()) {
        noteRecv(op, c);
        if (wired) widenRecv(op, i);
      }
      break;
    case StepKind::RecvReduce:
      c.reset();
      to = routes_.post(op, s);
      st = wired ? to.ep->postRecv(wireAt(op, i), wireBytes(op.args.wire, s.bytes / 4), op.tag,
                                   to.mem, &c)
                 : to.ep->postRecv(bind(op, s.b), s.bytes, op.tag, to.mem, &c);
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
    case StepKind::Fold:
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

bool Engine::advanceOp(Op& op, size_t* budget) {
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
      if (s.kind == StepKind::Recv && op.args.wire != Wire::None) widenRecv(op, i);
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
    if ((isSend && sendGen_[s.peer] == gen_) || (isRecv && recvGen_[s.peer] == gen_)) continue;
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
    if (isSend) sendGen_[s.peer] = gen_;
    if (isRecv) recvGen_[s.peer] = gen_;
  }
  if (op.doneCount == n) {
    // A rank that itself went longer than the timeout without running (it
    // was stopped, or starved of CPU) cannot report success: its peers,
    // waiting for it meanwhile, have failed this op by now.
    const uint64_t gap = std::max(selfGapNs_, nowNs() - lastProgressNs_);
    if (gap > static_cast<uint64_t>(cfg_.timeoutS * 1e9)) {
      fail(Status(WEFT_ERR_TIMEOUT,
                  strFormat("rank %d: %s: this rank did not run for %.0f s (stopped, or starved "
                            "of CPU), past WEFT_TIMEOUT_S=%g s: its peers have given up on it",
                            rank_, op.describe().c_str(), static_cast<double>(gap) * 1e-9,
                            cfg_.timeoutS)));
      return true;
    }
    finishOp(op, Status());
  }
  return moved;
}

}  // namespace weft
