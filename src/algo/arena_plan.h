// Arena plans: the `shm` algorithm as data. When every rank of a
// communicator is on one host, collectives run over the host's arena
// (transports/shm/arena.h) without messages: each rank owns staging
// buffers that every other rank maps, writes its own, publishes a flag, and
// reads the others' in place. A plan says, for ONE rank and one collective,
// what it does in each round: which bytes it stages, reads, reduces and
// copies out, and which flags it waits for. Builders are pure functions of
// (collective, rank, nranks, the arena's sizes), like the schedule builders
// (schedule.h); tests run every rank's plan in the simulator
// (tests/algo/arena_sim.h), and src/exec/arena_op.cc is the one runner.
//
// A collective runs in rounds; round j covers `step` bytes of the vector.
// Rounds are numbered g in the communicator's arena sequence (every rank
// reserves the same numbers, in call order). Each round has three phases:
//
//   A  gate: every rank published arenaGateOfA(g); run A's actions;
//      publish arenaFlagA(g)
//   B  wait: every rank (or `waitOnly`) published arenaFlagA(g), unless
//      !waitB; run B's actions; publish arenaFlagB(g) if `publishB`
//   C  (runC only) wait: every rank published arenaFlagB(g); run C's
//
// Flags are numbered in one sequence, so "rank p finished phase k" is a
// comparison: no per-op handshake, no reset. The runner also writes the
// rank's call (type, datatype, op, root, count) beside its flag in round
// 0's A and compares the others' in B, so different collectives at one
// point fail naming both calls.
//
// The rules every plan obeys (the simulator checks them byte by byte):
//  * the staging and result buffers alternate by the parity of g, so round
//    g+2 may overwrite round g's: a rank starts A(g+2) after every rank
//    published A(g+1), which each does after finishing its reads of round g
//    (its B and C);
//  * a ring broadcast's slot is reused kRingSlots rounds later: A(g) waits
//    until every rank published A(g - kRingSlots + 1);
//  * a rank reads another's buffer of round g only after waiting for the
//    flag the writer published after writing it (A's for staging, B's for
//    results);
//  * single copy (Mode::Direct) reads the owners' user buffers: every rank
//    runs C, so that no rank returns while another still reads its buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/schedule.h"
#include "core/status.h"

namespace weft {

// What a plan needs to know about the arena (shm::Arena's figures).
struct ArenaShape {
  int rank = 0;
  int nranks = 1;
  size_t chunk = 0;            // bytes of each staging buffer
  size_t ringPayload = 0;      // bytes of data a broadcast ring slot holds
  size_t inlineBytes = 16;     // bytes of data beside the flag (one-shot)
  size_t directMin = 0;        // single copy for blocks of at least this (0: never)
  bool directLimited = false;  // ranks share cores: single copy for large allgathers only
};

// Where an action reads or writes. Send and Recv are the user's buffers,
// offset by the round's first byte (j * step); the others are arena memory
// of rank `rank` for the round being run.
enum class ArenaSpace : uint8_t {
  Send,
  Recv,
  Stage,   // the rank's staging buffer of the round's parity
  Result,  // the rank's result buffer of the round's parity
  Inline,  // the data bytes beside the rank's flag of the round
  Ring,    // the rank's broadcast ring slot of the round
  Peer,    // the rank's own send buffer, read in place (Mode::Direct)
};

struct ArenaLoc {
  ArenaSpace space = ArenaSpace::Send;
  int rank = 0;  // arena spaces and Peer
  size_t off = 0;
};

enum class ArenaActKind : uint8_t {
  Copy,    // dst = src
  Reduce,  // dst = srcs[0] op srcs[1] op ... (rank order: identical results everywhere)
  Divide,  // dst = dst / nranks (finishes AVG)
  Read,    // dst = src, src a Peer buffer (another process's memory)
};

struct ArenaAct {
  ArenaActKind kind = ArenaActKind::Copy;
  bool stream = false;                  // a large output: non-temporal stores
  ArenaLoc dst, src;                    // src: Copy and Read
  uint32_t srcBegin = 0, srcCount = 0;  // Reduce: into ArenaPlan::srcs
  size_t bytes = 0;
};

// The actions of one phase: acts[begin, begin + count) of the plan.
struct ArenaPhase {
  uint32_t begin = 0, count = 0;
};

struct ArenaRound {
  ArenaPhase a, b, c;
  size_t staged = 0;  // bytes this rank writes for others in A (telemetry: "sent")
};

struct ArenaPlan {
  enum class Mode : uint8_t {
    Staged,  // the parity buffers
    Inline,  // a one-shot allreduce of up to inlineBytes, data beside the flag
    Ring,    // a small broadcast through the root's ring slots
    Direct,  // single copy: readers copy from the owners' user buffers
  };
  Mode mode = Mode::Staged;
  size_t total = 0;       // bytes the rounds cover
  size_t step = 0;        // bytes per round
  size_t rounds = 0;      // 0: nothing to do (an empty collective)
  bool waitB = true;      // B waits for flags (a broadcast root's does not)
  int waitOnly = -1;      // B waits for this rank alone (ring readers: the root)
  bool publishB = false;  // some rank runs C, so every rank publishes B
  bool runC = false;      // this rank runs C
  bool reduces = false;   // B reduces (telemetry's span kind)
  // An allreduce of one round that every rank reduces whole: A copies my
  // bytes to my staging (or inline) memory, B reduces every rank's there,
  // in rank order, into recv (then divides for AVG). The runner runs these
  // two actions directly (they are a small allreduce's whole path).
  bool oneShot = false;
  // Mode::Ring is one round as well, which the runner also runs directly:
  // the root copies its bytes to its ring slot (and to recv, unless in
  // place) in A; a reader copies them from the root's slot to recv in B.
  // The round template: `full` for rounds 0 .. rounds-2, `last` for the
  // last (shorter) one; offsets into Send/Recv are relative to j * step.
  ArenaRound full, last;
  std::vector<ArenaAct> acts;
  std::vector<ArenaLoc> srcs;

  const ArenaRound& round(size_t j) const { return j + 1 == rounds ? last : full; }
  const ArenaAct* begin(const ArenaPhase& p) const { return acts.data() + p.begin; }
  const ArenaAct* end(const ArenaPhase& p) const { return acts.data() + p.begin + p.count; }
};

// The shared rules (runner and simulator): the flag published after phase
// A and B of round g, and the flag every rank must have published before
// this rank runs A(g) (0: none).
constexpr int kArenaRingSlots = 64;  // shm::Arena::kRingSlots
inline uint64_t arenaFlagA(uint64_t g) { return 2 * g + 1; }
inline uint64_t arenaFlagB(uint64_t g) { return 2 * g + 2; }
inline uint64_t arenaGateOfA(ArenaPlan::Mode m, uint64_t g) {
  // Parity buffers of round g were last read in round g-2: every rank is
  // past it once it published A(g-1). A ring slot was last read in round
  // g-K: every rank is past it once it published A(g-K+1).
  constexpr uint64_t K = kArenaRingSlots;
  if (m == ArenaPlan::Mode::Ring) return g >= K ? arenaFlagA(g - K + 1) : 0;
  return g > 1 ? arenaFlagA(g - 1) : 0;
}

// Builds `s.rank`'s plan for `args` (every collective but send and recv).
Status buildArenaPlan(const CollArgs& args, const ArenaShape& s, ArenaPlan* out);

// The largest allreduce that runs one-shot (every rank reduces all of it:
// one synchronization instead of two, n reads instead of one).
size_t arenaOneShotLimit(int nranks, size_t chunk);

}  // namespace weft
