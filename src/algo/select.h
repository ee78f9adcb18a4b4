// Algorithm selection: an alpha-beta-gamma cost model per link class, and
// the WEFT_ALGO override (algo_rules.h) on top of it. Pure code: no I/O, no
// allocation in choose(); the communicator fills a CostModel once and asks
// per call. docs/tuning.md explains the same with examples. The code:
// select.cc (the selector), cost_pricing.{h,cc} (rounds and pipelines),
// cost_algos.cc (each algorithm), tuning_table.cc (the INFO table).
//
// Units: alpha in microseconds per message; beta = 1 / (GB/s * 1e3)
// microseconds per byte (1 GB = 1e9 bytes); gamma = 1 / (reduceGBs * 1e3)
// microseconds per byte reduced (dst = a op b) or copied locally.
// S = collBytes(args, n), the size nccl-tests prints; blk = S / n. A link's
// bandwidth is what one rank can send (and at the same time receive), so
// the bytes that count are all the bytes the busiest rank sends.
//
// Every algorithm is a sequence of rounds, or a pipeline, priced by one of
// two formulas. Chunk counts are fractional (C = max(1, bytes / chunk)) so
// that every estimate is continuous and non-decreasing in size.
//
//   round: a rank sends k messages of m bytes (to k peers), receives as many
//   and reduces r bytes of them; P = k * max(1, m / chunk) pieces:
//     t = alpha * (1 + (P - 1) * msgShare)     the first message pays alpha,
//                                              each further chunk or peer
//                                              only its overhead share
//       + W                                    wire, k*m*beta (see Links)
//       + max(R / P, R - W * (P - 1) / P)      reduction R = r*gamma, hidden
//                                              behind the wire except for the
//                                              last piece (or its excess)
//
//   pipeline: M bytes in C = max(1, M / chunk) chunks of c = M / C cross D
//   hops; afterwards the busiest rank sends s chunks (s_off of them off its
//   host) in q messages and reduces v chunks per chunk time:
//     t = sum over hops (alpha_hop + c*beta_hop) + D * min(v, 1)*c*gamma
//                                              fill: one chunk, hop by hop
//       + (C - 1) * (q * msgShare * alpha + max(W_c, v*c*gamma))
//     with W_c = max(s_off*c*beta_inter, s*c*beta_intra).
//
// Links. One host (nhosts == 1): the intra class. Several hosts: ranks are
// assumed placed host by host, p = maxRanksPerHost per host; `inter` is a
// host's network link, shared by those of its ranks that send off the host
// in the same round (the fan f). A round costs what its slowest link costs:
//   neighbours (ring): f = 1, alpha = max(alpha_intra, alpha_inter),
//     W = k*m * max(beta_intra, beta_inter): the inter class bounds the ring;
//   XOR partner at distance d (rd, hd): on the host when 2d <= p and 2d
//     divides p (intra class), else off it with f = min(d, p) * (fraction of
//     ranks sending), W = max(k*m*beta_intra, f*k*m*beta_inter);
//   shift partner r+d (bruck, dissemination): some ranks of every host cross
//     whenever nhosts > 1, f = min(d, p);
//   all peers (direct, pairwise): a fraction off = (n-p)/(n-1) of the bytes
//     leaves the host, W = max(k*m*(1-off)*beta_intra, f*k*m*off*beta_inter)
//     with f = p (all ranks send; 1 for the root of broadcast / reduce);
//   pipelines: chain crosses hosts on nhosts-1 of its hops (s_off = 1),
//     binomial and dbt on ceil(log2 nhosts) per tree pass (s_off = the root's
//     off-host children for binomial, every send for dbt).
//   Shm uses the arena class only.
// Oversubscription (cores > 0 and p > cores): o = p / cores ranks share a
// core. Every alpha is multiplied by o (a rank must be scheduled before it
// answers), and the rates the CPUs provide (intra and arena bandwidth,
// gamma) are divided by o; the network's bandwidth is not.
//
// Algorithms, as their files describe them (L = ceil(log2 n), P = the largest
// power of two <= n; "fold": when n != P, the extra ranks first hand their
// data to a partner at distance 1 and get the result back last):
//   ring      allreduce: n-1 rounds of blk reduced, then n-1 of blk (2(n-1)
//             steps, 2(n-1)/n*S sent, (n-1)/n*S reduced); reduce_scatter: the
//             first half; allgather: the second; alltoall: n-1 rounds of S/2;
//             broadcast / reduce: as chain; barrier: n-1 empty rounds.
//   rd        allreduce: log2 P rounds of S, reduced, at distance 1, 2, 4, ...
//             (+ fold of S); allgather: round i sends 2^i*S/P at distance 2^i
//             (+ fold); reduce_scatter as allreduce; barrier: empty rounds.
//   hd        Rabenseifner: halving rounds of S/2, S/4, ..., S/P reduced at
//             distance P/2, P/4, ..., 1, then the same rounds backwards
//             (2 log2 P steps, 2(P-1)/P*S sent, (P-1)/P*S reduced) + fold;
//             reduce_scatter: the halving half; allgather: the doubling half.
//   dbt       two trees of depth D = floor(log2 n) + 1, each carrying S/2 in
//             chunks: allreduce a pipeline of 2D hops, s = 4, v = 2, q = 4
//             (2S sent per rank, S reduced); broadcast D hops, s = 2;
//             reduce D hops, s = v = 2.
//   direct    one round with k = n-1 peers: allreduce m = S, r = (n-1)*S
//             (one-shot); broadcast / reduce the root's m = S (reduce
//             r = (n-1)*S); allgather / alltoall m = blk; reduce_scatter
//             m = blk, r = (n-1)*blk; barrier m = 0.
//   chain     broadcast: pipeline of n-1 hops, s = 1; reduce: s = v = 1;
//             allreduce: both directions at once, 2(n-1) hops, s = 2, v = 1.
//   binomial  pipelines of L hops; the root sends (broadcast) or receives and
//             reduces (reduce) L chunks per chunk time: s = L (v = L).
//   bruck     allgather: L rounds, round i sends min(2^i, n-2^i)*blk to r-2^i
//             ((n-1)/n*S in all); alltoall: L rounds of S/2 + 2S copied.
//   pairwise  alltoall / allgather: n-1 rounds of blk to n-1 different peers;
//             reduce_scatter: the same, reduced.
//   dissemination  barrier: L empty rounds to r + 2^i.
//   shm       the arena (src/exec/arena_op.h) in rounds of arenaChunk bytes
//             (R = S / chunk rounds, one flag wait alpha_arena each, two for
//             allreduce and reduce); a byte moved between ranks costs
//             beta_arena (half in, half out) and a reduction is fused into
//             the read: allreduce = min(one-shot R*a + S*b/2 + (n-1)*S*gamma,
//             2*R*a + (n-1)/n*S*(b + gamma)); reduce = the second; broadcast
//             R*a + (S + c)*b/2; allgather S*b/2; reduce_scatter
//             (n-1)/n*S*(b/2 + gamma); alltoall (n-1)/n*S*b; barrier alpha.
// A combination the support table gains before this model knows it costs
// n-1 neighbour rounds of S reduced: pessimistic, WEFT_ALGO still forces it.
// Send / recv: one round of one message.
//
// Chunk size: the candidates minChunk, 2*minChunk, ... up to maxChunk; the
// one with the lowest estimate wins, the smallest on ties. More chunks hide
// reductions and fill pipelines sooner; each costs msgShare*alpha.
#pragma once

#include <cstddef>
#include <string>

#include "algo/algo_rules.h"
#include "algo/schedule.h"

namespace weft {

struct LinkClass {
  double latencyUs = 1;     // one message, one way
  double bandwidthGBs = 1;  // per direction
  // Moving the bytes costs the ranks' own CPU (sockets: the kernel's copies
  // run on the sending and receiving rank's cores; shared-memory FIFOs:
  // the ranks copy): then reductions do not overlap the wire, they take
  // turns with it. False for RDMA and copy engines.
  bool cpuBound = false;
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
  // latency overlaps with the first message's. 1 when ranks share cores.
  double msgShare = 0.25;
  // Bytes per round of the arena (its staging buffer); 0 = the chunk size
  // being evaluated.
  size_t arenaChunk = 0;
  // Two ranks on every core, in ring order (topo/comm_topo.h pairedCores):
  // recursive doubling allreduce folds each core's pair, then doubles over
  // one rank per core.
  bool pairedCores = false;
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
// estimate (defaultAlgo(t) first, so it wins ties). A reproducible call
// (args.repro) considers only the algorithms that fold in rank order
// (algoFoldsInRankOrder: shm, fold, direct; fold first), and rules naming
// any other are passed over for it; Fold is otherwise only taken when a
// rule names it. A compressed call (args.wire) likewise considers only the
// algorithms that carry it (algoCarriesWire: ring, fold, direct, shm).
Choice choose(const CollArgs& args, const CostModel& m, const AlgoRules* rules);
// The same for a collective of `bytes` (collBytes) bytes; `ordered`: a
// reproducible call; `wire`: a compressed one.
Choice chooseForBytes(CollType t, size_t bytes, const CostModel& m, const AlgoRules* rules,
                      bool ordered = false, bool wire = false);

// Human-readable choices of the model for every collective: size ranges ->
// algorithm, chunk sizes and estimated times, then the same as a WEFT_ALGO
// string. Lines separated by '\n', no trailing newline. For the INFO log of
// subsystem TUNING. The second form marks ranges that `rules` force.
std::string tuningTable(const CostModel& m);
std::string tuningTable(const CostModel& m, const AlgoRules* rules);

}  // namespace weft
