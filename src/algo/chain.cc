// Pipelined chains for broadcast and reduce.
//
// The ranks are ordered from the root: position q = (rank - root) mod n.
// Broadcast: position q receives chunk j from q-1 and forwards it to q+1;
// with J chunks the last rank finishes after n-1+J chunk times, so for large
// messages every link carries the whole message once, at full bandwidth.
// Reduce runs the same chain backwards: position q receives the partial sum
// of positions q+1..n-1, adds its own contribution and passes it on; the
// root's sum lands in its receive buffer.
//
// Cost: n-1+J-1 chunk steps; N bytes cross each link once. Latency grows with
// n (a binomial tree is better for small messages on many ranks).
#include <algorithm>

#include "algo/step_util.h"

namespace weft {

void buildChainBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "chain";
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank, q = mod(r - a.root, n);
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  if (bytes == 0) return;
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  if (q == 0) {
    for (size_t j = 0; n > 1 && j < ch.count(); ++j)
      s->add(sendStep(next, sendAt(ch.off(j)), ch.len(j)));
    // The root's own copy last: the data leaves first, and the copy runs
    // while the next rank receives it.
    if (!a.inPlace) s->add(copyStep(sendAt(0), recvAt(0), bytes));
    return;
  }
  for (size_t j = 0; j < ch.count(); ++j) {
    uint32_t got = s->add(recvStep(prev, recvAt(ch.off(j)), ch.len(j)));
    if (q < n - 1) s->add(sendStep(next, recvAt(ch.off(j)), ch.len(j)), {got});
  }
}

void buildChainReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "chain";
  const size_t bytes = a.count * a.eltSize;
  const int n = p.nranks, r = p.rank, q = mod(r - a.root, n);
  const int toward = mod(r - 1, n), from = mod(r + 1, n);
  if (trivialSchedule(a, p, bytes, s)) return;
  Chunker ch(bytes, p.chunkBytes, a.eltSize);
  if (q == n - 1) {  // the far end only sends its contribution
    for (size_t j = 0; j < ch.count(); ++j) s->add(sendStep(toward, sendAt(ch.off(j)), ch.len(j)));
    return;
  }
  const int nslots = std::max(1, p.slots);
  s->scratchBytes = ch.chunk * nslots;
  std::vector<uint32_t> slotUser(nslots, Schedule::kNoStep);
  for (size_t j = 0; j < ch.count(); ++j) {
    const int slot = static_cast<int>(j % nslots);
    BufRef tmp = scratchAt(slot * ch.chunk);
    if (q == 0) {  // the root: the sum lands in recvbuf
      uint32_t red =
          s->add(recvReduceStep(from, sendAt(ch.off(j)), tmp, recvAt(ch.off(j)), ch.len(j)),
                 {slotUser[slot]});
      slotUser[slot] = red;
      if (a.op == WEFT_AVG) s->add(divideStep(recvAt(ch.off(j)), ch.len(j)), {red});
    } else {  // partial sums stay in the slot and move on
      uint32_t red = s->add(recvReduceStep(from, sendAt(ch.off(j)), tmp, tmp, ch.len(j)),
                            {slotUser[slot]});
      slotUser[slot] = s->add(sendStep(toward, tmp, ch.len(j)), {red});
    }
  }
}

}  // namespace weft
