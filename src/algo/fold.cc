// Fold: the bandwidth-minded reductions for reproducible calls
// (CollArgs::repro, docs/reproducibility.md). The vector is cut into n
// blocks, block q owned by rank q. Every rank sends each other rank its
// piece of that rank's block, and each owner folds the n pieces of its block
// in rank order with one Fold step per chunk (the modes' arithmetic,
// kernels/cpu/fold.h), so each element's result depends only on the n
// values at that element. Then:
//
//   allreduce:      the blocks circulate as in a ring allgather;
//   reduce:         every owner sends its block to the root;
//   reduce_scatter: block q is rank q's result, nothing more.
//
// Gather-fold (allreduce, small messages): every rank gathers every rank's
// vector with a Bruck allgather (ceil(log2 n) rounds instead of direct's
// n-1 messages) into scratch and folds all n itself; (n-1) * N received per
// rank, n * N of scratch.
//
// Cost (N bytes, n ranks): each rank sends and receives (n-1)/n * N in the
// scatter (to and from n-1 peers at once) and folds N/n * n; allreduce
// adds the ring allgather's (n-1)/n * N over n-1 steps, reduce (n-1)/n * N
// into the root. The same bytes as a ring, in fewer, wider rounds.
// Scratch: `slots` groups of n-1 chunks (fold_groups.h), and for reduce on
// a rank other than the root its block.
#include <algorithm>

#include "algo/fold_groups.h"
#include "algo/ring_layout.h"
#include "algo/step_util.h"

namespace weft {
namespace {

BufRef at(BufRef base, size_t off) { return BufRef{base.buf, base.off + off}; }

struct Scatter {
  std::vector<uint32_t> producer;  // the fold of each chunk of this rank's block
  std::vector<uint32_t> lastRead;  // the send that read each chunk of the others' blocks
};

// The scatter and the folds: chunk j of block q goes from every rank to q;
// the fold of this rank's chunk j writes `dst` + its offset in the block.
// `src` is the buffer the pieces are read from (the send buffer, laid out
// as L says).
Scatter addScatterFold(const RingLayout& L, const BuildParams& p, BufRef dst, Schedule* s) {
  const int n = p.nranks, r = p.rank;
  Scatter sc;
  sc.producer.assign(L.n * L.chunksPerSeg, Schedule::kNoStep);
  sc.lastRead.assign(L.n * L.chunksPerSeg, Schedule::kNoStep);
  FoldGroups groups(p, L.chunkElems * L.elt, s);
  for (size_t j = 0; j < L.chunksPerSeg; ++j) {
    for (int k = 1; k < n; ++k) {
      const int q = mod(r + k, n);
      if (size_t c = L.chunkCnt(q, j))
        sc.lastRead[L.index(q, j)] =
            s->add(sendStep(q, sendAt(L.chunkOff(q, j) * L.elt), c * L.elt));
    }
    if (size_t c = L.chunkCnt(r, j)) {
      const size_t inBlock = (L.chunkOff(r, j) - L.segOff[r]) * L.elt;
      sc.producer[L.index(r, j)] =
          groups.fold(p, sendAt(L.chunkOff(r, j) * L.elt), at(dst, inBlock), c * L.elt, {}, s);
    }
  }
  return sc;
}

}  // namespace

void buildFoldAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Fold);
  const size_t bytes = a.count * a.eltSize;
  const int r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  const RingLayout L = RingLayout::even(a.count, p.nranks, a.eltSize, p.chunkBytes);
  const BufRef own = recvAt(L.segOff[r] * a.eltSize);
  Scatter sc = addScatterFold(L, p, own, s);
  // In place, the receives of the allgather overwrite what the scatter's
  // sends read: they wait for them (out of place nothing reads recvbuf).
  if (!a.inPlace) sc.lastRead.clear();
  addRingAllGather(L, p, recvAt(0), r, sc.producer, sc.lastRead, own, s);
}

void buildGatherFoldAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::GatherFold);
  const size_t bytes = a.count * a.eltSize;
  if (trivialSchedule(a, p, bytes, s)) return;
  // Every vector, rank q's at q * bytes (this rank's copied in first, out of
  // place into scratch), then one fold of them all into recvbuf. In place
  // the fold overwrites the input, so it waits for every step (the copy
  // and the sends read the input; they are few: small messages).
  CollArgs g = a;
  g.type = CollType::AllGather;
  g.inPlace = false;
  g.repro = Repro::Off;
  Schedule gather;
  buildBruckAllGather(g, p, &gather);
  const size_t at = s->scratchBytes;
  s->scratchBytes += bytes * static_cast<size_t>(p.nranks);
  const uint32_t first = s->append(gather, scratchAt(at));
  const uint32_t last = static_cast<uint32_t>(s->steps.size());
  s->add(foldStep(sendAt(0), scratchAt(at), recvAt(0), bytes));
  for (uint32_t i = first; i < last; ++i) s->addDep(last, i);
}

void buildFoldReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Fold);
  const size_t blk = a.count * a.eltSize;
  if (trivialSchedule(a, p, blk, s)) return;
  const RingLayout L = RingLayout::blocks(a.count, p.nranks, a.eltSize, p.chunkBytes);
  // In place recvbuf is this rank's block of sendbuf: each fold writes the
  // piece it reads, and no send reads this block.
  addScatterFold(L, p, recvAt(0), s);
}

void buildFoldReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Fold);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  const RingLayout L = RingLayout::even(a.count, n, a.eltSize, p.chunkBytes);
  if (r == a.root) {
    Scatter sc = addScatterFold(L, p, recvAt(L.segOff[r] * a.eltSize), s);
    // The owners' blocks, into place; in place after the sends that read them.
    for (int k = 1; k < n; ++k) {
      const int q = mod(r + k, n);
      for (size_t j = 0; j < L.chunksPerSeg; ++j)
        if (size_t c = L.chunkCnt(q, j))
          s->add(recvStep(q, recvAt(L.chunkOff(q, j) * a.eltSize), c * a.eltSize),
                 {a.inPlace ? sc.lastRead[L.index(q, j)] : Schedule::kNoStep});
    }
    return;
  }
  // The block is folded into scratch (recvbuf is the root's alone), then
  // sent to the root chunk by chunk as each fold finishes.
  const size_t blockAt = s->scratchBytes;
  s->scratchBytes += L.segCnt[r] * a.eltSize;
  Scatter sc = addScatterFold(L, p, scratchAt(blockAt), s);
  for (size_t j = 0; j < L.chunksPerSeg; ++j)
    if (size_t c = L.chunkCnt(r, j))
      s->add(sendStep(a.root, scratchAt(blockAt + (L.chunkOff(r, j) - L.segOff[r]) * a.eltSize),
                      c * a.eltSize),
             {sc.producer[L.index(r, j)]});
}

}  // namespace weft
