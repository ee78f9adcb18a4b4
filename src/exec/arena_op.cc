#include "exec/arena_op.h"

#include <cstring>

#include "core/clock.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/arena.h"

namespace weft {
namespace {

static_assert(kArenaRingSlots == shm::Arena::kRingSlots, "arena_plan.h's rule follows the arena");

// A rank's call, as two words beside its flag: w0 = type | dtype << 8 |
// op << 16 | chain bits 0-7 << 24 | root << 32; w1 = count | chain bits
// 8-23 << 48 (counts of 2^48 elements and more carry no chain bits). The
// chain (Arena::chainCall) hashes every arena call so far, so comparing the
// words compares the ranks' histories too.
constexpr uint64_t kW0Call = ~(0xffull << 24);
constexpr uint64_t kCountBits = (1ull << 48) - 1;

uint64_t descWord0(const CollArgs& a, weft_datatype_t dt) {
  return static_cast<uint64_t>(a.type) | static_cast<uint64_t>(dt) << 8 |
         static_cast<uint64_t>(a.op) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(a.root)) << 32;
}
uint64_t withChain0(uint64_t w0, uint32_t chain) {
  return w0 | static_cast<uint64_t>(chain & 0xff) << 24;
}
uint64_t descWord1(uint64_t count, uint32_t chain) {
  return count > kCountBits ? count : count | static_cast<uint64_t>((chain >> 8) & 0xffff) << 48;
}
// (Messages only: a count of 2^48 or more would print masked.)
uint64_t countOf(uint64_t w1) { return w1 & kCountBits; }

std::string describeDesc(uint64_t w0, uint64_t w1) {
  CollArgs a;
  a.type = static_cast<CollType>(w0 & 0xff);
  a.op = static_cast<weft_op_t>((w0 >> 16) & 0xff);
  a.root = static_cast<int>(static_cast<uint32_t>(w0 >> 32));
  a.count = countOf(w1);
  std::string s = describeOp(a, static_cast<weft_datatype_t>((w0 >> 8) & 0xff), 0);
  // describeOp prints "#0" for the sequence number we do not know here.
  size_t hash = s.find(" #0");
  if (hash != std::string::npos) s.erase(hash, 3);
  return s;
}

// Ring mode's A: my call and stamp in my ring slot of round g. Every rank
// describes the round there; the root stages the data there too. The slot
// names its round last (the caller stores it, after the data), so a reader
// that sees it may read the slot without waiting for the flag.
inline shm::Arena::RingSlot* describeInRing(const shm::Arena& a, uint64_t g, uint64_t w0,
                                            uint64_t w1, uint64_t stamp) {
  shm::Arena::RingSlot* s = a.ringSlot(a.rank(), g);
  s->desc[0] = w0;
  s->desc[1] = w1;
  s->stamp = stamp;
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
  const uint32_t chain = arena->chainCall(w0_, args.count);
  w0_ = withChain0(w0_, chain);
  w1_ = descWord1(args.count, chain);
  base_ = arena->reserveRounds(plan.rounds);
  len_ = plan.rounds ? std::min(plan.step, plan.total) : 0;
}

std::string ArenaOp::describe() const { return describeOp(args_, dt_, seq_); }

__attribute__((always_inline)) inline uint8_t* ArenaOp::at(const ArenaLoc& l, uint64_t g) const {
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

__attribute__((always_inline)) inline bool ArenaOp::act(const ArenaPhase& ph, uint64_t g,
                                                        Status* st) {
  for (const ArenaAct *a = plan_.begin(ph), *end = plan_.end(ph); a != end; ++a) {
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
        std::vector<const void*> heap;
        const void** srcs = inl;
        if (a->srcCount > 16) {
          heap.resize(a->srcCount);
          srcs = heap.data();
        }
        const ArenaLoc* from = plan_.srcs.data() + a->srcBegin;
        for (uint32_t i = 0; i < a->srcCount; ++i) srcs[i] = at(from[i], g);
        reduce(dst, srcs, static_cast<int>(a->srcCount), a->bytes / args_.eltSize);
        break;
      }
      case ArenaActKind::Divide:
        divideByCount(dst, a->bytes / args_.eltSize, dt_, static_cast<uint64_t>(arena_->nranks()));
        break;
      case ArenaActKind::Read: {
        Status rs = arena_->readFrom(
            a->src.rank, arena_->addr(a->src.rank, static_cast<int>(g & 1)) + lo_ + a->src.off, dst,
            a->bytes);
        if (rs.isError()) {
          if (st) *st = std::move(rs);
          return false;
        }
        break;
      }
    }
  }
  return true;
}

__attribute__((always_inline)) inline void ArenaOp::phaseA(uint64_t g) {
  if (plan_.mode == ArenaPlan::Mode::Ring) {
    shm::Arena::RingSlot* s = describeInRing(*arena_, g, w0_, w1_, rec_ ? rec_->stamp : 0);
    act(plan_.round(round_).a, g, nullptr);  // A only copies
    s->round.store(g, std::memory_order_release);
    return;
  }
  if (round_ == 0)
    arena_->setDesc(g, w0_, w1_, rec_ ? rec_->stamp : 0,
                    plan_.mode == ArenaPlan::Mode::Direct ? send_ : nullptr);
  act(plan_.round(round_).a, g, nullptr);  // A only copies
}

__attribute__((always_inline)) inline bool ArenaOp::checkCalls(uint64_t g, Status* st) {
  const bool ring = plan_.mode == ArenaPlan::Mode::Ring;
  const int only = plan_.waitOnly;
  const int lo = only >= 0 ? only : 0, hi = only >= 0 ? only + 1 : arena_->nranks();
  for (int p = lo; p < hi; ++p) {
    uint64_t stamp = 0;
    // Two calls, so that each inlines with a constant ringFirst.
    const uint64_t* d = ring ? arena_->descOf(p, g, &stamp, true) : arena_->descOf(p, g, &stamp);
    if (__builtin_expect(!d || d[0] != w0_ || d[1] != w1_, 0)) {
      *st = mismatch(p, d);
      return false;
    }
    if (rec_) rec_->stamp = telemetry::laterStamp(rec_->stamp, stamp);
  }
  return true;
}

Status ArenaOp::mismatch(int p, const uint64_t* d) {
  // Ranks waiting for this one learn at once that it stopped.
  arena_->markFailed();
  if (d && (d[0] & kW0Call) == (w0_ & kW0Call) && countOf(d[1]) == countOf(w1_))
    return invalidUsage(strFormat(
        "mismatched collectives before %s on rank %d: %s made the same call, but their earlier "
        "collectives on this communicator differ (e.g. a broadcast or reduce whose root differs "
        "between ranks, where no rank compares calls): check the calls since the last one that "
        "succeeded on every rank (shm arena)",
        describe().c_str(), arena_->rank(), arena_->describe(p).c_str()));
  return invalidUsage(
      strFormat("mismatched collectives at %s on rank %d: %s called %s (shm arena)",
                describe().c_str(), arena_->rank(), arena_->describe(p).c_str(),
                d ? describeDesc(d[0], d[1]).c_str() : "something that runs no arena round here"));
}

__attribute__((always_inline)) inline bool ArenaOp::phaseB(uint64_t g, Status* st) {
  if (round_ == 0 && plan_.waitB && !checkCalls(g, st)) return false;
  return act(plan_.round(round_).b, g, st);
}

bool ArenaOp::ringReady(uint64_t g) const {
  return plan_.waitOnly >= 0 &&
         arena_->ringSlot(plan_.waitOnly, g)->round.load(std::memory_order_acquire) == g;
}

uint64_t ArenaOp::target() const {
  const uint64_t g = base_ + round_;
  if (stage_ == 0) return arenaGateOfA(plan_.mode, g);
  return stage_ == 1 ? arenaFlagA(g) : arenaFlagB(g);
}

__attribute__((always_inline)) inline bool ArenaOp::ready(uint64_t g) const {
  if (stage_ == 0) {
    // The buffers this round writes are free once every rank published
    // the gate (arena_plan.h's rules).
    const uint64_t gate = arenaGateOfA(plan_.mode, g);
    return !gate || arena_->reached(gate, nullptr);
  }
  if (stage_ == 1)
    // A ring reader may go as soon as the root's slot names this round
    // (one cache line when the root is ahead); else it waits for the flag.
    return !plan_.waitB || ringReady(g) || arena_->reached(arenaFlagA(g), nullptr, plan_.waitOnly);
  return arena_->reached(arenaFlagB(g), nullptr);
}

bool ArenaOp::step(uint64_t g, Status* st) {
  const uint64_t t0 = timed_ ? nowNs() : 0;
  if (stage_ == 0) {
    phaseA(g);
    if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
    if (rec_) rec_->sent[tx_] += plan_.round(round_).staged;
    arena_->publish(arenaFlagA(g));
    stage_ = 1;
    return true;
  }
  if (stage_ == 1) {
    if (timed_ && !rec_->firstByteNs) rec_->firstByteNs = t0;
    const bool ok = phaseB(g, st);
    if (timed_)
      rec_->addWork(plan_.reduces ? telemetry::SpanKind::Reduce : telemetry::SpanKind::Copy, t0,
                    nowNs(), spans_);
    if (!ok) return false;
    // B's flag is only waited for by a C phase (on some rank); without
    // one, A(g+1)'s flag tells the others that B(g) is done.
    if (plan_.publishB) arena_->publish(arenaFlagB(g));
    if (plan_.runC) {
      stage_ = 2;
      return true;
    }
  } else {
    if (!act(plan_.round(round_).c, g, st)) return false;
    if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
  }
  stage_ = 0;
  lo_ += plan_.step;
  if (++round_ < plan_.rounds) len_ = std::min(plan_.step, plan_.total - lo_);
  return true;
}

bool ArenaOp::progress(Status* st, bool* moved) {
  while (round_ < plan_.rounds) {
    const uint64_t g = base_ + round_;
    if (!ready(g)) return false;
    *moved = true;
    if (!step(g, st)) return true;
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

__attribute__((always_inline)) inline Status ArenaOp::awaitStage(uint64_t g, double timeoutS,
                                                                 const std::atomic<bool>* cancel) {
  return ready(g) ? Status() : waitTarget(timeoutS, cancel);
}

Status ArenaOp::runRounds(double timeoutS, const std::atomic<bool>* cancel) {
  // As progress(), waiting where it would return.
  Status st;
  while (round_ < plan_.rounds) {
    const uint64_t g = base_ + round_;
    WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));
    if (!step(g, &st)) return st;
  }
  return st;
}

Status ArenaOp::runOneRound(double timeoutS, const std::atomic<bool>* cancel) {
  // The stages of step(), straight through: a small collective is mostly
  // this function, and the stage machine was a third of its instructions.
  const uint64_t g = base_;
  WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));  // stage 0: the gate
  phaseA(g);
  if (rec_) rec_->sent[tx_] += plan_.last.staged;
  arena_->publish(arenaFlagA(g));
  stage_ = 1;
  WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));
  Status st;
  if (!phaseB(g, &st)) return st;
  if (plan_.publishB) arena_->publish(arenaFlagB(g));
  if (plan_.runC) {
    stage_ = 2;
    WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));
    if (!act(plan_.last.c, g, &st)) return st;
  }
  stage_ = 0;
  round_ = 1;
  return st;
}

Status ArenaOp::runOneShot(double timeoutS, const std::atomic<bool>* cancel) {
  // The two actions of a one-shot plan (ArenaPlan::oneShot; a test pins
  // them), run directly: A copies my bytes to my inline or staging memory,
  // B reduces every rank's there, in rank order, into recv. They are a
  // small allreduce's whole path, and the generic actions cost it a fifth
  // more instructions.
  const uint64_t g = base_;
  const int par = static_cast<int>(g & 1);
  const bool inl = plan_.mode == ArenaPlan::Mode::Inline;
  WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));  // stage 0: the gate
  const int me = arena_->rank(), n = arena_->nranks();
  arena_->setDesc(g, w0_, w1_, rec_ ? rec_->stamp : 0);
  memcpy(inl ? arena_->inlineData(me, g) : arena_->buf(me, par), send_, len_);
  if (rec_) rec_->sent[tx_] += len_;
  arena_->publish(arenaFlagA(g));
  stage_ = 1;
  WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));
  Status st;
  if (!checkCalls(g, &st)) return st;
  const void* few[16];
  std::vector<const void*> many;
  const void** srcs = few;
  if (n > 16) {
    many.resize(n);
    srcs = many.data();
  }
  for (int p = 0; p < n; ++p) srcs[p] = inl ? arena_->inlineData(p, g) : arena_->buf(p, par);
  const size_t count = len_ / args_.eltSize;
  reduce(recv_, srcs, n, count);
  if (args_.op == WEFT_AVG && args_.repro == Repro::Off)
    divideByCount(recv_, count, dt_, static_cast<uint64_t>(n));
  stage_ = 0;
  round_ = 1;
  return st;
}

Status ArenaOp::runRing(double timeoutS, const std::atomic<bool>* cancel) {
  // The actions of a ring broadcast (Mode::Ring; a test pins them), run
  // directly, as runOneShot's: a small broadcast is mostly this function.
  const uint64_t g = base_;
  WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));  // stage 0: the gate
  const int root = args_.root;
  const bool isRoot = arena_->rank() == root;
  shm::Arena::RingSlot* s = describeInRing(*arena_, g, w0_, w1_, rec_ ? rec_->stamp : 0);
  if (isRoot) {
    memcpy(s->data(len_), send_, len_);
    if (recv_ != send_) memcpy(recv_, send_, len_);
  }
  s->round.store(g, std::memory_order_release);
  if (isRoot && rec_) rec_->sent[tx_] += len_;
  arena_->publish(arenaFlagA(g));
  Status st;
  if (!isRoot) {
    stage_ = 1;
    WEFT_RETURN_IF_ERROR(awaitStage(g, timeoutS, cancel));
    if (!checkCalls(g, &st)) return st;
    memcpy(recv_, arena_->ringSlot(root, g)->data(len_), len_);
  }
  stage_ = 0;
  round_ = 1;
  return st;
}

}  // namespace weft
