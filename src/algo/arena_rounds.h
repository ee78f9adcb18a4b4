// The actions of one arena round, per collective (arena_plan.h): the part
// of buildArenaPlan that says what a rank stages, reads, reduces and copies
// out. Internal to src/algo.
#pragma once

#include "algo/arena_plan.h"

namespace weft {

// Parts of a round are whole cache lines (the last may be shorter), so that
// two ranks never write one line.
constexpr size_t kArenaLine = 64;

struct RoundContext {
  const CollArgs* args = nullptr;
  const ArenaShape* shape = nullptr;
  bool oneShot = false;  // allreduce: every rank reduces the whole round
  bool stream = false;   // outputs with non-temporal stores
};

// Appends the actions of a round of `len` bytes to `p` and describes them
// in `r` (p's mode, step, waits and C flags are set).
void buildArenaRound(const RoundContext& rc, size_t len, ArenaPlan* p, ArenaRound* r);

}  // namespace weft
