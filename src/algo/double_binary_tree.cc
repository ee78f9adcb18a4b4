// Double binary tree allreduce (as NCCL's "tree" algorithm).
//
// Two binary trees span the ranks (binary_tree.h); each rank is interior in
// at most one of them and a leaf in the other. The vector is split in two
// halves: half t is reduced up tree t (a node adds its children's partial
// sums to its own input and passes the result to its parent) and the root's
// total is broadcast back down tree t. Both halves are cut into chunks of
// chunkBytes and pipelined: a node forwards chunk j up as soon as its
// children's chunk j is in, and chunk j comes down while later chunks are
// still going up. Since a rank does the interior work of one tree only, every
// rank sends and receives about the same amount and the two trees use the
// links in both directions.
//
// Message order: every pair of ranks lists its messages by the same key,
// chunk time first. Chunk j goes up at time j and comes down at time
// j + lag, with lag twice the tree depth, so a chunk coming down does not
// hold up later chunks going up on the same pair of ranks; every step waits
// only for steps with a smaller key, so no order of delivery can deadlock.
//
// Each element is reduced at each node in a fixed order (own input, then
// child 0, then child 1) and the root's result is copied to everyone, so the
// result is bitwise identical on every rank.
//
// Cost (N bytes, n ranks, J chunks per half): 2 * depth + J - 1 chunk times
// with depth = floor(log2 n) + 1; a rank sends at most 2N bytes (N/2 up and
// 2 * N/2 down in the tree where it is interior, N/2 up in the other) and
// receives as much; it reduces at most N.
// Scratch: `slots` receive slots of one chunk.
#include <algorithm>

#include "algo/binary_tree.h"
#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

}  // namespace

void buildDoubleBinaryTreeAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::DoubleBinaryTree);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  struct Half {
    TreeLinks links;
    size_t off = 0;  // bytes
    Chunker ch{0, 1, 1};
    std::vector<uint32_t> upSent, result;  // per chunk
  } half[2];
  size_t maxChunks = 0;
  for (int t = 0; t < 2; ++t) {
    Half& h = half[t];
    h.links = binaryTreeLinks(n, t, r);
    h.off = partOffset(a.count, 2, t) * a.eltSize;
    h.ch = Chunker(partCount(a.count, 2, t) * a.eltSize, p.chunkBytes, a.eltSize);
    h.upSent.assign(h.ch.count(), kNone);
    h.result.assign(h.ch.count(), kNone);
    maxChunks = std::max(maxChunks, h.ch.count());
  }
  const int nslots = std::max(1, p.slots);
  const size_t slotBytes = std::min(half[0].ch.chunk, half[0].ch.bytes);
  s->scratchBytes = slotBytes * nslots;
  std::vector<uint32_t> slotUser(nslots, kNone);
  size_t nextSlot = 0;

  // Chunk j of half t going up: children's partial sums are added to this
  // rank's input in recvbuf, then the sum goes to the parent (or, at the
  // root, is the result).
  auto up = [&](Half& h, size_t j) {
    const size_t off = h.off + h.ch.off(j), len = h.ch.len(j);
    const TreeLinks& L = h.links;
    uint32_t acc = kNone;  // the last reduce into recvbuf
    for (int c = 0; c < L.nchildren(); ++c) {
      // The receives only wait for their slot, so with two free slots both
      // children's chunks come in at once.
      const int slot = static_cast<int>(nextSlot++ % nslots);
      const BufRef tmp = scratchAt(slot * slotBytes);
      const uint32_t got = s->add(recvStep(L.child[c], tmp, len), {slotUser[slot]});
      const BufRef mine = c == 0 ? sendAt(off) : recvAt(off);
      acc = s->add(reduceStep(mine, tmp, recvAt(off), len), {got, acc});
      slotUser[slot] = acc;
    }
    if (L.parent >= 0) {
      h.upSent[j] = s->add(sendStep(L.parent, acc == kNone ? sendAt(off) : recvAt(off), len), {acc});
    } else {
      h.result[j] = a.op == WEFT_AVG ? s->add(divideStep(recvAt(off), len), {acc}) : acc;
    }
  };
  // Chunk j of half t coming down: the result from the parent into recvbuf
  // (after this rank's own send up has read it), then on to the children.
  auto down = [&](Half& h, size_t j) {
    const size_t off = h.off + h.ch.off(j), len = h.ch.len(j);
    const TreeLinks& L = h.links;
    if (L.parent >= 0) {
      const bool overwritesSent = L.nchildren() > 0 || a.inPlace;
      h.result[j] = s->add(recvStep(L.parent, recvAt(off), len),
                           {overwritesSent ? h.upSent[j] : kNone});
    }
    for (int c = 0; c < L.nchildren(); ++c)
      s->add(sendStep(L.child[c], recvAt(off), len), {h.result[j]});
  };

  const size_t lag = 2 * static_cast<size_t>(binaryTreeDepth(n));
  for (size_t time = 0; time < maxChunks + lag; ++time) {
    for (Half& h : half)
      if (time < h.ch.count()) up(h, time);
    for (Half& h : half)
      if (time >= lag && time - lag < h.ch.count()) down(h, time - lag);
  }
}

}  // namespace weft
