// Recursive doubling: allreduce and allgather in log2(n) exchanges.
//
// Over a power of two p ranks, at step k (k = 0..log2 p - 1) every rank
// exchanges with the rank whose index differs in bit k. Allreduce sends the
// whole vector each time and reduces what it receives, so after step k a
// rank holds the reduction over its aligned group of 2^(k+1) ranks.
// Allgather sends everything gathered so far (the blocks of its aligned
// group of 2^k ranks, one contiguous range of the receive buffer) and
// receives the partner group's blocks, doubling the data each step.
//
// Any n: with p the largest power of two <= n and e = n - p, the first 2e
// ranks fold pairwise before the doubling: even rank 2i hands its data to
// 2i+1 and sits the doubling out; 2i+1 stands for both (as index i), and the
// other ranks r >= 2e are index r - e. After the doubling, 2i+1 hands the
// result back to 2i. Because the index order follows the rank order, the
// blocks held by an aligned group of indices stay one contiguous range.
//
// Two ranks per core (BuildParams::foldPairs, ranks in ring order): every
// pair folds, so each core sends one message to its partner core per
// doubling step instead of two. 4 ranks on 2 cores, 8 B-2 KiB: 35-36 us ->
// 29-30 over tcp (Open MPI 44-46), 34-36 -> 30-33 over ucx (Open MPI's UCX
// PML 30-33); up to 1 MiB it beats halving-doubling too (512 KiB: 529
// against 621 us over tcp), at 4 MiB halving-doubling is ahead.
//
// Bitwise identical allreduce results: both partners of an exchange compute
// (lower group's partial) op (upper group's partial), so every rank combines
// the same values in the same order along the same butterfly.
//
// Cost (N bytes = the vector for allreduce, all n blocks for allgather,
// p = 2^floor(log2 n)):
//   allreduce: log2 p steps (+2 when n is not a power of two), each moving N
//     both ways: log2(p) * N bytes sent and received per rank, log2(p) * N
//     reduced; latency-optimal, bandwidth log2(p)/2 times the ring's.
//   allgather: log2 p steps (+2), (p-1)/p * N bytes sent and received per rank
//     in the core (folded pairs: one extra block in, N out).
// Scratch: allreduce uses `slots` receive slots of one chunk; allgather none.
#include <algorithm>

#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

// The power-of-two core of n ranks and the ranks folded into it. With
// `pairs` (BuildParams::foldPairs) every pair folds, a core of n/2.
struct Fold {
  int p2 = 1, extra = 0;  // core size 2^k <= n, and n - 2^k
  explicit Fold(int n, bool pairs = false) {
    while (2 * p2 <= n) p2 *= 2;
    if (pairs && n >= 4 && p2 == n) p2 = n / 2;
    extra = n - p2;
  }
  // This rank's index in the core, or -1 for an even rank that folded away.
  int index(int r) const {
    if (r < 2 * extra) return r % 2 ? r / 2 : -1;
    return r - extra;
  }
  int rankOf(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  // First rank (block) that core index v stands for; firstRank(p2) = n.
  int firstRank(int v) const { return v < extra ? 2 * v : v + extra; }
};

// One exchange with `peer` over recvbuf: send bytes [sx, sy), each chunk
// after the writes it reads, and receive bytes [rx, ry), logging the writes.
// Chunks go in turn (send j, then receive j) so the receive matching the
// peer's next send is always a few steps ahead: the engine looks only a
// bounded number of steps past the first unfinished one.
void exchange(int peer, size_t sx, size_t sy, size_t rx, size_t ry, const CollArgs& a,
              const BuildParams& p, std::vector<Span>* log, Schedule* s) {
  Chunker out(sy - sx, p.chunkBytes, a.eltSize), in(ry - rx, p.chunkBytes, a.eltSize);
  Span got{rx, ry, in.chunk, {}};
  for (size_t j = 0; j < std::max(out.count(), in.count()); ++j) {
    if (j < out.count()) {
      s->add(sendStep(peer, recvAt(sx + out.off(j)), out.len(j)));
      waitForWrites(*log, sx + out.off(j), sx + out.off(j) + out.len(j), s);
    }
    if (j < in.count()) got.steps.push_back(s->add(recvStep(peer, recvAt(rx + in.off(j)), in.len(j))));
  }
  if (in.count()) log->push_back(std::move(got));  // disjoint from what was sent
}

}  // namespace

void buildRecursiveDoublingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::RecursiveDoubling);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  const Fold f(n, p.foldPairs);
  const int v = f.index(r);
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  const size_t J = ch.count();
  if (v < 0) {  // folded away: hand the input to r+1, take the result back
    std::vector<uint32_t> sent(J);
    for (size_t j = 0; j < J; ++j) sent[j] = s->add(sendStep(r + 1, sendAt(ch.off(j)), ch.len(j)));
    for (size_t j = 0; j < J; ++j)  // in place, the result overwrites what was sent
      s->add(recvStep(r + 1, recvAt(ch.off(j)), ch.len(j)), {a.inPlace ? sent[j] : kNone});
    return;
  }
  const int nslots = std::max(1, p.slots);
  const size_t slotBytes = std::min(ch.chunk, bytes);
  s->scratchBytes = slotBytes * nslots;
  std::vector<uint32_t> slotUser(nslots, kNone);
  size_t nextSlot = 0;
  // producer[j]: the last write of chunk j into recvbuf (kNone: the value is
  // still the input in sendbuf).
  std::vector<uint32_t> producer(J, kNone);
  auto value = [&](size_t j) { return producer[j] == kNone ? sendAt(ch.off(j)) : recvAt(ch.off(j)); };

  // Receives chunk j from `peer` into a slot and combines it with this
  // rank's value, the lower group's partial first. `sent` is this step's
  // send of the chunk, which must be done before recvbuf is overwritten.
  auto receiveAndReduce = [&](int peer, bool peerIsLower, size_t j, uint32_t sent) {
    const int slot = static_cast<int>(nextSlot++ % nslots);
    const BufRef tmp = scratchAt(slot * slotBytes);
    const uint32_t got = s->add(recvStep(peer, tmp, ch.len(j)), {slotUser[slot]});
    const BufRef mine = value(j);
    const bool overwritesSent = producer[j] != kNone || a.inPlace;
    const uint32_t red = s->add(reduceStep(peerIsLower ? tmp : mine, peerIsLower ? mine : tmp,
                                           recvAt(ch.off(j)), ch.len(j)),
                                {got, producer[j], overwritesSent ? sent : kNone});
    slotUser[slot] = red;
    producer[j] = red;
  };

  if (r < 2 * f.extra)  // odd rank of a folded pair: absorb rank r-1 first
    for (size_t j = 0; j < J; ++j) receiveAndReduce(r - 1, true, j, kNone);
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int pv = v ^ mask, peer = f.rankOf(pv);
    for (size_t j = 0; j < J; ++j) {
      const uint32_t sent = s->add(sendStep(peer, value(j), ch.len(j)), {producer[j]});
      receiveAndReduce(peer, pv < v, j, sent);
    }
  }
  for (size_t j = 0; j < J; ++j) {
    if (a.op == WEFT_AVG)
      producer[j] = s->add(divideStep(recvAt(ch.off(j)), ch.len(j)), {producer[j]});
    if (r < 2 * f.extra) s->add(sendStep(r - 1, recvAt(ch.off(j)), ch.len(j)), {producer[j]});
  }
}

void buildRecursiveDoublingAllGather(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::RecursiveDoubling);
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  std::vector<Span> written;  // every write into recvbuf, for the sends that read it
  if (!a.inPlace)
    written.push_back(Span{r * blk, (r + 1) * blk, blk,
                           {s->add(copyStep(sendAt(0), recvAt(r * blk), blk))}});
  if (n == 1) return;
  const Fold f(n);
  const int v = f.index(r);
  if (v < 0) {  // folded away: own block to r+1, all the others back from it
    Chunker ch(blk, p.chunkBytes, a.eltSize);
    for (size_t j = 0; j < ch.count(); ++j) {
      BufRef src = a.inPlace ? recvAt(r * blk + ch.off(j)) : sendAt(ch.off(j));
      s->add(sendStep(r + 1, src, ch.len(j)));
    }
    exchange(r + 1, 0, 0, 0, r * blk, a, p, &written, s);
    exchange(r + 1, 0, 0, (r + 1) * blk, n * blk, a, p, &written, s);
    return;
  }
  if (r < 2 * f.extra) exchange(r - 1, 0, 0, (r - 1) * blk, r * blk, a, p, &written, s);
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int mine = v & ~(mask - 1), theirs = mine ^ mask;
    exchange(f.rankOf(v ^ mask), f.firstRank(mine) * blk, f.firstRank(mine + mask) * blk,
             f.firstRank(theirs) * blk, f.firstRank(theirs + mask) * blk, a, p, &written, s);
  }
  if (r < 2 * f.extra) {  // hand everything but its own block back to r-1
    exchange(r - 1, 0, (r - 1) * blk, 0, 0, a, p, &written, s);
    exchange(r - 1, r * blk, n * blk, 0, 0, a, p, &written, s);
  }
}

}  // namespace weft
