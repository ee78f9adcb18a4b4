// Pairwise exchange for alltoall, and point-to-point send/recv.
//
// Alltoall: at step k (1..n-1) rank r sends its block for rank r+k and
// receives the block of rank r-k, so each step every rank sends and receives
// one block and no link is used twice at once. The own block is a local
// copy. In place, the send buffer is copied to scratch first so that blocks
// can be overwritten while they are still to be sent.
//
// Cost: n-1 steps, (n-1)/n * N bytes sent and received per rank.
#include "algo/step_util.h"

namespace weft {

void buildPairwiseAllToAll(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "pairwise";
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  uint32_t staged = Schedule::kNoStep;
  BufId src = BufId::Send;
  if (a.inPlace && n > 1) {
    s->scratchBytes = blk * n;
    staged = s->add(copyStep(sendAt(0), scratchAt(0), blk * n));
    src = BufId::Scratch;
  } else if (!a.inPlace) {
    s->add(copyStep(sendAt(r * blk), recvAt(r * blk), blk));
  }
  Chunker ch(blk, p.chunkBytes, a.eltSize);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    for (size_t j = 0; j < ch.count(); ++j) {
      s->add(sendStep(to, BufRef{src, to * blk + ch.off(j)}, ch.len(j)), {staged});
      s->add(recvStep(from, recvAt(from * blk + ch.off(j)), ch.len(j)), {staged});
    }
  }
}

void buildPointToPoint(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "p2p";
  (void)p;
  const size_t bytes = a.count * a.eltSize;
  if (a.type == CollType::Send)
    s->add(sendStep(a.peer, sendAt(0), bytes));
  else
    s->add(recvStep(a.peer, recvAt(0), bytes));
}

}  // namespace weft
