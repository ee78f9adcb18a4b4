// Every algorithm of src/algo as the cost model prices it: rounds and
// pipelines (cost_pricing.h) in the shapes its builder produces, per
// collective; planUs dispatches on the algorithm. The formulas are written
// out in select.h; an algorithm's own file says the same of its schedule.
// A new algorithm gets its function here and a case in planUs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "algo/cost_pricing.h"

namespace weft {
namespace cost {
namespace {

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
    case CollType::Broadcast:
      return pipeUs(e, c, Pipe{n - 1, S, 1, 0, 1, h - 1, 1});
    case CollType::Reduce:
      return pipeUs(e, c, Pipe{n - 1, S, 1, 1, 1, h - 1, 1});
    case CollType::AllReduce:
      return pipeUs(e, c, Pipe{2 * (n - 1), S, 2, 1, 2, 2 * (h - 1), 1});
    case CollType::Barrier:
      return roundUs(e, c, rounds(2 * (n - 1), 1, 0, 0));
    default:
      return unknownUs(e, c, S);
  }
}

double ringUs(const Env& e, double c, CollType t, double S) {
  const double n = e.n, blk = S / n;
  switch (t) {
    case CollType::AllReduce:
      return roundUs(e, c, rounds(n - 1, 1, blk, blk)) + roundUs(e, c, rounds(n - 1, 1, blk, 0));
    case CollType::ReduceScatter:
      return roundUs(e, c, rounds(n - 1, 1, blk, blk));
    case CollType::AllGather:
      return roundUs(e, c, rounds(n - 1, 1, blk, 0));
    case CollType::Broadcast:
    case CollType::Reduce:
      return chainUs(e, c, t, S);
    case CollType::AllToAll:
      return roundUs(e, c, rounds(n - 1, 1, S / 2, 0));
    case CollType::Barrier:
      return roundUs(e, c, rounds(n - 1, 1, 0, 0));
    default:
      return unknownUs(e, c, S);
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
    default:
      return unknownUs(e, c, S);
  }
}

double hdUs(const Env& e, double c, CollType t, double S) {
  const int P = floorPow2(e.n);
  const double blk = S / e.n;
  double sum = 0;
  switch (t) {
    case CollType::AllReduce:
      return foldUs(e, c, S, true, S) + halvingUs(e, c, S, true) + halvingUs(e, c, S, false);
    case CollType::ReduceScatter:
      return foldUs(e, c, S, true, blk) + halvingUs(e, c, S, true);
    case CollType::AllGather:
      return foldUs(e, c, blk, false, S) + halvingUs(e, c, S, false);
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
    case CollType::Barrier:
      return rdUs(e, c, t, S);
    default:
      return unknownUs(e, c, S);
  }
}

double dbtUs(const Env& e, double c, CollType t, double S) {
  if (e.n == 1) return 0;
  const double D = std::floor(std::log2(e.n)) + 1, X = 2.0 * ceilLog2(e.hosts);
  switch (t) {  // chunks are cut per half (per tree)
    case CollType::AllReduce:
      return pipeUs(e, c, Pipe{2 * D, S / 2, 4, 2, 4, X, 4});
    case CollType::Broadcast:
      return pipeUs(e, c, Pipe{D, S / 2, 2, 0, 2, X / 2, 2});
    case CollType::Reduce:
      return pipeUs(e, c, Pipe{D, S / 2, 2, 2, 2, X / 2, 2});
    case CollType::Barrier:
      return roundUs(e, c, rounds(2 * D, 1, 0, 0));
    default:
      return unknownUs(e, c, S);
  }
}

double directUs(const Env& e, double c, CollType t, double S) {
  const double k = e.n - 1, blk = S / e.n, root = 1.0 / e.n;
  switch (t) {
    case CollType::AllReduce:
      return roundUs(e, c, rounds(1, k, S, k * S, Where::All));
    case CollType::Broadcast:
      return roundUs(e, c, rounds(1, k, S, 0, Where::All, 1, root));
    case CollType::Reduce:
      return roundUs(e, c, rounds(1, k, S, k * S, Where::All, 1, root));
    case CollType::AllGather:
    case CollType::AllToAll:
      return roundUs(e, c, rounds(1, k, blk, 0, Where::All));
    case CollType::ReduceScatter:
      return roundUs(e, c, rounds(1, k, blk, k * blk, Where::All));
    case CollType::Barrier:
      return roundUs(e, c, rounds(1, k, 0, 0, Where::All));
    default:
      return unknownUs(e, c, S);
  }
}

// Fold (reproducible calls, fold.cc): direct reduce-scatter of pieces to
// the blocks' owners; then a ring allgather (allreduce) or every block to
// the root in one round (reduce).
double foldAlgoUs(const Env& e, double c, CollType t, double S) {
  const double k = e.n - 1, blk = S / e.n, root = 1.0 / e.n;
  const double scatter = directUs(e, c, CollType::ReduceScatter, S);
  switch (t) {
    case CollType::ReduceScatter:
      return scatter;
    case CollType::AllReduce:
      return scatter + ringUs(e, c, CollType::AllGather, S);
    case CollType::Reduce:
      return scatter + roundUs(e, c, rounds(1, k, blk, 0, Where::All, 1, root));
    default:
      return unknownUs(e, c, S);
  }
}

double binomialUs(const Env& e, double c, CollType t, double S) {
  const double L = ceilLog2(e.n), X = ceilLog2(e.hosts);
  const Pipe bcast{L, S, L, 0, L, X, X}, reduce{L, S, L, L, L, X, X};
  switch (t) {
    case CollType::Broadcast:
      return pipeUs(e, c, bcast);
    case CollType::Reduce:
      return pipeUs(e, c, reduce);
    case CollType::AllReduce:
      return pipeUs(e, c, reduce) + pipeUs(e, c, bcast);
    case CollType::Barrier:
      return roundUs(e, c, rounds(2 * L, 1, 0, 0));
    default:
      return unknownUs(e, c, S);
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
    case CollType::Barrier:
      return disseminationUs(e, c, t, S);
    default:
      return unknownUs(e, c, S);
  }
}

// Gather-fold (fold.cc): a Bruck allgather of the n vectors, then one
// fold of n * S on every rank.
double gatherFoldUs(const Env& e, double c, CollType t, double S) {
  if (t != CollType::AllReduce) return unknownUs(e, c, S);
  return bruckUs(e, c, CollType::AllGather, S * e.n) + (e.n - 1) * S * e.gamma;
}

double pairwiseUs(const Env& e, double c, CollType t, double S) {
  const double k = e.n - 1, blk = S / e.n;
  switch (t) {
    case CollType::AllToAll:
    case CollType::AllGather:
      return roundUs(e, c, rounds(k, 1, blk, 0, Where::All));
    case CollType::ReduceScatter:
      return roundUs(e, c, rounds(k, 1, blk, blk, Where::All));
    case CollType::Barrier:
      return roundUs(e, c, rounds(k, 1, 0, 0, Where::All));
    default:
      return unknownUs(e, c, S);
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
    case CollType::Reduce:
      return 2 * R * a + others * (2 * half + g);
    case CollType::Broadcast:
      return R * a + (S + std::min(S, c)) * half;  // out overlaps in
    case CollType::AllGather:
      return std::max(1.0, S / n / c) * a + S * half;
    case CollType::ReduceScatter:
      return R * a + others * (half + g);
    case CollType::AllToAll:
      return R * a + others * 2 * half;
    case CollType::Barrier:
      return a;
    default:
      return unknownUs(e, chunk, S);
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
// each side's copy. With 4 and 8 ranks on 2 cores the binomial tree puts
// 4 of 6 message ends (n=4) and 10 of 14 (n=8) on core 0, the chain 3 and 7
// on each core, so the chain is chosen (the measurement: docs/
// performance.md, "Measurements behind the cost model").
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

}  // namespace

double planUs(Algo a, CollType t, double S, const Env& e, double chunk) {
  if (t == CollType::Send || t == CollType::Recv) return p2pUs(e, chunk, S);
  if (paceByCores(e, t, a)) return busiestCoreUs(e, chunk, S, a);
  switch (a) {
    case Algo::Ring:
      return ringUs(e, chunk, t, S);
    case Algo::RecursiveDoubling:
      return rdUs(e, chunk, t, S);
    case Algo::HalvingDoubling:
      return hdUs(e, chunk, t, S);
    case Algo::DoubleBinaryTree:
      return dbtUs(e, chunk, t, S);
    case Algo::Direct:
      return directUs(e, chunk, t, S);
    case Algo::Chain:
      return chainUs(e, chunk, t, S);
    case Algo::BinomialTree:
      return binomialUs(e, chunk, t, S);
    case Algo::Bruck:
      return bruckUs(e, chunk, t, S);
    case Algo::Pairwise:
      return pairwiseUs(e, chunk, t, S);
    case Algo::Dissemination:
      return disseminationUs(e, chunk, t, S);
    case Algo::Shm:
      return shmUs(e, chunk, t, S);
    case Algo::Hierarchical:
      return hierUs(e, chunk, t, S);
    case Algo::Fold:
      return foldAlgoUs(e, chunk, t, S);
    case Algo::GatherFold:
      return gatherFoldUs(e, chunk, t, S);
    case Algo::Auto:
    case Algo::kCount:
      break;
  }
  return kInf;
}

}  // namespace cost
}  // namespace weft
