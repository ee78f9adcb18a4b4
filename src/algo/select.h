// Algorithm selection: an alpha-beta-gamma cost model per link class, and
// the WEFT_ALGO override (algo_rules.h) on top of it. Pure code: no I/O, no
// allocation in choose(); the communicator fills a CostModel once and asks
// per call. docs/tuning.md explains the same with examples.
//
// Units: latency alpha in microseconds per message; bandwidth as beta = 1 /
// (GB/s * 1e3) microseconds per byte (1 GB = 1e9 bytes); gamma = 1 /
// (reduceGBs * 1e3) microseconds per byte reduced (dst = a op b) or copied
// locally. S = collBytes(args, n), the size nccl-tests prints; blk = S / n.
//
// Every algorithm is described as a sequence of rounds (or a pipeline) and
// priced by two formulas:
//
//   round (a rank sends k messages of m bytes, receives as many, reduces r
//   bytes of what it received, copies l bytes locally; each message is cut
//   into C = max(1, m / chunk) chunks, fractional so that the estimate is
//   continuous and monotone in size):
//     t = alpha * (1 + (k*C - 1) * msgShare)       latency: the first message
//                                                  pays alpha, every further
//                                                  chunk or peer msgShare*alpha
//       + W                                        wire: k*m*beta (see links)
//       + max(R / (k*C), R - W * (k*C - 1) / (k*C)) reduction, R = r*gamma,
//                                                  overlapped with the wire
//                                                  except the last piece
//       + l * gamma
//
//   pipeline (D hops; M bytes in C = max(1, M / chunk) chunks of c = M / C;
//   per stage a rank sends s*c bytes in q messages and reduces v*c bytes):
//     t = D * (alpha + s*c*beta + v*c*gamma)       fill: one chunk, hop by hop
//       + (C - 1) * (q*msgShare*alpha + max(s*c*beta, v*c*gamma))   the rest
//
// Links. One host (nhosts == 1): intra. Several hosts: ranks are assumed
// placed host by host, p = maxRanksPerHost per host; `inter` is a host's
// network link, shared by the ranks of the host that send off the host in
// the same round (the fan f). A round's time is that of its slowest link:
//   ring / chain / trees (neighbours): f = 1 per host; alpha = max(alpha_intra,
//     alpha_inter), beta = max(beta_intra, beta_inter) - the inter class bounds
//     them;
//   XOR partner at distance d (rd, hd, binomial): on the host when 2d <= p
//     and 2d divides p, else off with f = min(d, p) * (fraction of ranks active);
//   shift partner r+d (bruck, dissemination): off the host for some ranks
//     whenever nhosts > 1, f = min(d, p);
//   all peers (direct, pairwise): a fraction (n - p) / (n - 1) of the bytes
//     goes off the host through a link shared by all p ranks;
//     W = max(k*m*(1 - off)*beta_intra, p*k*m*off*beta_inter).
//   Shm uses the arena class only.
// Oversubscription (cores > 0 and p > cores): o = p / cores ranks share a
// core; every alpha is multiplied by o (a rank must be scheduled before it
// answers) and the CPU-bound rates (intra and arena bandwidth, gamma) are
// divided by o; the network's bandwidth is not.
//
// Algorithms (L = ceil(log2 n), P = largest power of two <= n; "fold" = the
// n - P extra ranks hand their data to a partner first and get the result
// last, one round of S each way at distance 1):
//   ring       allreduce: 2(n-1) rounds of S/n, (n-1) of them reduce S/n;
//              reduce_scatter: n-1 rounds of blk reduced; allgather: n-1 of blk;
//              broadcast/reduce: as chain; alltoall: n-1 rounds of S/2;
//              barrier: n-1 empty rounds.
//   rd         allreduce and reduce_scatter: log2 P rounds of S, reduced, at
//              distance 1, 2, 4, ... (+ fold); allgather: round i sends 2^i*S/P
//              at distance 2^i (+ fold); barrier: log2 P empty rounds (+ fold).
//   hd         allreduce: halving rounds of S/2, S/4, ... S/P reduced at distance
//              1, 2, ..., then the same sizes doubling back (2 log2 P rounds,
//              2(P-1)/P*S bytes, (P-1)/P*S reduced) + fold; reduce_scatter: the
//              halving half; allgather: the doubling half; broadcast: binomial
//              scatter + doubling allgather; reduce: halving + binomial gather.
//   dbt        two complementary binary trees, each carrying S/2, pipelined:
//              allreduce D = 2L, s = 2, v = 1, q = 4 (each rank sends 2S in all,
//              reduces S); broadcast D = L, s = 1, q = 2; reduce D = L, s = v = 1.
//   direct     one round, k = n-1 peers: allreduce m = S, r = (n-1)*S (one-shot);
//              broadcast m = S (the root); reduce m = S, r = (n-1)*S (the root);
//              allgather / alltoall m = blk; reduce_scatter m = blk, r = (n-1)*blk.
//   chain      broadcast: pipeline D = n-1, s = 1; reduce: D = n-1, s = v = 1;
//              allreduce: both at once, D = 2(n-1), s = 2, v = 1, q = 2.
//   binomial   broadcast: L rounds of S, farthest partner first, 2^i/n of the
//              ranks sending in round i; reduce: L rounds of S reduced, nearest
//              first; allreduce: both; barrier: 2L empty rounds.
//   bruck      allgather: L rounds, round i sends min(2^i, n-2^i)*blk to r-2^i,
//              + S copied locally (the final rotation); alltoall: L rounds of
//              S/2 + 2S copied locally.
//   pairwise   alltoall / allgather: n-1 rounds of blk, each to a different
//              peer; reduce_scatter: the same, reduced.
//   dissem.    barrier: L empty rounds, shift partners.
//   shm        through the shared arena (arena class, one host): allreduce and
//              reduce: write S, reduce the own 1/n slice ((n-1)/n*S), read S;
//              broadcast: a 2-stage pipeline (root writes, others read);
//              allgather: write blk, read (n-1)*blk; reduce_scatter: write S,
//              reduce (n-1)*blk; alltoall: write S, read (n-1)*blk;
//              barrier: one empty round.
// A combination the support table gains but this model does not know costs
// n-1 neighbour rounds of S reduced (pessimistic: WEFT_ALGO still forces it).
//
// Chunk size: the candidates minChunk, 2*minChunk, ... up to maxChunk; the
// one with the lowest estimate wins, the smallest on ties (more chunks
// pipeline and overlap reduction, each costs msgShare*alpha).
#pragma once

#include <cstddef>
#include <string>

#include "algo/algo_rules.h"
#include "algo/schedule.h"

namespace weft {

struct LinkClass {
  double latencyUs = 1;     // one message, one way
  double bandwidthGBs = 1;  // per direction
};

struct CostModel {
  int nranks = 1, nhosts = 1, maxRanksPerHost = 1;
  int cores = 0;  // online CPUs of the host (0 = unknown); ranks per host > cores = oversubscribed
  LinkClass intra{0.5, 8.0};   // ranks of one host (shm)
  LinkClass inter{15.0, 1.0};  // ranks on different hosts (tcp, ...): one host's network link
  LinkClass arena{0.2, 10.0};  // the shm arena (only when shmArena)
  double reduceGBs = 10.0;     // host reduction dst = a op b, bytes of a per second
  bool shmArena = false;       // all ranks on one host, arena available
  size_t minChunk = 64 << 10, maxChunk = 4 << 20;
  // The share of a link's latency that each further message of a round (one
  // more chunk, one more peer) costs: its software overhead; the rest of the
  // latency overlaps with the first message's.
  double msgShare = 0.25;
  // Bytes per round of the arena (its staging buffer); 0 = the chunk size
  // being evaluated.
  size_t arenaChunk = 0;
};

struct Choice {
  Algo algo = Algo::Auto;
  size_t chunkBytes = 1 << 20;
  double estUs = 0;
  bool forced = false;  // from WEFT_ALGO
};

// Whether choose() may pick `a` for `t` under `m`: algoImplements(a, t), and
// for Algo::Shm also m.shmArena.
bool algoUsable(Algo a, CollType t, const CostModel& m);

// The model's time in microseconds for algorithm `a` on `args` with messages
// cut at `chunkBytes`; +inf when `a` is not usable for args.type under `m`
// (see algoUsable). Auto: the estimate of what choose() picks without rules
// (for send/recv: one message to a peer).
double estimateUs(Algo a, const CollArgs& args, const CostModel& m, size_t chunkBytes);

// The same formulas for a collective of `bytes` (collBytes) regardless of
// the support table (tests and the tuning table use it); Auto is +inf.
double modelUs(Algo a, CollType t, size_t bytes, const CostModel& m, size_t chunkBytes);

// `a` with the model's best chunk size for it: {a, chunk, estimate, false};
// estUs is +inf when `a` is not usable for args.type.
Choice evaluate(Algo a, const CollArgs& args, const CostModel& m);

// The algorithm and chunk size for one call. Send/recv: Algo::Auto. Else the
// first WEFT_ALGO rule (rules may be null or empty) that matches the type and
// collBytes and names a usable algorithm wins, forced = true, with the
// model's chunk size for it; otherwise the usable algorithm with the lowest
// estimate (defaultAlgo(t) first, so it wins ties).
Choice choose(const CollArgs& args, const CostModel& m, const AlgoRules* rules);
// The same for a collective of `bytes` (collBytes) bytes.
Choice chooseForBytes(CollType t, size_t bytes, const CostModel& m, const AlgoRules* rules);

// Human-readable choices of the model for every collective: size ranges ->
// algorithm, chunk sizes and estimated times, then the same as a WEFT_ALGO
// string. Lines separated by '\n', no trailing newline. For the INFO log of
// subsystem TUNING. The second form marks ranges that `rules` force.
std::string tuningTable(const CostModel& m);
std::string tuningTable(const CostModel& m, const AlgoRules* rules);

}  // namespace weft
