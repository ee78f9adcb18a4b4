// Receive groups for Fold steps (schedule.h, StepKind::Fold): the pieces
// that the other n-1 ranks contribute to one chunk land side by side in a
// group of scratch, and one step folds them with this rank's own piece in
// rank order. A chunk's receives wait until the fold that last used its
// group is done. Groups in flight: as many as hold 2 * slots pieces (at
// least one, at most `slots`), so scratch stays max(2 * slots, n) chunks
// whatever the message size: one group must hold the n-1 pieces, since the
// fold needs them all at once (a slot per rank, this rank's unused). Used by the builders that serve
// reproducible calls (direct.cc, fold.cc).
#pragma once

#include <algorithm>
#include <vector>

#include "algo/step_util.h"

namespace weft {

struct FoldGroups {
  int count = 1;
  size_t groupBytes = 0;
  size_t base = 0;  // scratch offset of group 0
  size_t next = 0;
  std::vector<uint32_t> user;  // the fold that last read each group

  // Groups for pieces of up to `pieceBytes` (0: none, no scratch).
  FoldGroups(const BuildParams& p, size_t pieceBytes, Schedule* s) {
    const int slots = std::max(1, p.slots), pieces = std::max(1, p.nranks);
    count = std::max(1, std::min(slots, 2 * slots / pieces));
    groupBytes = p.nranks > 1 ? pieceBytes * static_cast<size_t>(p.nranks) : 0;
    user.assign(count, Schedule::kNoStep);
    base = s->scratchBytes;
    s->scratchBytes += groupBytes * count;
  }

  // Receives chunk pieces of `len` bytes from every other rank (in rank
  // order) into the next group, then dst = fold(own, pieces); the fold also
  // waits for `deps`. Returns the fold's step.
  uint32_t fold(const BuildParams& p, BufRef own, BufRef dst, size_t len,
                const std::vector<uint32_t>& deps, Schedule* s) {
    const int g = static_cast<int>(next++ % count);
    const BufRef pieces = scratchAt(base + static_cast<size_t>(g) * groupBytes);
    std::vector<uint32_t> got;
    for (int q = 0; q < p.nranks; ++q)
      if (q != p.rank)
        got.push_back(s->add(recvStep(q, foldPieceAt(pieces, q, len), len), {user[g]}));
    const uint32_t f = s->add(foldStep(own, pieces, dst, len));
    for (uint32_t d : got) s->addDep(f, d);
    for (uint32_t d : deps) s->addDep(f, d);
    user[g] = f;
    return f;
  }
};

}  // namespace weft
