// Halving-doubling (Rabenseifner): reduce_scatter by recursive halving, then
// (for allreduce) allgather by recursive doubling.
//
// Over a power of two p ranks, the vector is cut into p segments, segment v
// ending on rank v. Reduce-scatter, distance d = p/2, p/4, ..., 1: a rank
// holds the partial sums of the segments of its aligned group of 2d ranks;
// it keeps the half of that range that contains its own segment, sends the
// other half to the rank d away and adds what that rank sends for the kept
// half. After log2 p steps each rank holds its segment fully reduced. The
// allgather runs the same exchanges in reverse order (d = 1, 2, ..., p/2),
// each rank sending every segment it has and receiving as many.
//
// Any n: with p the largest power of two <= n and e = n - p, even rank 2i
// (i < e) first sends its whole input to 2i+1, which adds it and stands for
// both (core index i); ranks r >= 2e are index r - e. At the end 2i+1 hands
// 2i its result. For reduce_scatter the segment of index v is the blocks of
// the ranks it stands for (ranks 2v and 2v+1, or rank v + e), contiguous
// because index order follows rank order; for allreduce the p segments are
// near-equal parts of the vector, so counts need not divide by anything.
//
// Every element is reduced along one tree and on one rank, then copied, so
// allreduce results are bitwise identical on all ranks.
//
// Cost (N bytes: the vector for allreduce, all n blocks for reduce_scatter):
//   allreduce: 2 log2 p steps (+2 when n is not a power of two), each rank
//     sends and receives 2(p-1)/p * N bytes and reduces (p-1)/p * N; folded
//     pairs add N each way.
//   reduce_scatter: log2 p steps (+2), (p-1)/p * N bytes per rank.
// Scratch: `slots` receive slots of one chunk; reduce_scatter also keeps its
// partial sums there (half the input, the whole input on a folded pair's
// odd rank), since the input is not to be modified.
#include <algorithm>

#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

// One rank's halving-doubling schedule. Byte offsets x are positions in the
// full vector (the input's layout): the input of x is sendAt(x), its partial
// sum once written is at(x) (recvbuf for allreduce, a scratch window for
// reduce_scatter). writes_ and reads_ log which steps wrote and read which
// chunks of at(), so every step waits for exactly what it touches.
class Builder {
 public:
  Builder(const CollArgs& a, const BuildParams& p, Schedule* s)
      : a_(a), p_(p), s_(s), n_(p.nranks), r_(p.rank) {
    while (2 * p2_ <= n_) p2_ *= 2;
    extra_ = n_ - p2_;
    v_ = r_ < 2 * extra_ ? (r_ % 2 ? r_ / 2 : -1) : r_ - extra_;
  }

  void allReduce() {
    const size_t bytes = a_.count * a_.eltSize;
    for (int v = 0; v <= p2_; ++v) seg_.push_back(partOffset(a_.count, p2_, v) * a_.eltSize);
    acc_ = BufId::Recv;
    setSlots(bytes);
    if (v_ < 0) return foldedAway(bytes, bytes, 0);
    halve(bytes);
    divideOwnSegment();
    for (int mask = 1; mask < p2_; mask *= 2) {
      const int mine = v_ & ~(mask - 1), theirs = mine ^ mask;
      exchange(rankOf(v_ ^ mask), seg_[mine], seg_[mine + mask], seg_[theirs],
               seg_[theirs + mask], false, false);
    }
    if (r_ < 2 * extra_) sendRange(r_ - 1, 0, bytes);
  }

  void reduceScatter() {
    const size_t blk = a_.count * a_.eltSize, total = blk * n_;
    for (int v = 0; v <= p2_; ++v) seg_.push_back(firstRank(v) * blk);
    acc_ = BufId::Scratch;
    setSlots(total);
    if (v_ < 0) return foldedAway(total, blk, r_ * blk);
    // Partial sums after the first step cover the kept half (everything on
    // an odd folded rank, which adds its partner's whole input first).
    size_t lo = 0, hi = total;
    if (r_ >= 2 * extra_) {
      const int half = p2_ / 2, base = v_ & half;
      lo = seg_[base];
      hi = seg_[base + half];
    }
    accBase_ = s_->scratchBytes;
    accLo_ = lo;
    s_->scratchBytes += hi - lo;
    halve(total);
    divideOwnSegment();
    // The own block goes to recvbuf; an odd folded rank sends r-1 its block.
    if (r_ < 2 * extra_) sendRange(r_ - 1, (r_ - 1) * blk, r_ * blk);
    Chunker ch(blk, p_.chunkBytes, a_.eltSize);
    for (size_t j = 0; j < ch.count(); ++j) {
      const size_t x = r_ * blk + ch.off(j);
      s_->add(copyStep(at(x), recvAt(ch.off(j)), ch.len(j)));
      waitForWrites(writes_, x, x + ch.len(j), s_);
    }
  }

 private:
  int rankOf(int v) const { return v < extra_ ? 2 * v + 1 : v + extra_; }
  int firstRank(int v) const { return v < extra_ ? 2 * v : v + extra_; }

  BufRef at(size_t x) const {
    return acc_ == BufId::Recv ? recvAt(x) : scratchAt(accBase_ + x - accLo_);
  }

  void setSlots(size_t total) {
    nslots_ = std::max(1, p_.slots);
    Chunker ch(total, p_.chunkBytes, a_.eltSize);
    slotBytes_ = std::min(ch.chunk, total);
    s_->scratchBytes = slotBytes_ * nslots_;
    slotUser_.assign(nslots_, kNone);
  }

  // An even rank of a folded pair: its whole input (`total` bytes) to r+1,
  // then the `len` bytes of its result from r+1 into recvbuf. In place,
  // recvbuf is the input from byte `recvInInput` on, so each received chunk
  // waits for the sends that read it.
  void foldedAway(size_t total, size_t len, size_t recvInInput) {
    Chunker ch(total, p_.chunkBytes, a_.eltSize);
    std::vector<Span> sent{Span{0, total, ch.chunk, {}}};
    for (size_t j = 0; j < ch.count(); ++j)
      sent[0].steps.push_back(s_->add(sendStep(r_ + 1, sendAt(ch.off(j)), ch.len(j))));
    Chunker back(len, p_.chunkBytes, a_.eltSize);
    for (size_t j = 0; j < back.count(); ++j) {
      s_->add(recvStep(r_ + 1, recvAt(back.off(j)), back.len(j)));
      const size_t x = recvInInput + back.off(j);
      if (a_.inPlace) waitForWrites(sent, x, x + back.len(j), s_);
    }
  }

  // One exchange with `peer`: send [sx, sy) and receive [rx, ry), chunk by
  // chunk in turn (send j, then receive j), so that the receive matching
  // the peer's next send is always a few steps ahead: the engine looks only
  // a bounded number of steps past the first unfinished one. With `reduce`
  // each received chunk is combined with this rank's value, the lower
  // group's partial first; otherwise it is stored.
  void exchange(int peer, size_t sx, size_t sy, size_t rx, size_t ry, bool reduce,
                bool peerIsLower) {
    Chunker out(sy - sx, p_.chunkBytes, a_.eltSize), in(ry - rx, p_.chunkBytes, a_.eltSize);
    Span sent{sx, sy, out.chunk, {}}, got{rx, ry, in.chunk, {}};
    for (size_t j = 0; j < std::max(out.count(), in.count()); ++j) {
      if (j < out.count()) sent.steps.push_back(sendChunk(peer, sx + out.off(j), out.len(j)));
      if (j < in.count()) {
        const size_t off = rx + in.off(j), len = in.len(j);
        got.steps.push_back(reduce ? recvReduceChunk(peer, peerIsLower, off, len)
                                   : recvChunk(peer, off, len));
      }
    }
    // The two ranges are disjoint, so the logs are updated afterwards.
    if (out.count() && (inAcc_ || a_.inPlace)) reads_.push_back(std::move(sent));
    if (in.count()) writes_.push_back(std::move(got));
  }
  void sendRange(int peer, size_t x, size_t y) { exchange(peer, x, y, 0, 0, false, false); }

  uint32_t sendChunk(int peer, size_t off, size_t len) {
    const uint32_t i = s_->add(sendStep(peer, inAcc_ ? at(off) : sendAt(off), len));
    if (inAcc_) waitForWrites(writes_, off, off + len, s_);
    return i;
  }

  uint32_t recvChunk(int peer, size_t off, size_t len) {
    const uint32_t i = s_->add(recvStep(peer, at(off), len));
    waitForWrites(reads_, off, off + len, s_);
    return i;
  }

  // Receives into a slot, then acc = lower group's partial op upper's.
  uint32_t recvReduceChunk(int peer, bool peerIsLower, size_t off, size_t len) {
    const int slot = static_cast<int>(nextSlot_++ % nslots_);
    const BufRef tmp = scratchAt(slot * slotBytes_);
    const uint32_t got = s_->add(recvStep(peer, tmp, len), {slotUser_[slot]});
    const BufRef mine = inAcc_ ? at(off) : sendAt(off);
    const uint32_t red = s_->add(
        reduceStep(peerIsLower ? tmp : mine, peerIsLower ? mine : tmp, at(off), len), {got});
    if (inAcc_) waitForWrites(writes_, off, off + len, s_);
    waitForWrites(reads_, off, off + len, s_);
    slotUser_[slot] = red;
    return red;
  }

  // The fold (odd rank of a pair) and the halving steps; afterwards this
  // rank's segment [seg_[v], seg_[v+1]) is reduced in acc.
  void halve(size_t total) {
    if (r_ < 2 * extra_) {
      exchange(r_ - 1, 0, 0, 0, total, true, true);
      inAcc_ = true;
    }
    for (int mask = p2_ / 2; mask >= 1; mask /= 2) {
      const int base = v_ & ~(2 * mask - 1);
      const int keep = (v_ & mask) ? base + mask : base, give = keep ^ mask;
      exchange(rankOf(v_ ^ mask), seg_[give], seg_[give + mask], seg_[keep], seg_[keep + mask],
               true, (v_ ^ mask) < v_);
      inAcc_ = true;
    }
  }

  void divideOwnSegment() {
    if (a_.op != WEFT_AVG) return;
    const size_t x = seg_[v_], y = seg_[v_ + 1];
    Chunker ch(y - x, p_.chunkBytes, a_.eltSize);
    if (ch.count() == 0) return;
    Span sp{x, y, ch.chunk, {}};
    for (size_t j = 0; j < ch.count(); ++j) {
      const size_t off = x + ch.off(j), len = ch.len(j);
      sp.steps.push_back(s_->add(divideStep(at(off), len)));
      waitForWrites(writes_, off, off + len, s_);
    }
    writes_.push_back(std::move(sp));
  }

  const CollArgs& a_;
  const BuildParams& p_;
  Schedule* s_;
  const int n_, r_;
  int p2_ = 1, extra_ = 0, v_ = 0;
  std::vector<size_t> seg_;  // byte offset of segment v; seg_[p2_] = total
  BufId acc_ = BufId::Recv;
  size_t accBase_ = 0, accLo_ = 0;  // scratch acc: x lives at accBase_ + x - accLo_
  bool inAcc_ = false;              // whether values are read from acc (else input)
  std::vector<Span> writes_, reads_;
  int nslots_ = 1;
  size_t slotBytes_ = 0, nextSlot_ = 0;
  std::vector<uint32_t> slotUser_;
};

}  // namespace

void buildHalvingDoublingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::HalvingDoubling);
  const size_t bytes = a.count * a.eltSize;
  if (bytes == 0) return;
  if (p.nranks == 1) {
    if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), bytes));
    return;
  }
  Builder(a, p, s).allReduce();
}

void buildHalvingDoublingReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::HalvingDoubling);
  const size_t blk = a.count * a.eltSize;
  if (blk == 0) return;
  if (p.nranks == 1) {
    if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), blk));
    return;
  }
  Builder(a, p, s).reduceScatter();
}

}  // namespace weft
