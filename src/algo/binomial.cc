// Binomial-tree broadcast and reduce, rooted anywhere, pipelined in chunks.
//
// Ranks are numbered from the root: q = (rank - root) mod n. The parent of
// q > 0 is q with its lowest set bit cleared; the children of q are q + m
// for the powers of two m below q's lowest set bit (below n for the root)
// with q + m < n. Child q + m heads a subtree of min(m, n - q - m) ranks, so
// the root's subtrees have 1, 2, 4, ... ranks and the tree is
// ceil(log2 n) levels deep.
//
// Broadcast: each chunk is received from the parent and forwarded to the
// children, largest subtree first (it has the longest way to go).
// Reduce: each chunk's partial sums come in from the children, smallest
// subtree first (it is ready first); the rank adds them to its own input and
// sends the sum to its parent. The root's sum lands in recvbuf. Chunks are
// listed in order, so chunk j+1 moves down (or up) a level while chunk j
// moves on to the next one.
//
// Cost (N bytes, J chunks): ceil(log2 n) + J - 1 chunk times if a rank's
// sends to its children overlapped, as each chunk crosses ceil(log2 n)
// levels; the root sends (broadcast) or receives (reduce) ceil(log2 n) * N
// bytes, a rank with c children c * N. Latency log2 n instead of the chain's
// n; bandwidth log2 n times worse at the root, so large messages want the
// chain.
// Scratch: reduce uses `slots` receive slots plus `slots` partial-sum chunks
// on interior ranks; broadcast none.
#include <algorithm>

#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

// Parent (rank, -1 at the root) and children (ranks, smallest subtree first)
// of `rank` in the binomial tree of n ranks rooted at `root`.
struct BinomialNode {
  int parent = -1;
  std::vector<int> children;

  BinomialNode(int n, int root, int rank) {
    const int q = mod(rank - root, n);
    const int low = q == 0 ? n : (q & -q);
    if (q != 0) parent = mod(q - (q & -q) + root, n);
    for (int m = 1; m < low && q + m < n; m *= 2) children.push_back(mod(q + m + root, n));
  }
};

}  // namespace

void buildBinomialBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::BinomialTree);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (bytes == 0) return;
  const BinomialNode node(n, a.root, r);
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  for (size_t j = 0; j < ch.count(); ++j) {
    uint32_t got = kNone;
    BufRef src = sendAt(ch.off(j));  // the root sends from its input
    if (node.parent >= 0) {
      got = s->add(recvStep(node.parent, recvAt(ch.off(j)), ch.len(j)));
      src = recvAt(ch.off(j));
    }
    for (size_t c = node.children.size(); c-- > 0;)
      s->add(sendStep(node.children[c], src, ch.len(j)), {got});
  }
  // The root's own copy last: the data leaves first.
  if (r == a.root && !a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), bytes));
}

void buildBinomialReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = algoName(Algo::BinomialTree);
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank;
  if (trivialSchedule(a, p, bytes, s)) return;
  const BinomialNode node(n, a.root, r);
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  if (node.children.empty()) {  // a leaf sends its input
    for (size_t j = 0; j < ch.count(); ++j)
      s->add(sendStep(node.parent, sendAt(ch.off(j)), ch.len(j)));
    return;
  }
  const int nslots = std::max(1, p.slots);
  const size_t slotBytes = std::min(ch.chunk, bytes);
  const bool root = node.parent < 0;
  // Receive slots, then (below the root) partial-sum chunks.
  s->scratchBytes = slotBytes * nslots * (root ? 1 : 2);
  std::vector<uint32_t> slotUser(nslots, kNone), sumUser(nslots, kNone);
  size_t nextSlot = 0;
  for (size_t j = 0; j < ch.count(); ++j) {
    const size_t len = ch.len(j);
    const int sumSlot = static_cast<int>(j % nslots);
    const BufRef sum = root ? recvAt(ch.off(j)) : scratchAt((nslots + sumSlot) * slotBytes);
    const uint32_t sumFree = root ? kNone : sumUser[sumSlot];
    uint32_t last = kNone;
    for (size_t c = 0; c < node.children.size(); ++c) {
      const int slot = static_cast<int>(nextSlot++ % nslots);
      const BufRef tmp = scratchAt(slot * slotBytes);
      const uint32_t got = s->add(recvStep(node.children[c], tmp, len), {slotUser[slot]});
      last = s->add(reduceStep(c == 0 ? sendAt(ch.off(j)) : sum, tmp, sum, len),
                    {got, last, sumFree});
      slotUser[slot] = last;
    }
    if (root) {
      if (a.op == WEFT_AVG) s->add(divideStep(sum, len), {last});
    } else {
      sumUser[sumSlot] = s->add(sendStep(node.parent, sum, len), {last});
    }
  }
}

}  // namespace weft
