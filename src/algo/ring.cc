// Ring algorithms: allreduce = reduce-scatter + allgather, and the two halves
// on their own.
//
// The n ranks form a ring r -> r+1. The buffer is cut into n segments and
// each segment into J chunks. In the reduce-scatter half, at step k every
// rank sends one segment to its successor and receives another from its
// predecessor, adds its own contribution, and passes the partial sum on at
// step k+1; after n-1 steps each rank holds one fully reduced segment. The
// allgather half circulates the reduced segments n-1 more steps.
//
// Pipelining: steps are listed step-major, chunk-minor, so while chunk j of
// step k is being reduced, chunks j+1.. of step k are on the wire, and the
// send of chunk j at step k+1 starts as soon as its reduction is done.
//
// Cost (bytes N, n ranks): 2(n-1) steps, each rank sends and receives
// 2(n-1)/n * N bytes and reduces (n-1)/n * N. Bandwidth-optimal; latency
// grows with n, so small messages want another algorithm.
#include <algorithm>

#include "algo/ring_layout.h"
#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

BufRef at(BufRef base, size_t off) { return BufRef{base.buf, base.off + off}; }

}  // namespace

void addRingAllGather(const RingLayout& L, const BuildParams& p, BufRef buf, int first,
                      std::vector<uint32_t>& producer, const std::vector<uint32_t>& lastRead,
                      BufRef firstSrc, Schedule* s) {
  const int n = p.nranks, r = p.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  for (int k = 0; k < n - 1; ++k) {
    const int ss = mod(first - k, n), rs = mod(first - k - 1, n);
    for (size_t j = 0; j < L.chunksPerSeg; ++j) {
      if (size_t c = L.chunkCnt(ss, j)) {
        BufRef src = k == 0 ? at(firstSrc, (L.chunkOff(ss, j) - L.segOff[ss]) * L.elt)
                            : at(buf, L.chunkOff(ss, j) * L.elt);
        s->add(sendStep(next, src, c * L.elt),
               {producer[L.index(ss, j)]});
      }
      if (size_t c = L.chunkCnt(rs, j)) {
        uint32_t w = lastRead.empty() ? kNone : lastRead[L.index(rs, j)];
        producer[L.index(rs, j)] =
            s->add(recvStep(prev, at(buf, L.chunkOff(rs, j) * L.elt), c * L.elt), {w});
      }
    }
  }
}

RingRsResult addRingReduceScatter(const RingLayout& L, const BuildParams& p, BufRef work,
                                  BufRef finalDst, bool inPlace, Schedule* s) {
  const int n = p.nranks, r = p.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t slotBytes = L.chunkElems * L.elt;
  const int nslots = std::max(1, p.slots);
  s->scratchBytes = std::max(s->scratchBytes, slotBytes * nslots);
  RingRsResult res;
  res.producer.assign(L.n * L.chunksPerSeg, kNone);
  res.lastRead.assign(L.n * L.chunksPerSeg, kNone);
  std::vector<uint32_t> slotUser(nslots, kNone);
  size_t nrecv = 0;
  for (int k = 0; k < n - 1; ++k) {
    const int ss = mod(r - k - 1, n), rs = mod(r - k - 2, n);
    for (size_t j = 0; j < L.chunksPerSeg; ++j) {
      if (size_t c = L.chunkCnt(ss, j)) {
        size_t off = L.chunkOff(ss, j) * L.elt;
        BufRef src = k == 0 ? BufRef{BufId::Send, off} : at(work, off);
        uint32_t idx = s->add(sendStep(next, src, c * L.elt),
                              {k == 0 ? kNone : res.producer[L.index(ss, j)]});
        // In place, the first send reads the receive buffer too.
        if (k > 0 || (inPlace && work.buf == BufId::Recv)) res.lastRead[L.index(ss, j)] = idx;
      }
      if (size_t c = L.chunkCnt(rs, j)) {
        size_t off = L.chunkOff(rs, j) * L.elt;
        int slot = static_cast<int>(nrecv++ % nslots);
        BufRef dst = k == n - 2 ? at(finalDst, (L.chunkOff(rs, j) - L.segOff[rs]) * L.elt)
                                : at(work, off);
        uint32_t idx = s->add(recvReduceStep(prev, sendAt(off), scratchAt(slot * slotBytes), dst,
                                             c * L.elt),
                              {slotUser[slot]});
        slotUser[slot] = idx;
        res.producer[L.index(rs, j)] = idx;
      }
    }
  }
  return res;
}

void buildRingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "ring";
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (n == 1 || bytes == 0) {
    if (!a.inPlace && bytes) s->add(copyStep(sendAt(0), recvAt(0), bytes));
    return;
  }
  RingLayout L = RingLayout::even(a.count, n, a.eltSize, p.chunkBytes);
  BufRef recv{BufId::Recv, 0};
  BufRef own{BufId::Recv, L.segOff[r] * a.eltSize};
  RingRsResult rs = addRingReduceScatter(L, p, recv, own, a.inPlace, s);
  if (a.op == WEFT_AVG) {
    for (size_t j = 0; j < L.chunksPerSeg; ++j) {
      if (size_t c = L.chunkCnt(r, j)) {
        BufRef d{BufId::Recv, L.chunkOff(r, j) * a.eltSize};
        rs.producer[L.index(r, j)] =
            s->add(divideStep(d, c * a.eltSize), {rs.producer[L.index(r, j)]});
      }
    }
  }
  addRingAllGather(L, p, recv, r, rs.producer, rs.lastRead, own, s);
}

void buildRingReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "ring";
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, blk, s)) return;
  RingLayout L = RingLayout::blocks(a.count, n, a.eltSize, p.chunkBytes);
  // Partial sums go to scratch after the receive slots.
  const size_t slotsBytes = L.chunkElems * L.elt * std::max(1, p.slots);
  BufRef work{BufId::Scratch, slotsBytes};
  RingRsResult rs = addRingReduceScatter(L, p, work, BufRef{BufId::Recv, 0}, false, s);
  s->scratchBytes = slotsBytes + blk * n;
  if (a.op == WEFT_AVG) {
    for (size_t j = 0; j < L.chunksPerSeg; ++j) {
      if (size_t c = L.chunkCnt(r, j)) {
        BufRef d{BufId::Recv, (L.chunkOff(r, j) - L.segOff[r]) * a.eltSize};
        s->add(divideStep(d, c * a.eltSize), {rs.producer[L.index(r, j)]});
      }
    }
  }
}

void buildRingAllGather(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "ring";
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  // Out of place, the own block is copied into place; it is sent straight
  // from the send buffer so the copy is off the critical path.
  if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(r * blk), blk));
  if (n == 1) return;
  RingLayout L = RingLayout::blocks(a.count, n, a.eltSize, p.chunkBytes);
  std::vector<uint32_t> producer(n * L.chunksPerSeg, kNone);
  BufRef firstSrc = a.inPlace ? BufRef{BufId::Recv, r * blk} : BufRef{BufId::Send, 0};
  addRingAllGather(L, p, BufRef{BufId::Recv, 0}, r, producer, {}, firstSrc, s);
}

}  // namespace weft
