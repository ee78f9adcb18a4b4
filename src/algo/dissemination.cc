// Dissemination barrier (Hensgen, Finkel and Manber): in round k rank r
// signals rank r+2^k and waits for rank r-2^k. After ceil(log2 n) rounds
// every rank has heard, directly or not, from every other, so none leaves
// before all arrived. Messages are empty. Round k starts only when round k-1
// is complete: its receive waits for the previous receive too, since a send
// that waited only for the latest receive could pass on "everyone arrived"
// before an earlier round's sender had arrived.
//
// Cost: ceil(log2 n) rounds of one zero-byte message.
#include "algo/step_util.h"

namespace weft {

void buildDisseminationBarrier(const CollArgs&, const BuildParams& p, Schedule* s) {
  s->algorithm = "dissemination";
  const int n = p.nranks, r = p.rank;
  uint32_t last = Schedule::kNoStep;
  for (int dist = 1; dist < n; dist *= 2) {
    s->add(sendStep(mod(r + dist, n), sendAt(0), 0), {last});
    last = s->add(recvStep(mod(r - dist, n), recvAt(0), 0), {last});
  }
}

}  // namespace weft
