// The cost model's arithmetic, shared by the files that implement select.h
// (whose header comment writes the formulas out):
//   cost_pricing.cc  Env, the model in the formulas' units, and the price of
//                    a round and of a pipeline on its link classes;
//   cost_algos.cc    every algorithm as rounds and pipelines (planUs);
//   select.cc        the best chunk size and algorithm for a call;
//   tuning_table.cc  the table of choices the INFO log prints at init.
// Internal to src/algo: nothing else includes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "algo/select.h"

namespace weft {
namespace cost {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Link {
  double alpha;  // us per message
  double beta;   // us per byte
  bool cpu;      // LinkClass::cpuBound
};

// The reduction time a round of `pieces` leaves exposed: on a CPU-bound
// link all of it (the same cores move the bytes), else what the wire time
// of the other pieces does not hide.
inline double exposedReduce(double reduce, double wire, double pieces, bool cpu) {
  if (cpu) return reduce;
  return std::max(reduce / pieces, reduce - wire * (pieces - 1) / pieces);
}

// The model in the units the formulas use, with oversubscription applied and
// the rank layout made consistent.
struct Env {
  int n = 1, hosts = 1, ppn = 1;
  double oversub = 1;
  Link intra{0, 0, false}, inter{0, 0, false}, arena{0, 0, false};
  double gamma = 0;  // us per byte reduced or copied locally
  double share = 0;  // msgShare
  double arenaChunk = 0;
  int cores = 0;         // of the host, when known
  bool arenaOn = false;  // the shm arena serves this comm's one-host collectives
  // pairedCores: the rank per core that runs recursive doubling's core
  // after each pair folded (n/2 ranks, no longer sharing cores).
  std::shared_ptr<const Env> leaders;

  explicit Env(const CostModel& m);

  // Latency times o; bandwidth divided by o (bytes per us = GB/s * 1e3).
  static Link link(const LinkClass& c, double o) {
    return Link{std::max(c.latencyUs, 0.0) * o, o / (std::max(c.bandwidthGBs, 1e-9) * 1e3),
                c.cpuBound};
  }
};

inline int ceilLog2(int n) {
  int l = 0;
  while ((int64_t{1} << l) < n) ++l;
  return l;
}

inline int floorPow2(int n) {
  int p = 1;
  while (static_cast<int64_t>(p) * 2 <= n) p *= 2;
  return p;
}

// Where a round's partners are (see "Links" in select.h).
enum class Where : uint8_t { Neighbor, Xor, Shift, All };

// `count` identical rounds: a rank sends `msgs` messages of `bytes` each,
// receives as many and reduces `reduced` bytes of them.
struct Round {
  double count;
  double msgs;
  double bytes;
  double reduced;
  Where where;
  int64_t dist;
  double active;  // fraction of the ranks that send in the round
};

inline Round rounds(double count, double msgs, double bytes, double reduced,
                    Where where = Where::Neighbor, int64_t dist = 1, double active = 1) {
  return Round{count, msgs, bytes, reduced, where, dist, active};
}

// The time of `r.count` rounds of `r` (see "round" in select.h).
double roundUs(const Env& e, double chunk, const Round& r);

// A pipeline: `bytes` cut into chunks flow through `depth` hops. In the fill
// one chunk crosses each hop (`offHops` of them between hosts); after it,
// one chunk time per further chunk, in which the busiest rank sends `sends`
// chunks (`offSends` of them off its host) in `msgs` messages and reduces
// `reduces` chunks.
struct Pipe {
  double depth;
  double bytes;
  double sends;
  double reduces;
  double msgs;
  double offHops;
  double offSends;
};
// The time of pipeline `p` (see "pipeline" in select.h).
double pipeUs(const Env& e, double chunk, const Pipe& p);

// The model's time for algorithm `a` on collective `t` of S bytes
// (collBytes) with messages cut at `chunk` bytes; kInf for Auto
// (cost_algos.cc).
double planUs(Algo a, CollType t, double S, const Env& e, double chunk);

// The chunk sizes tried: minChunk, 2*minChunk, ... up to maxChunk.
struct ChunkRange {
  size_t lo, hi;
  explicit ChunkRange(const CostModel& m)
      : lo(std::max<size_t>(1, std::min(m.minChunk, m.maxChunk))),
        hi(std::max<size_t>(1, std::max(m.minChunk, m.maxChunk))) {}
  size_t next(size_t c) const { return c > hi / 2 ? hi : c * 2; }
};

}  // namespace cost
}  // namespace weft
