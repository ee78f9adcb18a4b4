// Direct ("one-shot") collectives: every message goes straight from the
// rank that has the data to the rank that needs it, all posted at once.
//
//   allreduce:      every rank sends its whole vector to every other rank and
//                   reduces the n vectors itself, in rank order 0..n-1, so
//                   all ranks compute bit for bit the same result.
//   reduce_scatter: rank r sends block q of its input to rank q; rank q
//                   reduces the n blocks it gets in rank order.
//   reduce:         every rank sends its vector to the root, which reduces
//                   them in rank order.
//   allgather:      every rank sends its block to every other rank.
//   broadcast:      the root sends the vector to every other rank.
//   alltoall:       rank r sends block q to rank q.
//
// Reductions run as a left fold x0 op x1 op ... op x(n-1): x0 is received
// straight into the accumulator, each later vector into one of `slots`
// receive slots, so memory stays a few chunks whatever n is (receives wait
// for a free slot; senders never wait for anything). Intermediate sums go to
// recvbuf, or, in place, to a ring of `slots` accumulator chunks in scratch
// so that the input is intact until every send and every use of it is done.
// A reproducible call (CollArgs::repro) receives the n-1 vectors of a chunk
// into a group of slots instead and folds them with one Fold step (the
// modes' arithmetic, kernels/cpu/fold.h): `slots` groups of n-1 chunks.
//
// Cost (N bytes: the vector; for allgather, reduce_scatter and alltoall all n
// blocks): one step. allreduce sends and receives (n-1) * N bytes per rank
// and reduces (n-1) * N; reduce_scatter, allgather and alltoall (n-1)/n * N;
// broadcast and reduce (n-1) * N at the root. Latency-optimal, bandwidth
// poor: the choice for small messages, or few ranks.
// Scratch: reductions `slots` chunks (twice that in place); in-place
// alltoall `slots` chunks; the others none.
#include <algorithm>

#include "algo/fold_groups.h"
#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

// Receive slots and, in place, accumulator chunks in scratch.
struct Slots {
  int count = 1;
  size_t bytes = 0;
  std::vector<uint32_t> user;  // the step that last used each slot
  size_t next = 0;
  size_t base = 0;  // scratch offset of slot 0

  Slots(const BuildParams& p, size_t slotBytes, Schedule* s) {
    count = std::max(1, p.slots);
    bytes = slotBytes;
    user.assign(count, kNone);
    base = s->scratchBytes;
    s->scratchBytes += bytes * count;
  }
  int take() { return static_cast<int>(next++ % count); }
  BufRef at(int slot) const { return scratchAt(base + slot * bytes); }
};

// The left fold of the n contributions to one chunk of `len` bytes, in rank
// order: x_q is received from rank q, except x_r = `own`. The result goes to
// `dst` and `finalDeps` (e.g. sends of the chunk that read dst in place) are
// done before dst is last written. Returns the step that wrote the result.
struct Fold {
  const CollArgs& a;
  const BuildParams& p;
  const bool ordered;  // a reproducible call: FoldGroups instead of pairwise steps
  Slots slots;
  Slots acc;  // in place only
  FoldGroups groups;
  Schedule* s;

  Fold(const CollArgs& args, const BuildParams& params, size_t slotBytes, Schedule* sch)
      : a(args), p(params), ordered(args.repro != Repro::Off),
        slots(params, ordered ? 0 : slotBytes, sch),
        acc(params, args.inPlace && !ordered ? slotBytes : 0, sch),
        groups(params, ordered ? slotBytes : 0, sch), s(sch) {}

  uint32_t chunk(BufRef own, BufRef dst, size_t len, const std::vector<uint32_t>& finalDeps) {
    if (ordered) return groups.fold(p, own, dst, len, finalDeps, s);
    const int n = p.nranks, r = p.rank;
    // Where the running sum lives before its last step.
    int accSlot = -1;
    BufRef sum = dst;
    if (a.inPlace) {
      accSlot = acc.take();
      sum = acc.at(accSlot);
    }
    const uint32_t accFree = a.inPlace ? acc.user[accSlot] : kNone;
    uint32_t last = kNone;
    BufRef left = own;  // x0
    if (r != 0) {
      last = s->add(recvStep(0, sum, len), {accFree});
      left = sum;
    }
    for (int q = 1; q < n; ++q) {
      BufRef right = own;
      uint32_t got = kNone;
      int slot = -1;
      if (q != r) {
        slot = slots.take();
        right = slots.at(slot);
        got = s->add(recvStep(q, right, len), {slots.user[slot]});
      }
      const bool isLast = q == n - 1;
      last = s->add(reduceStep(left, right, isLast ? dst : sum, len), {got, last, accFree});
      if (isLast)
        for (uint32_t d : finalDeps) s->addDep(last, d);
      if (slot >= 0) slots.user[slot] = last;
      left = sum;
    }
    if (a.inPlace) acc.user[accSlot] = last;
    if (a.op == WEFT_AVG) last = s->add(divideStep(dst, len), {last});
    return last;
  }
};

// The order in which a rank meets its peers: round k of a round-robin
// tournament (the circle method), so that in every round the ranks pair up
// and both ranks of a pair list their exchange at the same position.
// Returns the partner of r in round k (0 <= k < rounds) or -1 (idle).
int roundRobinRounds(int n) { return n % 2 ? n : n - 1; }
int roundRobinPartner(int n, int k, int r) {
  if (n % 2) {
    const int q = mod(2 * k - r, n);
    return q == r ? -1 : q;
  }
  const int m = n - 1;  // rank n-1 meets rank k in round k
  if (r == m) return k;
  const int q = mod(2 * k - r, m);
  return q == r ? m : q;
}

}  // namespace

void buildDirectAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  Fold fold(a, p, std::min(ch.chunk, bytes), s);
  std::vector<uint32_t> sent;
  for (size_t j = 0; j < ch.count(); ++j) {
    sent.clear();
    for (int k = 1; k < n; ++k) sent.push_back(s->add(sendStep(mod(r + k, n), sendAt(ch.off(j)), ch.len(j))));
    if (!a.inPlace) sent.clear();  // the sends read sendbuf, the fold writes recvbuf
    fold.chunk(sendAt(ch.off(j)), recvAt(ch.off(j)), ch.len(j), sent);
  }
}

void buildDirectReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, blk, s)) return;
  Chunker ch(blk, p.chunkBytes, a.eltSize);
  Fold fold(a, p, std::min(ch.chunk, blk), s);
  for (size_t j = 0; j < ch.count(); ++j) {
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n);
      s->add(sendStep(to, sendAt(to * blk + ch.off(j)), ch.len(j)));
    }
    // In place recvbuf is this rank's own block of the input, which no send reads.
    fold.chunk(sendAt(r * blk + ch.off(j)), recvAt(ch.off(j)), ch.len(j), {});
  }
}

void buildDirectReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t bytes = a.count * a.eltSize;
  const int r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  if (r != a.root) {
    for (size_t j = 0; j < ch.count(); ++j) s->add(sendStep(a.root, sendAt(ch.off(j)), ch.len(j)));
    return;
  }
  Fold fold(a, p, std::min(ch.chunk, bytes), s);
  for (size_t j = 0; j < ch.count(); ++j)
    fold.chunk(sendAt(ch.off(j)), recvAt(ch.off(j)), ch.len(j), {});
}

void buildDirectAllGather(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(r * blk), blk));
  Chunker ch(blk, p.chunkBytes, a.eltSize);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    for (size_t j = 0; j < ch.count(); ++j) {
      s->add(sendStep(to, sendAt(ch.off(j)), ch.len(j)));
      s->add(recvStep(from, recvAt(from * blk + ch.off(j)), ch.len(j)));
    }
  }
}

void buildDirectBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (bytes == 0) return;
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  if (r != a.root) {
    for (size_t j = 0; j < ch.count(); ++j)
      s->add(recvStep(a.root, recvAt(ch.off(j)), ch.len(j)));
    return;
  }
  for (size_t j = 0; j < ch.count(); ++j)
    for (int k = 1; k < n; ++k) s->add(sendStep(mod(r + k, n), sendAt(ch.off(j)), ch.len(j)));
  // The root's own copy last: the sends (which read sendbuf too) go first.
  if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), bytes));
}

// Out of place every exchange is independent. In place a block may be
// overwritten only after it was sent, so each incoming chunk lands in a
// slot and is copied into place once the outgoing chunk of the same block
// is done; peers are met in round-robin order so that slot waits cannot
// form a cycle.
void buildDirectAllToAll(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Direct);
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  if (!a.inPlace) s->add(copyStep(sendAt(r * blk), recvAt(r * blk), blk));
  if (n == 1) return;
  Chunker ch(blk, p.chunkBytes, a.eltSize);
  if (!a.inPlace) {
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n), from = mod(r - k, n);
      for (size_t j = 0; j < ch.count(); ++j) {
        s->add(sendStep(to, sendAt(to * blk + ch.off(j)), ch.len(j)));
        s->add(recvStep(from, recvAt(from * blk + ch.off(j)), ch.len(j)));
      }
    }
    return;
  }
  Slots slots(p, std::min(ch.chunk, blk), s);
  for (int k = 0; k < roundRobinRounds(n); ++k) {
    const int q = roundRobinPartner(n, k, r);
    if (q < 0) continue;
    for (size_t j = 0; j < ch.count(); ++j) {
      const size_t off = q * blk + ch.off(j);
      const uint32_t sent = s->add(sendStep(q, sendAt(off), ch.len(j)));
      const int slot = slots.take();
      const uint32_t got = s->add(recvStep(q, slots.at(slot), ch.len(j)), {slots.user[slot]});
      slots.user[slot] = s->add(copyStep(slots.at(slot), recvAt(off), ch.len(j)), {got, sent});
    }
  }
}

}  // namespace weft
