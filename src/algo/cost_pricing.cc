// The cost model's prices of its two building blocks, a round and a
// pipeline, on the link classes of a CostModel (formulas and link rules in
// select.h), and Env, the model in the units they use. cost_algos.cc builds
// every algorithm out of them.
#include "algo/cost_pricing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace weft {
namespace cost {

Env::Env(const CostModel& m) {
  cores = m.cores;
  arenaOn = m.shmArena;
  n = std::max(1, m.nranks);
  hosts = std::min(std::max(1, m.nhosts), n);
  const int even = (n + hosts - 1) / hosts;
  ppn = hosts == 1 ? n : std::min(std::max(m.maxRanksPerHost, even), n);
  oversub = m.cores > 0 && ppn > m.cores ? static_cast<double>(ppn) / m.cores : 1.0;
  intra = link(m.intra, oversub);
  inter = link(m.inter, 1.0);
  inter.alpha *= oversub;
  arena = link(m.arena, oversub);
  gamma = oversub / (std::max(m.reduceGBs, 1e-9) * 1e3);
  // With ranks sharing cores nothing overlaps a message's software cost:
  // the core that would absorb it runs the other rank's messages too. So
  // every further message costs a whole latency (the measurement:
  // docs/performance.md, "Measurements behind the cost model").
  share = oversub > 1 ? 1.0 : std::min(std::max(m.msgShare, 0.0), 1.0);
  arenaChunk = static_cast<double>(m.arenaChunk);
  if (m.pairedCores && hosts == 1 && n >= 4 && (n & (n - 1)) == 0) {
    CostModel half = m;
    half.nranks = n / 2;
    half.maxRanksPerHost = n / 2;
    half.pairedCores = false;
    leaders = std::make_shared<const Env>(half);
  }
}

namespace {

// Ranks of a host sending off the host at once: f ranks, scaled by activity.
double fan(double f, double active) { return std::max(1.0, std::ceil(f * active)); }

// The latency and wire time of one round of `r`.
void roundLink(const Env& e, const Round& r, double* alpha, double* wire) {
  const double bytes = r.msgs * r.bytes;
  const bool peersOnHost = e.ppn > 1;
  auto onHost = [&] {
    *alpha = e.intra.alpha;
    *wire = bytes * e.intra.beta;
  };
  auto offHost = [&](double f) {
    *alpha = std::max(peersOnHost ? e.intra.alpha : 0.0, e.inter.alpha);
    *wire = std::max(peersOnHost ? bytes * e.intra.beta : 0.0, f * bytes * e.inter.beta);
  };
  if (e.hosts == 1) return onHost();
  const double near = static_cast<double>(std::min<int64_t>(r.dist, e.ppn));
  switch (r.where) {
    case Where::Neighbor:
      return offHost(1);
    case Where::Xor:
      if (2 * r.dist <= e.ppn && e.ppn % (2 * r.dist) == 0) return onHost();
      return offHost(fan(near, r.active));
    case Where::Shift:
      return offHost(fan(near, r.active));
    case Where::All: {
      const double off = static_cast<double>(e.n - e.ppn) / (e.n - 1);
      *alpha = std::max(peersOnHost ? e.intra.alpha : 0.0, e.inter.alpha);
      *wire = std::max(bytes * (1 - off) * e.intra.beta,
                       fan(e.ppn, r.active) * bytes * off * e.inter.beta);
      return;
    }
  }
}
}  // namespace

double roundUs(const Env& e, double chunk, const Round& r) {
  if (r.count <= 0 || r.msgs <= 0) return 0;
  double alpha = 0, wire = 0;
  roundLink(e, r, &alpha, &wire);
  const double pieces = r.msgs * std::max(1.0, r.bytes / chunk);
  const double latency = alpha * (1 + (pieces - 1) * e.share);
  const double reduce = r.reduced * e.gamma;
  const bool cpu = e.hosts == 1 ? e.intra.cpu : e.inter.cpu;
  const double exposed = exposedReduce(reduce, wire, pieces, cpu);
  return r.count * (latency + wire + exposed);
}

double pipeUs(const Env& e, double chunk, const Pipe& p) {
  if (p.depth <= 0) return 0;
  const bool multi = e.hosts > 1, alone = e.ppn == 1;  // alone: one rank per host
  const double offHops = !multi ? 0 : alone ? p.depth : std::min(p.offHops, p.depth);
  const double offSends = !multi ? 0 : alone ? p.sends : std::min(p.offSends, p.sends);
  const double chunks = std::max(1.0, p.bytes / chunk), c = p.bytes / chunks;
  const double hopReduce = std::min(p.reduces, 1.0) * c * e.gamma;
  const double fill = offHops * (e.inter.alpha + c * e.inter.beta) +
                      (p.depth - offHops) * (e.intra.alpha + c * e.intra.beta) +
                      p.depth * hopReduce;
  const double alpha =
      offSends > 0 ? std::max(e.inter.alpha, alone ? 0.0 : e.intra.alpha) : e.intra.alpha;
  const double wire =
      std::max(offSends * c * e.inter.beta, (alone ? 0.0 : p.sends) * c * e.intra.beta);
  const bool cpu = offSends > 0 ? e.inter.cpu : e.intra.cpu;
  const double red = p.reduces * c * e.gamma;
  return fill +
         (chunks - 1) * (p.msgs * e.share * alpha + (cpu ? wire + red : std::max(wire, red)));
}

}  // namespace cost
}  // namespace weft
