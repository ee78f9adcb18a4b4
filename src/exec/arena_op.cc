#include "exec/arena_op.h"

#include <cstring>

#include "core/clock.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/arena.h"

namespace weft {
namespace {

static_assert(kArenaRingSlots == shm::Arena::kRingSlots, "arena_plan.h's rule follows the arena");

uint64_t descWord0(const CollArgs& a, weft_datatype_t dt) {
  return static_cast<uint64_t>(a.type) | static_cast<uint64_t>(dt) << 8 |
         static_cast<uint64_t>(a.op) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(a.root)) << 32;
}

std::string describeDesc(uint64_t w0, uint64_t w1) {
  CollArgs a;
  a.type = static_cast<CollType>(w0 & 0xff);
  a.op = static_cast<weft_op_t>((w0 >> 16) & 0xff);
  a.root = static_cast<int>(static_cast<uint32_t>(w0 >> 32));
  a.count = w1;
  std::string s = describeOp(a, static_cast<weft_datatype_t>((w0 >> 8) & 0xff), 0);
  // describeOp prints "#0" for the sequence number we do not know here.
  size_t hash = s.find(" #0");
  if (hash != std::string::npos) s.erase(hash, 3);
  return s;
}

}  // namespace

ArenaShape arenaShapeOf(const shm::Arena& arena) {
  ArenaShape s;
  s.rank = arena.rank();
  s.nranks = arena.nranks();
  s.chunk = arena.chunk();
  s.ringPayload = arena.ringPayload();
  s.inlineBytes = shm::Arena::kInlineBytes;
  s.directMin = arena.directMin();
  s.directLimited = arena.directLimited();
  return s;
}

ArenaOp::ArenaOp(shm::Arena* arena, const ArenaPlan& plan, const CollArgs& args, weft_datatype_t dt,
                 const void* send, void* recv, uint64_t seq)
    : arena_(arena),
      plan_(plan),
      args_(args),
      dt_(dt),
      send_(static_cast<uint8_t*>(const_cast<void*>(send))),
      recv_(static_cast<uint8_t*>(recv)),
      seq_(seq),
      w0_(descWord0(args, dt)) {
  base_ = arena->reserveRounds(plan.rounds);
  len_ = plan.rounds ? std::min(plan.step, plan.total) : 0;
}

std::string ArenaOp::describe() const { return describeOp(args_, dt_, seq_); }

uint8_t* ArenaOp::at(const ArenaLoc& l, uint64_t g) const {
  const int par = static_cast<int>(g & 1);
  switch (l.space) {
    case ArenaSpace::Send:
      return send_ + lo_ + l.off;
    case ArenaSpace::Recv:
      return recv_ + lo_ + l.off;
    case ArenaSpace::Stage:
      return reinterpret_cast<uint8_t*>(arena_->buf(l.rank, par)) + l.off;
    case ArenaSpace::Result:
      return reinterpret_cast<uint8_t*>(arena_->buf(l.rank, 2 + par)) + l.off;
    case ArenaSpace::Inline:
      return reinterpret_cast<uint8_t*>(arena_->inlineData(l.rank, g)) + l.off;
    case ArenaSpace::Ring:
      return reinterpret_cast<uint8_t*>(arena_->ringSlot(l.rank, g)->data(len_)) + l.off;
    case ArenaSpace::Peer:
      break;  // another process's address: only Read takes it
  }
  return nullptr;
}

Status ArenaOp::act(const ArenaPhase& ph, uint64_t g) {
  for (const ArenaAct* a = plan_.begin(ph); a != plan_.end(ph); ++a) {
    uint8_t* dst = at(a->dst, g);
    switch (a->kind) {
      case ArenaActKind::Copy: {
        const uint8_t* src = at(a->src, g);
        if (dst == src) break;
        if (a->stream)
          copyHostStreaming(dst, src, a->bytes);
        else
          memcpy(dst, src, a->bytes);
        break;
      }
      case ArenaActKind::Reduce: {
        const void* inl[16];
        std::unique_ptr<const void*[]> heap;
        const void** srcs = inl;
        if (a->srcCount > 16) {
          heap.reset(new const void*[a->srcCount]);
          srcs = heap.get();
        }
        for (uint32_t i = 0; i < a->srcCount; ++i) srcs[i] = at(plan_.srcs[a->srcBegin + i], g);
        reduceHostN(dst, srcs, static_cast<int>(a->srcCount), a->bytes / args_.eltSize, dt_,
                    args_.op);
        break;
      }
      case ArenaActKind::Divide:
        divideByCount(dst, a->bytes / args_.eltSize, dt_, static_cast<uint64_t>(arena_->nranks()));
        break;
      case ArenaActKind::Read:
        WEFT_RETURN_IF_ERROR(arena_->readFrom(
            a->src.rank, arena_->addr(a->src.rank, static_cast<int>(g & 1)) + lo_ + a->src.off, dst,
            a->bytes));
        break;
    }
  }
  return Status::ok();
}

void ArenaOp::phaseA(uint64_t g) {
  const uint64_t stamp = rec_ ? rec_->stamp : 0;
  if (plan_.mode == ArenaPlan::Mode::Ring) {
    // Every rank describes the round in its own ring slot; the root's
    // actions stage the data there. The slot names its round last, so a
    // reader that sees it may read the slot without waiting for the flag.
    shm::Arena::RingSlot* s = arena_->ringSlot(arena_->rank(), g);
    s->desc[0] = w0_;
    s->desc[1] = args_.count;
    s->stamp = stamp;
    act(plan_.round(round_).a, g);
    s->round.store(g, std::memory_order_release);
    return;
  }
  if (round_ == 0)
    arena_->setDesc(g, w0_, args_.count, stamp,
                    plan_.mode == ArenaPlan::Mode::Direct ? send_ : nullptr);
  act(plan_.round(round_).a, g);
}

Status ArenaOp::checkCalls(uint64_t g) {
  const bool ring = plan_.mode == ArenaPlan::Mode::Ring;
  const int only = plan_.waitOnly;
  for (int p = only >= 0 ? only : 0; p < (only >= 0 ? only + 1 : arena_->nranks()); ++p) {
    uint64_t stamp = 0;
    const uint64_t* d = arena_->descOf(p, g, &stamp, ring);
    if (rec_ && d) rec_->stamp = telemetry::laterStamp(rec_->stamp, stamp);
    if (d && d[0] == w0_ && d[1] == args_.count) continue;
    return invalidUsage(strFormat(
        "mismatched collectives at %s on rank %d: %s called %s (shm arena)", describe().c_str(),
        arena_->rank(), arena_->describe(p).c_str(),
        d ? describeDesc(d[0], d[1]).c_str() : "something that runs no arena round here"));
  }
  return Status::ok();
}

Status ArenaOp::phaseB(uint64_t g) {
  if (round_ == 0 && plan_.waitB) WEFT_RETURN_IF_ERROR(checkCalls(g));
  return act(plan_.round(round_).b, g);
}

void ArenaOp::phaseC(uint64_t g) { act(plan_.round(round_).c, g); }

bool ArenaOp::ringReady(uint64_t g) const {
  return plan_.waitOnly >= 0 &&
         arena_->ringSlot(plan_.waitOnly, g)->round.load(std::memory_order_acquire) == g;
}

uint64_t ArenaOp::target() const {
  const uint64_t g = base_ + round_;
  if (stage_ == 0) return arenaGateOfA(plan_.mode, g);
  return stage_ == 1 ? arenaFlagA(g) : arenaFlagB(g);
}

bool ArenaOp::progress(Status* st, bool* moved) {
  while (round_ < plan_.rounds) {
    const uint64_t g = base_ + round_;
    if (stage_ == 0) {
      const uint64_t gate = arenaGateOfA(plan_.mode, g);
      if (gate && !arena_->reached(gate, nullptr)) return false;
      const uint64_t t0 = timed_ ? nowNs() : 0;
      phaseA(g);
      if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
      if (rec_) rec_->sent[tx_] += plan_.round(round_).staged;
      arena_->publish(arenaFlagA(g));
      stage_ = 1;
      *moved = true;
    }
    if (stage_ == 1) {
      // A ring reader may go as soon as the root's slot names this round
      // (one cache line when the root is ahead); else it waits for the flag.
      if (plan_.waitB && !ringReady(g) && !arena_->reached(arenaFlagA(g), nullptr, plan_.waitOnly))
        return false;
      const uint64_t t0 = timed_ ? nowNs() : 0;
      if (timed_ && !rec_->firstByteNs) rec_->firstByteNs = t0;
      Status bs = phaseB(g);
      if (timed_)
        rec_->addWork(plan_.reduces ? telemetry::SpanKind::Reduce : telemetry::SpanKind::Copy, t0,
                      nowNs(), spans_);
      if (bs.isError()) {
        *st = bs;
        return true;
      }
      // B's flag is only waited for by a C phase (on some rank); without
      // one, A(g+1)'s flag tells the others that B(g) is done.
      if (plan_.publishB) arena_->publish(arenaFlagB(g));
      *moved = true;
      if (!plan_.runC) {
        stage_ = 0;
        lo_ += plan_.step;
        len_ = ++round_ < plan_.rounds ? std::min(plan_.step, plan_.total - lo_) : 0;
        continue;
      }
      stage_ = 2;
    }
    if (!arena_->reached(arenaFlagB(g), nullptr)) return false;
    const uint64_t t0 = timed_ ? nowNs() : 0;
    phaseC(g);
    if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
    stage_ = 0;
    lo_ += plan_.step;
    len_ = ++round_ < plan_.rounds ? std::min(plan_.step, plan_.total - lo_) : 0;
    *moved = true;
  }
  return true;
}

void ArenaOp::waitingFor(std::vector<int>* ranks) const {
  if (round_ < plan_.rounds) arena_->behind(target(), ranks, stage_ == 1 ? plan_.waitOnly : -1);
}

Status ArenaOp::waitTarget(double timeoutS, const std::atomic<bool>* cancel) {
  return arena_->wait(
      target(), timeoutS, [this] { return describe(); }, cancel,
      [this] {
        if (!tel_ || !rec_) return;
        std::vector<int> w;
        waitingFor(&w);
        tel_->checkStall(*rec_, w, nowNs());
      },
      stage_ == 1 ? plan_.waitOnly : -1);
}

Status ArenaOp::run(double timeoutS, const std::atomic<bool>* cancel) {
  for (;;) {
    Status st;
    bool moved = false;
    if (progress(&st, &moved)) return st;
    st = waitTarget(timeoutS, cancel);
    if (st.isError()) return st;
  }
}

}  // namespace weft
