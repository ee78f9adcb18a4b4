// Bruck allgather, any n, in ceil(log2 n) steps.
//
// Rank r's view of the data is B[i] = the block of rank (r + i) mod n, with
// B[0] its own block. At step k, with d = 2^k and c = min(d, n - d), rank r
// sends B[0..c) to rank r - d and receives B[d..d+c) from rank r + d (whose
// B[0..c) it is). Before step k a rank holds B[0..d), so after
// ceil(log2 n) steps it holds all n blocks, for any n.
//
// Classic Bruck keeps B in a temporary buffer, so that B[0..c) is one
// message, and finishes with a rotation: block B[i] copied to position
// (r + i) mod n. Here B lives in recvbuf at those rotated positions from the
// start: B[i] is recvbuf block (r + i) mod n. The final rotation is then
// already done and needs neither a copy nor n blocks of scratch; the price
// is that a range B[a..b) which runs past block n-1 is sent as two messages
// (its part up to the end of recvbuf and its part from the start). Sender
// and receiver cut at the same place, since they name the same blocks.
//
// Cost (N = n blocks): ceil(log2 n) steps (up to two messages each way per
// step), (n-1)/n * N bytes sent and received per rank: latency-optimal for
// any n, bandwidth-optimal too, but the messages of the last steps are large
// and go to distant ranks, so large messages prefer the ring.
// Scratch: none.
#include <algorithm>

#include "algo/step_util.h"

namespace weft {
namespace {

// Recvbuf byte ranges of the blocks first, first+1, ..., first+c-1 (mod n):
// one range, or two where they run past the end.
struct Ranges {
  size_t lo[2], hi[2];
  int count;
  Ranges(int first, int c, int n, size_t blk) {
    const int end = first + c;
    lo[0] = first * blk;
    hi[0] = std::min(end, n) * blk;
    count = 1;
    if (end > n) {
      lo[1] = 0;
      hi[1] = (end - n) * blk;
      count = 2;
    }
  }
};

}  // namespace

void buildBruckAllGather(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::Bruck);
  const size_t blk = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (blk == 0) return;
  std::vector<Span> written;
  if (!a.inPlace)
    written.push_back(Span{r * blk, (r + 1) * blk, blk,
                           {s->add(copyStep(sendAt(0), recvAt(r * blk), blk))}});
  for (int d = 1; d < n; d *= 2) {
    const int c = std::min(d, n - d);
    // The chunks of both directions, sent and received in turn so that the
    // engine, which looks a bounded number of steps ahead, always has the
    // receive matching the peer's next send in view.
    const Ranges out(r, c, n, blk), in(mod(r + d, n), c, n, blk);
    struct Piece {
      size_t off, bytes;
      int range;  // which of the (up to two) ranges
    };
    std::vector<Piece> sends, recvs;
    for (int i = 0; i < out.count; ++i) {
      Chunker ch(out.hi[i] - out.lo[i], p.chunkBytes, a.eltSize);
      for (size_t j = 0; j < ch.count(); ++j) sends.push_back({out.lo[i] + ch.off(j), ch.len(j), i});
    }
    std::vector<Span> got;
    for (int i = 0; i < in.count; ++i) {
      Chunker ch(in.hi[i] - in.lo[i], p.chunkBytes, a.eltSize);
      got.push_back(Span{in.lo[i], in.hi[i], ch.chunk, {}});
      for (size_t j = 0; j < ch.count(); ++j) recvs.push_back({in.lo[i] + ch.off(j), ch.len(j), i});
    }
    for (size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k) {
      if (k < sends.size()) {
        const Piece& o = sends[k];
        s->add(sendStep(mod(r - d, n), recvAt(o.off), o.bytes));
        waitForWrites(written, o.off, o.off + o.bytes, s);
      }
      if (k < recvs.size()) {
        const Piece& g = recvs[k];
        got[g.range].steps.push_back(s->add(recvStep(mod(r + d, n), recvAt(g.off), g.bytes)));
      }
    }
    for (Span& sp : got) written.push_back(std::move(sp));  // disjoint from what was sent
  }
}

}  // namespace weft
