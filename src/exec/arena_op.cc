#include "exec/arena_op.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/arena.h"

namespace weft {
namespace {

// Parts of a round are whole cache lines (the last may be shorter), so that
// two ranks never write one line.
constexpr size_t kLine = 64;

inline void copy(void* dst, const void* src, size_t n) {
  if (n && dst != src) memcpy(dst, src, n);
}

// Single copy: one round in which readers copy straight from the owners'
// buffers (Arena::readFrom); every rank then waits until all have read.
// Measured against the staged rounds (docs/performance.md), by output size
// (`out`; the block is `blk`): single copy wins below half an arena chunk,
// loses while the staged rounds run from cache (up to 2-4 chunks), wins
// again from 4 chunks, and is even with the staged path's streaming stores
// from 32. Not an in-place alltoall: each rank overwrites the blocks the
// others would still be reading.
//
// Broadcasts stay staged from 4 chunks: the root then runs ahead of the
// readers instead of waiting for them (2 ranks, 4-16 MiB: 275-1155 us
// staged against 373-2528 single copy in one run, 278-1221 against
// 385-3190 in another, in different phases of the VM).
//
// With more ranks than cores (Arena::directLimited), only allgathers from 4
// chunks: there readers sharing a core take turns, and a round that ends
// when all have read keeps a broadcast root from running ahead. 4 ranks on
// 2 cores, staged against single copy: broadcast 64-256 KiB 10.9-34.7 us
// against 18.9-51.2, 16 MiB 2.7 ms against 4.7; allgather and alltoall 256
// KiB 29-32 us against 51-53, alltoall 4-16 MiB 0.93-4.2 ms against
// 1.2-6.1; but allgather 4-16 MiB 0.88-5.4 ms single copy against 1.44-5.8
// staged.
bool singleCopy(const shm::Arena* arena, const CollArgs& args, size_t blk, size_t out) {
  const bool kind = args.type == CollType::Broadcast || args.type == CollType::AllGather ||
                    (args.type == CollType::AllToAll && !args.inPlace);
  if (!kind || !arena->directMin() || blk < arena->directMin()) return false;
  const size_t chunk = arena->chunk();
  const bool big = args.type != CollType::Broadcast && out >= 4 * chunk && out < 32 * chunk;
  if (arena->directLimited()) return big && args.type == CollType::AllGather;
  return out < chunk / 2 || big;
}

// Outputs at least this large go to memory with non-temporal stores: they
// cannot stay cached anyway, and the stores skip reading the lines first.
constexpr size_t kStreamOutputBytes = size_t{4} << 20;

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

size_t ArenaOp::oneShotLimit(int nranks, size_t chunk) {
  // One-shot reads n inputs of S per rank but needs one synchronization
  // instead of two: it wins while S is small.
  size_t lim = nranks <= 2 ? 32768 : nranks <= 4 ? 16384 : 8192;
  return std::min(lim, chunk);
}

ArenaOp::ArenaOp(shm::Arena* arena, const CollArgs& args, weft_datatype_t dt, const void* send,
                 void* recv, uint64_t seq)
    : arena_(arena),
      args_(args),
      dt_(dt),
      send_(static_cast<const uint8_t*>(send)),
      recv_(static_cast<uint8_t*>(recv)),
      seq_(seq),
      me_(arena->rank()),
      n_(arena->nranks()) {
  const size_t e = args.eltSize;
  const size_t blk = args.count * e;
  if (args.type == CollType::AllReduce && blk && blk <= shm::Arena::kInlineBytes) {
    // The 8-byte allreduce's path: one round, data in the flag's line (no
    // divisions, which the general case below needs).
    total_ = step_ = blk;
    oneShot_ = inline_ = true;
    rounds_ = 1;
    base_ = arena->reserveRounds(1);
    return;
  }
  if (args.type == CollType::Broadcast && blk && blk <= arena->ringPayload() &&
      !singleCopy(arena, args, blk, blk)) {
    // A small broadcast's path: one round through the root's ring (what
    // the general case below finds for it, without its divisions).
    total_ = step_ = blk;
    ring_ = true;
    rounds_ = 1;
    base_ = arena->reserveRounds(1);
    return;
  }
  const size_t chunk = arena->chunk() / kLine * kLine;
  switch (args.type) {
    case CollType::AllReduce:
      total_ = blk;
      oneShot_ = blk <= oneShotLimit(n_, chunk);
      inline_ = oneShot_ && blk <= shm::Arena::kInlineBytes;
      step_ = oneShot_ ? std::max<size_t>(blk, 1) : chunk;
      break;
    case CollType::Reduce:
    case CollType::Broadcast:
    case CollType::AllGather:
      total_ = blk;
      step_ = chunk;
      break;
    case CollType::ReduceScatter:
    case CollType::AllToAll: {
      // The n-1 pieces of one round share my staging buffer.
      total_ = blk;
      size_t per = chunk / static_cast<size_t>(n_);
      step_ = per >= kLine ? per / kLine * kLine : per / e * e;
      break;
    }
    default:
      break;  // barrier: one round, no data
  }
  // Whole elements per round (element sizes are powers of two: a mask, not
  // a division).
  step_ -= (e & (e - 1)) == 0 ? step_ & (e - 1) : step_ % e;
  const size_t outBytes = args.type == CollType::AllGather || args.type == CollType::AllToAll
                              ? blk * static_cast<size_t>(n_)
                              : blk;
  direct_ = singleCopy(arena, args, blk, outBytes);
  if (direct_) step_ = total_;
  ring_ = args.type == CollType::Broadcast && !direct_ && blk > 0 && blk <= arena->ringPayload();
  if (ring_) step_ = total_;
  streamOut_ = outBytes >= kStreamOutputBytes;
  if (args.type == CollType::Barrier)
    rounds_ = 1;
  else
    rounds_ = total_ == 0 || step_ == 0 ? 0 : total_ <= step_ ? 1 : (total_ + step_ - 1) / step_;
  base_ = arena->reserveRounds(rounds_);
}

std::string ArenaOp::describe() const { return describeOp(args_, dt_, seq_); }

size_t ArenaOp::stagedBytes(size_t j) const {
  const size_t len = std::min(step_, total_ - j * step_);
  if (direct_)  // not staged: read in place by the others
    return args_.type == CollType::AllToAll ? len * static_cast<size_t>(n_ - 1)
           : args_.type == CollType::AllGather || me_ == args_.root ? len
                                                                    : 0;
  switch (args_.type) {
    case CollType::AllReduce:
    case CollType::Reduce: {
      if (oneShot_) return len;
      size_t off, pl;
      part(len, me_, &off, &pl);
      return len - pl;
    }
    case CollType::Broadcast:
      return me_ == args_.root ? len : 0;
    case CollType::AllGather:
      return len;
    case CollType::ReduceScatter:
    case CollType::AllToAll:
      return len * static_cast<size_t>(n_ - 1);
    default:
      return 0;
  }
}

bool ArenaOp::reduces() const {
  return args_.type == CollType::AllReduce || args_.type == CollType::Reduce ||
         args_.type == CollType::ReduceScatter;
}

bool ArenaOp::anyC() const {
  return direct_ || (args_.type == CollType::AllReduce && !oneShot_) ||
         args_.type == CollType::Reduce;
}

bool ArenaOp::hasC() const {
  return direct_ || (args_.type == CollType::AllReduce && !oneShot_) ||
         (args_.type == CollType::Reduce && me_ == args_.root);
}

uint64_t ArenaOp::gateOfA(uint64_t g) const {
  // My staging buffer of this parity was last read in round g-2; every rank
  // is past that once it published A(g-1). A ring slot was last read in
  // round g-K: every rank is past that once it published A(g-K+1).
  constexpr uint64_t K = shm::Arena::kRingSlots;
  if (ring_) return g >= K ? 2 * (g - K + 1) + 1 : 0;
  return g > 1 ? 2 * g - 1 : 0;
}

bool ArenaOp::ringReady(uint64_t g) const {
  return ring_ && me_ != args_.root &&
         arena_->ringSlot(args_.root, g)->round.load(std::memory_order_acquire) == g;
}

int ArenaOp::waitRank() const {
  // A ring reader needs the root's data only: it waits for the root alone,
  // so readers never wait for one another.
  return ring_ && me_ != args_.root ? args_.root : -1;
}

uint64_t ArenaOp::target() const {
  const uint64_t g = base_ + round_;
  if (stage_ == 0) return gateOfA(g);
  return stage_ == 1 ? 2 * g + 1 : 2 * g + 2;
}

bool ArenaOp::waitsInB() const {
  // A broadcast root reads nothing in B: it stages and goes on (so back-to-
  // back broadcasts pipeline, as eager ones do elsewhere).
  return direct_ || !(args_.type == CollType::Broadcast && me_ == args_.root);
}

void ArenaOp::part(size_t len, int p, size_t* off, size_t* plen) const {
  size_t lines = (len + kLine - 1) / kLine;
  size_t b = partOffset(lines, n_, p) * kLine, end = partOffset(lines, n_, p + 1) * kLine;
  if (p + 1 == n_) end = lines * kLine;
  b = std::min(b, len);
  end = std::min(end, len);
  *off = b;
  *plen = end - b;
}

void ArenaOp::phaseA(size_t j, int par) {
  const size_t lo = j * step_, len = std::min(step_, total_ - lo);
  char* mine = arena_->buf(me_, par);
  if (ring_) {
    stageRing(base_ + round_);
    return;
  }
  if (j == 0)
    arena_->setDesc(base_ + round_, descWord0(args_, dt_), args_.count, rec_ ? rec_->stamp : 0,
                    direct_ ? send_ : nullptr);
  if (direct_) return;  // the readers copy from send_ in B
  switch (args_.type) {
    case CollType::AllReduce:
    case CollType::Reduce:
      if (oneShot_) {
        // Up to 16 bytes ride in the line that carries the flag.
        copy(inline_ ? arena_->inlineData(me_, base_ + round_) : mine, send_ + lo, len);
        break;
      }
      for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        size_t off, pl;
        part(len, p, &off, &pl);
        copy(mine + off, send_ + lo + off, pl);
      }
      break;
    case CollType::Broadcast:
      if (me_ == args_.root) {
        copy(mine, send_ + lo, len);
        if (!args_.inPlace) copy(recv_ + lo, send_ + lo, len);
      }
      break;
    case CollType::AllGather:
      copy(mine, send_ + lo, len);
      break;
    case CollType::ReduceScatter:
    case CollType::AllToAll:
      for (int p = 0; p < n_; ++p)
        if (p != me_) copy(mine + p * step_, send_ + p * total_ + lo, len);
      break;
    default:
      break;
  }
}

Status ArenaOp::phaseB(size_t j, int par) {
  const size_t lo = j * step_, len = std::min(step_, total_ - lo);
  const size_t e = args_.eltSize;
  if (j == 0 && waitsInB()) {
    // Each rank's call, as it described it for this round. A ring reader
    // compares with the root only (any rank that differs from the root
    // sees it); the others compare with everyone.
    const uint64_t g = base_ + round_;
    const uint64_t w0 = descWord0(args_, dt_), w1 = args_.count;
    for (int p = ring_ ? args_.root : 0; p < (ring_ ? args_.root + 1 : n_); ++p) {
      uint64_t stamp = 0;
      const uint64_t* d = arena_->descOf(p, g, &stamp, ring_);
      if (rec_ && d) rec_->stamp = telemetry::laterStamp(rec_->stamp, stamp);
      if (d && d[0] == w0 && d[1] == w1) continue;
      return invalidUsage(strFormat(
          "mismatched collectives at %s on rank %d: %s called %s (shm arena)", describe().c_str(),
          me_, arena_->describe(p).c_str(),
          d ? describeDesc(d[0], d[1]).c_str() : "something that runs no arena round here"));
    }
  }
  if (direct_) return directB(par);
  const void* srcsInline[16];
  std::vector<const void*> srcsHeap;
  const void** srcs = srcsInline;
  if (n_ > 16) {
    srcsHeap.resize(n_);
    srcs = srcsHeap.data();
  }
  switch (args_.type) {
    case CollType::AllReduce:
    case CollType::Reduce: {
      if (oneShot_) {
        reduceOneShot(par);
        break;
      }
      size_t off, pl;
      part(len, me_, &off, &pl);
      if (!pl) break;
      for (int p = 0; p < n_; ++p)
        srcs[p] = p == me_ ? static_cast<const void*>(send_ + lo + off) : arena_->buf(p, par) + off;
      char* res = arena_->buf(me_, 2 + par) + off;
      reduceHostN(res, srcs, n_, pl / e, dt_, args_.op);
      if (args_.op == WEFT_AVG) divideByCount(res, pl / e, dt_, n_);
      if (args_.type == CollType::AllReduce || me_ == args_.root) output(recv_ + lo + off, res, pl);
      break;
    }
    case CollType::Broadcast:
      if (me_ != args_.root)
        output(recv_ + lo,
               ring_ ? arena_->ringSlot(args_.root, base_ + round_)->data(len)
                     : arena_->buf(args_.root, par),
               len);
      break;
    case CollType::AllGather:
      for (int p = 0; p < n_; ++p) {
        uint8_t* dst = recv_ + p * total_ + lo;
        output(dst, p == me_ ? send_ + lo : reinterpret_cast<const uint8_t*>(arena_->buf(p, par)),
               len);
      }
      break;
    case CollType::ReduceScatter: {
      for (int p = 0; p < n_; ++p)
        srcs[p] = p == me_ ? static_cast<const void*>(send_ + me_ * total_ + lo)
                           : arena_->buf(p, par) + me_ * step_;
      // In place, recv is my block of send: write it directly only where
      // the kernel allows (dst == srcs[0]).
      const bool direct = !args_.inPlace || me_ == 0;
      char* tmp = arena_->buf(me_, 2 + par);
      void* dst = direct ? static_cast<void*>(recv_ + lo) : tmp;
      reduceHostN(dst, srcs, n_, len / e, dt_, args_.op);
      if (args_.op == WEFT_AVG) divideByCount(dst, len / e, dt_, n_);
      if (!direct) copy(recv_ + lo, tmp, len);
      break;
    }
    case CollType::AllToAll:
      for (int p = 0; p < n_; ++p) {
        uint8_t* dst = recv_ + p * total_ + lo;
        if (p == me_)
          output(dst, send_ + p * total_ + lo, len);
        else
          output(dst, arena_->buf(p, par) + me_ * step_, len);
      }
      break;
    default:
      break;
  }
  return Status::ok();
}

Status ArenaOp::directB(int par) {
  const size_t blk = total_;
  if (args_.type == CollType::Broadcast) {
    if (me_ == args_.root) {
      if (!args_.inPlace) copy(recv_, send_, blk);
      return Status::ok();
    }
    return arena_->readFrom(args_.root, arena_->addr(args_.root, par), recv_, blk);
  }
  // allgather: every rank's block; alltoall: my block of every rank's input.
  const bool a2a = args_.type == CollType::AllToAll;
  const size_t mine = a2a ? static_cast<size_t>(me_) * blk : 0;
  for (int p = 0; p < n_; ++p) {
    uint8_t* dst = recv_ + static_cast<size_t>(p) * blk;
    if (p == me_) {
      copy(dst, send_ + mine, blk);
      continue;
    }
    WEFT_RETURN_IF_ERROR(arena_->readFrom(p, arena_->addr(p, par) + mine, dst, blk));
  }
  return Status::ok();
}

void ArenaOp::phaseC(size_t j, int par) {
  if (direct_) return;  // C only waits: every rank has read my buffer
  const size_t lo = j * step_, len = std::min(step_, total_ - lo);
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    size_t off, pl;
    part(len, p, &off, &pl);
    output(recv_ + lo + off, arena_->buf(p, 2 + par) + off, pl);
  }
}

void ArenaOp::output(void* dst, const void* src, size_t n) const {
  if (!n || dst == src) return;
  if (streamOut_)
    copyHostStreaming(dst, src, n);
  else
    memcpy(dst, src, n);
}

bool ArenaOp::progress(Status* st, bool* moved) {
  while (round_ < rounds_) {
    const uint64_t g = base_ + round_;
    const int par = static_cast<int>(g & 1);
    if (stage_ == 0) {
      // See gateOfA: the buffers this round writes are free once every
      // rank published the phase it returns.
      const uint64_t gate = gateOfA(g);
      if (gate && !arena_->reached(gate, nullptr)) return false;
      const uint64_t t0 = timed_ ? nowNs() : 0;
      phaseA(round_, par);
      if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
      if (rec_) rec_->sent[tx_] += stagedBytes(round_);
      arena_->publish(2 * g + 1);
      stage_ = 1;
      *moved = true;
    }
    if (stage_ == 1) {
      // A ring reader may go as soon as the root's slot names this round
      // (one cache line when the root is ahead); else it waits for the flag.
      if (waitsInB() && !ringReady(g) && !arena_->reached(2 * g + 1, nullptr, waitRank()))
        return false;
      const uint64_t t0 = timed_ ? nowNs() : 0;
      if (timed_ && !rec_->firstByteNs) rec_->firstByteNs = t0;
      Status bs = phaseB(round_, par);
      if (timed_)
        rec_->addWork(reduces() ? telemetry::SpanKind::Reduce : telemetry::SpanKind::Copy, t0,
                      nowNs(), spans_);
      if (bs.isError()) {
        *st = bs;
        return true;
      }
      // B's flag is only waited for by a C phase (on some rank); without
      // one, A(g+1)'s flag tells the others that B(g) is done.
      if (anyC()) arena_->publish(2 * g + 2);
      stage_ = hasC() ? 2 : 0;
      if (stage_ == 0) ++round_;
      *moved = true;
      continue;
    }
    if (!arena_->reached(2 * g + 2, nullptr)) return false;
    const uint64_t t0 = timed_ ? nowNs() : 0;
    phaseC(round_, par);
    if (timed_) rec_->addWork(telemetry::SpanKind::Copy, t0, nowNs(), spans_);
    stage_ = 0;
    ++round_;
    *moved = true;
  }
  return true;
}

void ArenaOp::waitingFor(std::vector<int>* ranks) const {
  if (round_ < rounds_) arena_->behind(target(), ranks, stage_ == 1 ? waitRank() : -1);
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
      stage_ == 1 ? waitRank() : -1);
}

void ArenaOp::reduceOneShot(int par) {
  const uint64_t g = base_ + round_;
  const void* srcsInline[16];
  std::unique_ptr<const void*[]> srcsHeap;
  const void** srcs = srcsInline;
  if (n_ > 16) {
    srcsHeap.reset(new const void*[n_]);
    srcs = srcsHeap.get();
  }
  for (int p = 0; p < n_; ++p) srcs[p] = inline_ ? arena_->inlineData(p, g) : arena_->buf(p, par);
  if (!recv_) return;  // reduce is never one-shot; keep it safe anyway
  const size_t count = total_ / args_.eltSize;
  reduceHostN(recv_, srcs, n_, count, dt_, args_.op);
  if (args_.op == WEFT_AVG) divideByCount(recv_, count, dt_, n_);
}

Status ArenaOp::runOneShot(double timeoutS, const std::atomic<bool>* cancel) {
  // The same round as progress() runs for it, in a third of the
  // instructions: a small allreduce is mostly this function.
  const uint64_t g = base_;
  const int par = static_cast<int>(g & 1);
  const uint64_t gate = gateOfA(g);
  if (gate && !arena_->reached(gate, nullptr)) WEFT_RETURN_IF_ERROR(waitTarget(timeoutS, cancel));
  const uint64_t w0 = descWord0(args_, dt_), w1 = args_.count;
  arena_->setDesc(g, w0, w1, rec_ ? rec_->stamp : 0);
  // Up to 16 bytes ride in the line that carries the flag.
  memcpy(inline_ ? arena_->inlineData(me_, g) : arena_->buf(me_, par), send_, total_);
  if (rec_) rec_->sent[tx_] += total_;
  arena_->publish(2 * g + 1);
  stage_ = 1;
  if (!arena_->reached(2 * g + 1, nullptr)) WEFT_RETURN_IF_ERROR(waitTarget(timeoutS, cancel));
  for (int p = 0; p < n_; ++p) {
    uint64_t stamp = 0;
    const uint64_t* d = arena_->descOf(p, g, &stamp);
    if (!d || d[0] != w0 || d[1] != w1) {
      // phaseB finds the mismatch again and says what it is.
      Status bs = phaseB(0, par);
      if (bs.isOk()) {
        stage_ = 0;
        round_ = 1;
      }
      return bs;
    }
    if (rec_) rec_->stamp = telemetry::laterStamp(rec_->stamp, stamp);
  }
  reduceOneShot(par);
  stage_ = 0;
  round_ = 1;
  return Status::ok();
}

void ArenaOp::stageRing(uint64_t g) {
  // Every rank describes the round in its own ring slot; the root also
  // stages the data there (a ring broadcast is one round of total_ bytes).
  shm::Arena::RingSlot* s = arena_->ringSlot(me_, g);
  s->desc[0] = descWord0(args_, dt_);
  s->desc[1] = args_.count;
  s->stamp = rec_ ? rec_->stamp : 0;
  if (me_ == args_.root) {
    copy(s->data(total_), send_, total_);
    if (!args_.inPlace) copy(recv_, send_, total_);
  }
  s->round.store(g, std::memory_order_release);
}

Status ArenaOp::runRing(double timeoutS, const std::atomic<bool>* cancel) {
  // The round progress() runs for a ring broadcast: A describes the call in
  // my ring slot (the root also stages the data there), publish; a reader
  // then waits for the root's slot, compares calls and copies the data out.
  const uint64_t g = base_;
  const uint64_t gate = gateOfA(g);
  if (gate && !arena_->reached(gate, nullptr)) WEFT_RETURN_IF_ERROR(waitTarget(timeoutS, cancel));
  const bool root = me_ == args_.root;
  stageRing(g);
  const shm::Arena::RingSlot* s = arena_->ringSlot(me_, g);
  if (root && rec_) rec_->sent[tx_] += total_;
  arena_->publish(2 * g + 1);
  if (!root) {
    stage_ = 1;
    const shm::Arena::RingSlot* r = arena_->ringSlot(args_.root, g);
    if (r->round.load(std::memory_order_acquire) != g &&
        !arena_->reached(2 * g + 1, nullptr, args_.root))
      WEFT_RETURN_IF_ERROR(waitTarget(timeoutS, cancel));
    // The root's call as its slot describes it (Arena::descOf's ringFirst).
    if (r->round.load(std::memory_order_acquire) != g || r->desc[0] != s->desc[0] ||
        r->desc[1] != s->desc[1]) {
      // phaseB finds the mismatch again and says what it is.
      Status bs = phaseB(0, static_cast<int>(g & 1));
      if (bs.isOk()) {
        stage_ = 0;
        round_ = 1;
      }
      return bs;
    }
    if (rec_) rec_->stamp = telemetry::laterStamp(rec_->stamp, r->stamp);
    copy(recv_, r->data(total_), total_);
  }
  stage_ = 0;
  round_ = 1;
  return Status::ok();
}

Status ArenaOp::runRounds(double timeoutS, const std::atomic<bool>* cancel) {
  for (;;) {
    Status st;
    bool moved = false;
    if (progress(&st, &moved)) return st;
    st = waitTarget(timeoutS, cancel);
    if (st.isError()) return st;
  }
}

}  // namespace weft
