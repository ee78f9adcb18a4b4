// An in-memory host arena that runs every rank's arena plan
// (src/algo/arena_plan.h) for a sequence of collectives, as the runner
// (src/exec/arena_op.cc) does over shared memory: the same gates, flags and
// flag lines (two per rank, by round parity), ranks interleaved at random
// phase by phase. It checks the arena's rules byte by byte: every byte of
// arena memory carries the round that wrote it, and a rank that reads a
// buffer in round g must find g there (not an older round it never waited
// for, nor a newer one that overwrote it early); a rank writes only its own
// arena memory, within its buffers; a single-copy read finds its owner
// still inside the collective; all ranks agree on the rounds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algo/arena_plan.h"
#include "algo/simulator.h"

namespace weft::sim {

struct ArenaSimResult {
  bool ok = true;
  std::string error;  // the rule broken, by whom, where
  size_t phases = 0;  // phases run (all ranks)
};

// Runs ops[0], ops[1], ... on shape.nranks ranks (shape.rank is ignored).
// bufs[k][r]: rank r's buffers of op k, laid out as simulator.h's run()
// says (in place: .recv only). `dt` drives reductions. `holdRank` (>= 0)
// never runs a phase (a rank that has not arrived): the run must then end
// in a deadlock report, with no other rank past the first collective that
// needs it. `tamper`, when set, may change each plan after it is built
// (tests of the checker itself).
using PlanTamper = std::function<void(size_t op, int rank, ArenaPlan* plan)>;
ArenaSimResult runArena(const std::vector<CollArgs>& ops, weft_datatype_t dt,
                        const ArenaShape& shape, std::vector<std::vector<RankBuffers>>* bufs,
                        uint64_t seed, int holdRank = -1, const PlanTamper& tamper = nullptr);

}  // namespace weft::sim
