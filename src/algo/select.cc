// The cost model and the selector; the formulas are in select.h.
#include "algo/select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/status.h"

namespace weft {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The collectives the tuning table lists, in the order it lists them.
const CollType kTableColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                                CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll,
                                CollType::Barrier};

struct Link {
  double alpha;  // us per message
  double beta;   // us per byte
  bool cpu;      // LinkClass::cpuBound
};

// The reduction time a round of `pieces` leaves exposed: on a CPU-bound
// link all of it (the same cores move the bytes), else what the wire time
// of the other pieces does not hide.
double exposedReduce(double reduce, double wire, double pieces, bool cpu) {
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

  explicit Env(const CostModel& m) {
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
    // every further message costs a whole latency (measured: n=4 on 2 cores
    // over tcp and ucx, recursive doubling's 2 messages per rank took
    // 31-37 us where the direct algorithm's 3 took 41-55).
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

  // Latency times o; bandwidth divided by o (bytes per us = GB/s * 1e3).
  static Link link(const LinkClass& c, double o) {
    return Link{std::max(c.latencyUs, 0.0) * o, o / (std::max(c.bandwidthGBs, 1e-9) * 1e3),
                c.cpuBound};
  }
};

int ceilLog2(int n) {
  int l = 0;
  while ((int64_t{1} << l) < n) ++l;
  return l;
}

int floorPow2(int n) {
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

Round rounds(double count, double msgs, double bytes, double reduced, Where where = Where::Neighbor,
             int64_t dist = 1, double active = 1) {
  return Round{count, msgs, bytes, reduced, where, dist, active};
}

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
    case Where::Neighbor: return offHost(1);
    case Where::Xor:
      if (2 * r.dist <= e.ppn && e.ppn % (2 * r.dist) == 0) return onHost();
      return offHost(fan(near, r.active));
    case Where::Shift: return offHost(fan(near, r.active));
    case Where::All: {
      const double off = static_cast<double>(e.n - e.ppn) / (e.n - 1);
      *alpha = std::max(peersOnHost ? e.intra.alpha : 0.0, e.inter.alpha);
      *wire = std::max(bytes * (1 - off) * e.intra.beta,
                       fan(e.ppn, r.active) * bytes * off * e.inter.beta);
      return;
    }
  }
}

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
  return fill + (chunks - 1) * (p.msgs * e.share * alpha + (cpu ? wire + red : std::max(wire, red)));
}

// Model of an algorithm or a collective the table gains before this file
// knows it: n-1 neighbour rounds of the whole vector, reduced.
double unknownUs(const Env& e, double chunk, double S) {
  return roundUs(e, chunk, rounds(e.n - 1, 1, S, S));
}

// rd / hd with n not a power of two: the extra ranks fold into a partner
// (one round of `in` bytes, `in` reduced when `reduce`) and get `out` back.
double foldUs(const Env& e, double chunk, double in, bool reduce, double out) {
  if (floorPow2(e.n) == e.n) return 0;
  return roundUs(e, chunk, rounds(1, 1, in, reduce ? in : 0, Where::Xor, 1)) +
         roundUs(e, chunk, rounds(1, 1, out, 0, Where::Xor, 1));
}

// Recursive halving over P ranks as hd runs it: round i sends S/2^(i+1) to
// the rank P/2^(i+1) away (reduced when `reduce`); the doubling half of hd
// runs the same rounds backwards.
double halvingUs(const Env& e, double chunk, double S, bool reduce) {
  double t = 0, m = S;
  for (int64_t d = floorPow2(e.n) / 2; d >= 1; d /= 2) {
    m /= 2;
    t += roundUs(e, chunk, rounds(1, 1, m, reduce ? m : 0, Where::Xor, d));
  }
  return t;
}

double chainUs(const Env& e, double c, CollType t, double S) {
  const double n = e.n, h = e.hosts;
  switch (t) {
    case CollType::Broadcast: return pipeUs(e, c, Pipe{n - 1, S, 1, 0, 1, h - 1, 1});
    case CollType::Reduce: return pipeUs(e, c, Pipe{n - 1, S, 1, 1, 1, h - 1, 1});
    case CollType::AllReduce: return pipeUs(e, c, Pipe{2 * (n - 1), S, 2, 1, 2, 2 * (h - 1), 1});
    case CollType::Barrier: return roundUs(e, c, rounds(2 * (n - 1), 1, 0, 0));
    default: return unknownUs(e, c, S);
  }
}

double ringUs(const Env& e, double c, CollType t, double S) {
  const double n = e.n, blk = S / n;
  switch (t) {
    case CollType::AllReduce:
      return roundUs(e, c, rounds(n - 1, 1, blk, blk)) + roundUs(e, c, rounds(n - 1, 1, blk, 0));
    case CollType::ReduceScatter: return roundUs(e, c, rounds(n - 1, 1, blk, blk));
    case CollType::AllGather: return roundUs(e, c, rounds(n - 1, 1, blk, 0));
    case CollType::Broadcast:
    case CollType::Reduce: return chainUs(e, c, t, S);
    case CollType::AllToAll: return roundUs(e, c, rounds(n - 1, 1, S / 2, 0));
    case CollType::Barrier: return roundUs(e, c, rounds(n - 1, 1, 0, 0));
    default: return unknownUs(e, c, S);
  }
}

double rdUs(const Env& e, double c, CollType t, double S) {
  const int P = floorPow2(e.n);
  const double blk = S / e.n;
  double sum = 0;
  switch (t) {
    case CollType::AllReduce:
      if (e.leaders)  // each core's pair folds (S in, reduced; S back), then n/2 ranks double
        return roundUs(*e.leaders, c, rounds(1, 1, S, S, Where::Xor, 1)) +
               roundUs(*e.leaders, c, rounds(1, 1, S, 0, Where::Xor, 1)) +
               rdUs(*e.leaders, c, t, S);
      [[fallthrough]];
    case CollType::ReduceScatter:
      for (int64_t d = 1; d < P; d *= 2) sum += roundUs(e, c, rounds(1, 1, S, S, Where::Xor, d));
      return sum + foldUs(e, c, S, true, t == CollType::AllReduce ? S : blk);
    case CollType::AllGather:
      for (int64_t d = 1; d < P; d *= 2)
        sum += roundUs(e, c, rounds(1, 1, static_cast<double>(d) * S / P, 0, Where::Xor, d));
      return sum + foldUs(e, c, blk, false, S);
    case CollType::Barrier:
      for (int64_t d = 1; d < P; d *= 2) sum += roundUs(e, c, rounds(1, 1, 0, 0, Where::Xor, d));
      return sum + foldUs(e, c, 0, false, 0);
    default: return unknownUs(e, c, S);
  }
}

double hdUs(const Env& e, double c, CollType t, double S) {
  const int P = floorPow2(e.n);
  const double blk = S / e.n;
  double sum = 0;
  switch (t) {
    case CollType::AllReduce:
      return foldUs(e, c, S, true, S) + halvingUs(e, c, S, true) + halvingUs(e, c, S, false);
    case CollType::ReduceScatter: return foldUs(e, c, S, true, blk) + halvingUs(e, c, S, true);
    case CollType::AllGather: return foldUs(e, c, blk, false, S) + halvingUs(e, c, S, false);
    case CollType::Broadcast: {  // binomial scatter, farthest first, then allgather
      double m = S;
      for (int64_t senders = 1; senders < P; senders *= 2) {
        m /= 2;
        sum += roundUs(
            e, c,
            rounds(1, 1, m, 0, Where::Xor, P / (2 * senders), static_cast<double>(senders) / P));
      }
      return sum + halvingUs(e, c, S, false) + foldUs(e, c, 0, false, S);
    }
    case CollType::Reduce:  // halving, then a binomial gather of the reduced blocks
      for (int64_t d = 1; d < P; d *= 2)
        sum += roundUs(e, c,
                       rounds(1, 1, static_cast<double>(d) * S / P, 0, Where::Xor, d,
                              0.5 / static_cast<double>(d)));
      return sum + foldUs(e, c, S, true, 0) + halvingUs(e, c, S, true);
    case CollType::Barrier: return rdUs(e, c, t, S);
    default: return unknownUs(e, c, S);
  }
}

double dbtUs(const Env& e, double c, CollType t, double S) {
  if (e.n == 1) return 0;
  const double D = std::floor(std::log2(e.n)) + 1, X = 2.0 * ceilLog2(e.hosts);
  switch (t) {  // chunks are cut per half (per tree)
    case CollType::AllReduce: return pipeUs(e, c, Pipe{2 * D, S / 2, 4, 2, 4, X, 4});
    case CollType::Broadcast: return pipeUs(e, c, Pipe{D, S / 2, 2, 0, 2, X / 2, 2});
    case CollType::Reduce: return pipeUs(e, c, Pipe{D, S / 2, 2, 2, 2, X / 2, 2});
    case CollType::Barrier: return roundUs(e, c, rounds(2 * D, 1, 0, 0));
    default: return unknownUs(e, c, S);
  }
}

double directUs(const Env& e, double c, CollType t, double S) {
  const double k = e.n - 1, blk = S / e.n, root = 1.0 / e.n;
  switch (t) {
    case CollType::AllReduce: return roundUs(e, c, rounds(1, k, S, k * S, Where::All));
    case CollType::Broadcast: return roundUs(e, c, rounds(1, k, S, 0, Where::All, 1, root));
    case CollType::Reduce: return roundUs(e, c, rounds(1, k, S, k * S, Where::All, 1, root));
    case CollType::AllGather:
    case CollType::AllToAll: return roundUs(e, c, rounds(1, k, blk, 0, Where::All));
    case CollType::ReduceScatter: return roundUs(e, c, rounds(1, k, blk, k * blk, Where::All));
    case CollType::Barrier: return roundUs(e, c, rounds(1, k, 0, 0, Where::All));
    default: return unknownUs(e, c, S);
  }
}

double binomialUs(const Env& e, double c, CollType t, double S) {
  const double L = ceilLog2(e.n), X = ceilLog2(e.hosts);
  const Pipe bcast{L, S, L, 0, L, X, X}, reduce{L, S, L, L, L, X, X};
  switch (t) {
    case CollType::Broadcast: return pipeUs(e, c, bcast);
    case CollType::Reduce: return pipeUs(e, c, reduce);
    case CollType::AllReduce: return pipeUs(e, c, reduce) + pipeUs(e, c, bcast);
    case CollType::Barrier: return roundUs(e, c, rounds(2 * L, 1, 0, 0));
    default: return unknownUs(e, c, S);
  }
}

double disseminationUs(const Env& e, double c, CollType t, double S) {
  if (t != CollType::Barrier) return unknownUs(e, c, S);
  double sum = 0;
  for (int64_t d = 1; d < e.n; d *= 2) sum += roundUs(e, c, rounds(1, 1, 0, 0, Where::Shift, d));
  return sum;
}

double bruckUs(const Env& e, double c, CollType t, double S) {
  const double blk = S / e.n;
  double sum = 0;
  switch (t) {
    case CollType::AllGather:
      for (int64_t d = 1; d < e.n; d *= 2)
        sum += roundUs(e, c,
                       rounds(1, 1, static_cast<double>(std::min<int64_t>(d, e.n - d)) * blk, 0,
                              Where::Shift, d));
      return sum;
    case CollType::AllToAll:  // classic Bruck: half the blocks each step, two local rotations
      for (int64_t d = 1; d < e.n; d *= 2)
        sum += roundUs(e, c, rounds(1, 1, S / 2, 0, Where::Shift, d));
      return sum + 2 * S * e.gamma;
    case CollType::Barrier: return disseminationUs(e, c, t, S);
    default: return unknownUs(e, c, S);
  }
}

double pairwiseUs(const Env& e, double c, CollType t, double S) {
  const double k = e.n - 1, blk = S / e.n;
  switch (t) {
    case CollType::AllToAll:
    case CollType::AllGather: return roundUs(e, c, rounds(k, 1, blk, 0, Where::All));
    case CollType::ReduceScatter: return roundUs(e, c, rounds(k, 1, blk, blk, Where::All));
    case CollType::Barrier: return roundUs(e, c, rounds(k, 1, 0, 0, Where::All));
    default: return unknownUs(e, c, S);
  }
}

// The arena (src/exec/arena_op.h) runs in rounds of one arena chunk c, each
// ending in a flag wait (alpha). Its bandwidth is that of a byte moved from
// one rank to another: a copy in plus a copy out, each costing half; a
// reduction is fused into the read of the staged data (gamma replaces it).
double shmUs(const Env& e, double chunk, CollType t, double S) {
  const double n = e.n, c = e.arenaChunk > 0 ? e.arenaChunk : chunk;
  const double a = e.arena.alpha, half = e.arena.beta / 2, g = e.gamma;
  const double R = std::max(1.0, S / c), others = (n - 1) / n * S;
  switch (t) {
    case CollType::AllReduce:  // the cheaper of one-shot and reduce-scatter + allgather
      return std::min(R * a + S * half + (n - 1) * S * g, 2 * R * a + others * (2 * half + g));
    case CollType::Reduce: return 2 * R * a + others * (2 * half + g);
    case CollType::Broadcast: return R * a + (S + std::min(S, c)) * half;  // out overlaps in
    case CollType::AllGather: return std::max(1.0, S / n / c) * a + S * half;
    case CollType::ReduceScatter: return R * a + others * (half + g);
    case CollType::AllToAll: return R * a + others * 2 * half;
    case CollType::Barrier: return a;
    default: return unknownUs(e, chunk, S);
  }
}

// One round on a given link: `msgs` messages of `bytes` each, `reduced`
// bytes reduced as they arrive.
double linkRoundUs(const Env& e, const Link& lk, double chunk, double msgs, double bytes,
                   double reduced) {
  if (msgs <= 0) return 0;
  const double pieces = msgs * std::max(1.0, bytes / chunk);
  const double wire = msgs * bytes * lk.beta, reduce = reduced * e.gamma;
  const double exposed = exposedReduce(reduce, wire, pieces, lk.cpu);
  return lk.alpha * (1 + (pieces - 1) * e.share) + wire + exposed;
}

// Hierarchical allreduce (src/algo/hierarchical.cc): a direct reduce-scatter
// among the ppn ranks of a host, a ring per rail among the hosts on S/ppn
// bytes (the ppn rails share the host's network link), a direct allgather
// on the host. Without rails (one host, one rank per host, or hosts of
// different sizes) the builder runs a flat ring, and so does the model.
double hierUs(const Env& e, double c, CollType t, double S) {
  if (t != CollType::AllReduce) return unknownUs(e, c, S);
  if (e.hosts <= 1 || e.ppn <= 1 || e.n != e.hosts * e.ppn) return ringUs(e, c, t, S);
  const double L = e.ppn, H = e.hosts, seg = S / L;
  const double onHost = linkRoundUs(e, e.intra, c, L - 1, seg, (L - 1) * seg) +
                        linkRoundUs(e, e.intra, c, L - 1, seg, 0);
  // One ring step: every rail moves seg / H; together L of them on the link.
  const double blk = seg / H, pieces = std::max(1.0, blk / c);
  const double lat = e.inter.alpha * (1 + (pieces - 1) * e.share);
  const double wire = L * blk * e.inter.beta, reduce = blk * e.gamma;
  const double exposed = exposedReduce(reduce, wire, pieces, e.inter.cpu);
  return onHost + (H - 1) * (lat + wire + exposed) + (H - 1) * (lat + wire);
}

// Ranks of one host sharing its cores, without the arena: a broadcast's
// root returns once it has sent, so broadcasts called back to back overlap,
// and what sets their pace is the core that handles the most messages per
// call (its ranks' sends and receives take turns on it), not the depth of
// the tree. Ranks are taken as placed round-robin (rank r on core
// r % cores, as weft-perf -B 1 and mpirun --map-by core bind them), the
// root as rank 0; a message costs each side half a latency, and its bytes
// each side's copy. Measured over tcp, 64 B-64 KiB, 4 and 8 ranks on 2
// cores: the binomial tree puts 4 of 6 message ends (n=4) and 10 of 14
// (n=8) on core 0, the chain 3 and 7 on each core; the chain was 1.2-1.5x
// faster.
bool paceByCores(const Env& e, CollType t, Algo a) {
  return t == CollType::Broadcast && e.hosts == 1 && e.oversub > 1 && e.cores > 0 && !e.arenaOn &&
         (a == Algo::Chain || a == Algo::BinomialTree || a == Algo::Direct);
}

double busiestCoreUs(const Env& e, double chunk, double S, Algo a) {
  const int n = e.n, cores = std::min(e.cores, n);
  std::vector<double> ends(static_cast<size_t>(cores), 0.0);  // message ends per chunk, by core
  auto end = [&](int rank) { ends[static_cast<size_t>(rank % cores)] += 1; };
  for (int r = 0; r < n; ++r) {
    switch (a) {
      case Algo::Chain:
        if (r > 0) end(r);      // from r - 1
        if (r + 1 < n) end(r);  // to r + 1
        break;
      case Algo::BinomialTree: {
        if (r > 0) end(r);  // from its parent
        const int low = r == 0 ? n : (r & -r);
        for (int m = 1; m < low && r + m < n; m *= 2) end(r);  // to its children
        break;
      }
      default:  // direct: the root sends to everyone
        if (r > 0) {
          end(r);
          end(0);
        }
        break;
    }
  }
  const double most = *std::max_element(ends.begin(), ends.end());
  const double chunks = std::max(1.0, S / chunk), c = S / chunks;
  const double alpha0 = e.intra.alpha / e.oversub, beta0 = e.intra.beta / e.oversub;
  return chunks * most * (alpha0 / 2 + c * beta0);
}

// Send or recv: one message to a peer (on another host when there are several).
double p2pUs(const Env& e, double c, double S) { return roundUs(e, c, rounds(1, 1, S, 0)); }

double planUs(Algo a, CollType t, double S, const Env& e, double chunk) {
  if (t == CollType::Send || t == CollType::Recv) return p2pUs(e, chunk, S);
  if (paceByCores(e, t, a)) return busiestCoreUs(e, chunk, S, a);
  switch (a) {
    case Algo::Ring: return ringUs(e, chunk, t, S);
    case Algo::RecursiveDoubling: return rdUs(e, chunk, t, S);
    case Algo::HalvingDoubling: return hdUs(e, chunk, t, S);
    case Algo::DoubleBinaryTree: return dbtUs(e, chunk, t, S);
    case Algo::Direct: return directUs(e, chunk, t, S);
    case Algo::Chain: return chainUs(e, chunk, t, S);
    case Algo::BinomialTree: return binomialUs(e, chunk, t, S);
    case Algo::Bruck: return bruckUs(e, chunk, t, S);
    case Algo::Pairwise: return pairwiseUs(e, chunk, t, S);
    case Algo::Dissemination: return disseminationUs(e, chunk, t, S);
    case Algo::Shm: return shmUs(e, chunk, t, S);
    case Algo::Hierarchical: return hierUs(e, chunk, t, S);
    case Algo::Auto:
    case Algo::kCount: break;
  }
  return kInf;
}

struct ChunkRange {
  size_t lo, hi;
  explicit ChunkRange(const CostModel& m)
      : lo(std::max<size_t>(1, std::min(m.minChunk, m.maxChunk))),
        hi(std::max<size_t>(1, std::max(m.minChunk, m.maxChunk))) {}
  size_t next(size_t c) const { return c > hi / 2 ? hi : c * 2; }
};

// `a` at its best chunk size (the smallest of the equally good).
Choice bestChunk(Algo a, CollType t, size_t bytes, const Env& e, const ChunkRange& cr) {
  Choice best;
  best.algo = a;
  best.chunkBytes = cr.lo;
  best.estUs = kInf;
  const double S = static_cast<double>(bytes);
  for (size_t c = cr.lo;; c = cr.next(c)) {
    const double us = planUs(a, t, S, e, static_cast<double>(c));
    if (us < best.estUs) {
      best.estUs = us;
      best.chunkBytes = c;
    }
    if (c >= cr.hi) break;
  }
  return best;
}

Choice chooseModel(CollType t, size_t bytes, const CostModel& m, const Env& e,
                   const ChunkRange& cr) {
  const Algo first = defaultAlgo(t);
  Choice best;
  best.chunkBytes = cr.lo;
  best.estUs = kInf;
  for (int i = -1; i < static_cast<int>(Algo::kCount); ++i) {
    const Algo a = i < 0 ? first : static_cast<Algo>(i);
    if (a == Algo::Auto || (i >= 0 && a == first) || !algoUsable(a, t, m)) continue;
    Choice c = bestChunk(a, t, bytes, e, cr);
    if (c.estUs < best.estUs) best = c;
  }
  return best;
}

std::string formatUs(double us) {
  if (!std::isfinite(us)) return "inf";
  if (us < 1e3) return strFormat("%.3g us", us);
  if (us < 1e6) return strFormat("%.3g ms", us / 1e3);
  return strFormat("%.3g s", us / 1e6);
}

std::string formatLink(const char* name, const LinkClass& l) {
  return strFormat("%s %g us %g GB/s", name, l.latencyUs, l.bandwidthGBs);
}

}  // namespace

bool algoUsable(Algo a, CollType t, const CostModel& m) {
  return algoImplements(a, t) && (a != Algo::Shm || m.shmArena);
}

double modelUs(Algo a, CollType t, size_t bytes, const CostModel& m, size_t chunkBytes) {
  const Env e(m);
  return planUs(a, t, static_cast<double>(bytes), e,
                static_cast<double>(std::max<size_t>(chunkBytes, 1)));
}

double estimateUs(Algo a, const CollArgs& args, const CostModel& m, size_t chunkBytes) {
  const CollType t = args.type;
  const size_t bytes = collBytes(args, std::max(1, m.nranks));
  if (t == CollType::Send || t == CollType::Recv)
    return a == Algo::Auto ? modelUs(a, t, bytes, m, chunkBytes) : kInf;
  if (a == Algo::Auto) {
    double best = kInf;
    for (int i = 1; i < static_cast<int>(Algo::kCount); ++i)
      best = std::min(best, estimateUs(static_cast<Algo>(i), args, m, chunkBytes));
    return best;
  }
  if (!algoUsable(a, t, m)) return kInf;
  return modelUs(a, t, bytes, m, chunkBytes);
}

Choice evaluate(Algo a, const CollArgs& args, const CostModel& m) {
  const Env e(m);
  const ChunkRange cr(m);
  const CollType t = args.type;
  const bool p2p = t == CollType::Send || t == CollType::Recv;
  if (p2p ? a != Algo::Auto : !algoUsable(a, t, m)) {
    Choice none;
    none.algo = a;
    none.chunkBytes = cr.lo;
    none.estUs = kInf;
    return none;
  }
  const size_t bytes = collBytes(args, e.n);
  if (a == Algo::Auto && !p2p) return chooseModel(t, bytes, m, e, cr);
  return bestChunk(a, t, bytes, e, cr);
}

Choice chooseForBytes(CollType t, size_t bytes, const CostModel& m, const AlgoRules* rules) {
  const Env e(m);
  const ChunkRange cr(m);
  if (t == CollType::Send || t == CollType::Recv) return bestChunk(Algo::Auto, t, bytes, e, cr);
  if (rules && !rules->empty()) {
    const Algo forced = rules->lookup(t, bytes, m.shmArena);
    if (forced != Algo::Auto && algoUsable(forced, t, m)) {
      Choice c = bestChunk(forced, t, bytes, e, cr);
      c.forced = true;
      return c;
    }
  }
  return chooseModel(t, bytes, m, e, cr);
}

Choice choose(const CollArgs& args, const CostModel& m, const AlgoRules* rules) {
  return chooseForBytes(args.type, collBytes(args, std::max(1, m.nranks)), m, rules);
}

std::string tuningTable(const CostModel& m) { return tuningTable(m, nullptr); }

std::string tuningTable(const CostModel& m, const AlgoRules* rules) {
  const Env e(m);
  std::string out =
      strFormat("tuning model: %d ranks on %d host(s), %d per host, %s cores%s, shm arena %s\n",
                e.n, e.hosts, e.ppn, m.cores > 0 ? std::to_string(m.cores).c_str() : "unknown",
                e.oversub > 1 ? strFormat(" (oversubscribed x%.2g)", e.oversub).c_str() : "",
                m.shmArena ? "on" : "off");
  out += "  " + formatLink("intra", m.intra) + " | " + formatLink("inter", m.inter) + " | " +
         formatLink("arena", m.arena) +
         strFormat(" | reduce %g GB/s | chunk %s..%s | msgShare %g\n", m.reduceGBs,
                   formatByteSize(ChunkRange(m).lo).c_str(),
                   formatByteSize(ChunkRange(m).hi).c_str(), m.msgShare);
  out += strFormat("  %-15s %-15s %-22s %-12s %s\n", "collective", "size", "algorithm", "chunk",
                   "estimate (at range start .. end)");

  // Samples: 0 and 2^k, 3*2^(k-1) up to 4 GiB; a range runs from the first
  // sample of a choice to the first sample of the next.
  size_t sizes[2 + 2 * 32];
  int nsizes = 0;
  sizes[nsizes++] = 0;
  const size_t top = sizeof(size_t) >= 8 ? size_t{1} << 32 : size_t{1} << 30;
  for (size_t s = 1; s <= top; s *= 2) {
    sizes[nsizes++] = s;
    if (s >= 2 && s < top) sizes[nsizes++] = s + s / 2;
  }

  std::string spec;
  for (CollType t : kTableColls) {
    const int count = t == CollType::Barrier ? 1 : nsizes;
    std::string collSpec;
    bool firstRow = true;
    for (int i = 0; i < count;) {
      const Choice c0 = chooseForBytes(t, sizes[i], m, rules);
      size_t cmin = c0.chunkBytes, cmax = c0.chunkBytes;
      int j = i + 1;
      Choice last = c0;
      for (; j < count; ++j) {
        Choice c = chooseForBytes(t, sizes[j], m, rules);
        if (c.algo != c0.algo || c.forced != c0.forced) break;
        cmin = std::min(cmin, c.chunkBytes);
        cmax = std::max(cmax, c.chunkBytes);
        last = c;
      }
      const bool whole = i == 0 && j == count;
      const std::string range =
          t == CollType::Barrier
              ? "-"
              : formatByteSize(sizes[i]) + "-" + (j == count ? "inf" : formatByteSize(sizes[j]));
      const std::string algo = std::string(algoName(c0.algo)) + (c0.forced ? " (WEFT_ALGO)" : "");
      const std::string chunk = t == CollType::Barrier ? "-"
                                : cmin == cmax         ? formatByteSize(cmin)
                                               : formatByteSize(cmin) + ".." + formatByteSize(cmax);
      std::string est = formatUs(c0.estUs);
      if (j - 1 > i)
        est += " .. " + formatUs(last.estUs) + " (" + formatByteSize(sizes[j - 1]) + ")";
      out += strFormat("  %-15s %-15s %-22s %-12s %s\n", firstRow ? collName(t) : "", range.c_str(),
                       algo.c_str(), chunk.c_str(), est.c_str());
      if (!collSpec.empty()) collSpec += ",";
      collSpec += whole ? std::string(algoName(c0.algo)) : range + "=" + algoName(c0.algo);
      firstRow = false;
      i = j;
    }
    if (!spec.empty()) spec += ";";
    spec += std::string(collName(t)) + ":" + collSpec;
  }
  out += "  as WEFT_ALGO: " + spec;
  return out;
}

}  // namespace weft
