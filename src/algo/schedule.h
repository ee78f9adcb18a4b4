// A Schedule is what an algorithm builder returns: the steps ONE rank runs
// for one collective, over chunks of its buffers, with dependencies. Builders
// are pure functions of (rank, nranks, collective, sizes, chunk size): they
// never touch sockets, so tests run every rank's schedule in memory (the
// simulator in tests/algo) and check the result. The progress engine
// (src/exec) is the only code that executes steps.
//
// Matching rule (see transports/transport.h): messages between two ranks are
// matched in posting order per direction, and the engine posts the sends to a
// peer (and the receives from a peer) in schedule order. So a builder must
// list, for every pair (A, B), A's sends to B in the same order as B lists its
// receives from A, with equal byte counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/wire.h"
#include "weft.h"

namespace weft {

enum class CollType : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Send,
  Recv,
  Barrier,
};
const char* collName(CollType t);

// Which buffer a step reads or writes; the engine binds them per operation.
enum class BufId : uint8_t { Send = 0, Recv = 1, Scratch = 2 };

struct BufRef {
  BufId buf = BufId::Send;
  size_t off = 0;  // bytes
};

enum class StepKind : uint8_t {
  Send,        // send `bytes` at a to peer
  Recv,        // receive `bytes` from peer into dst
  RecvReduce,  // receive into b (scratch), then dst = a op b
  Copy,        // dst = a (local)
  Reduce,      // dst = a op b (local)
  Divide,      // dst = dst / nranks (finishes AVG)
  // dst = the fold over ranks q = 0, 1, ..., n-1 of piece q, in that order,
  // with the reproducible arithmetic of CollArgs::repro (kernels/cpu/fold.h;
  // AVG's division included): piece q is `a` for q == rank, else b + q *
  // bytes (n slots back to back; this rank's slot is not read).
  Fold,
};
const char* stepKindName(StepKind k);

struct Step {
  StepKind kind = StepKind::Copy;
  int peer = -1;
  BufRef a, b, dst;
  size_t bytes = 0;
  uint32_t depBegin = 0;  // into Schedule::deps
  uint32_t depCount = 0;
};

struct Schedule {
  std::vector<Step> steps;
  std::vector<uint32_t> deps;  // indices of earlier steps
  size_t scratchBytes = 0;
  // Compressed ops (CollArgs::wire): per step, the byte offset in scratch
  // of the wire-format bytes a Send, Recv or RecvReduce moves (laid out by
  // layOutWire after the builder; empty otherwise).
  std::vector<size_t> wireOff;
  // "ring", "chain", ...: a static string (a literal or algoName()), so
  // that copying a cached schedule copies a pointer.
  const char* algorithm = "";

  // Appends `sub`'s steps (another builder's schedule) with their
  // dependencies; `sub`'s Recv buffer becomes `recvTo`, its scratch goes
  // after this schedule's, its Send stays. Returns the index of its first
  // step (steps.size() when sub is empty).
  uint32_t append(const Schedule& sub, BufRef recvTo);
  // Appends a step that waits for `deps` (indices of earlier steps; values
  // of kNoStep are skipped); returns its index.
  static constexpr uint32_t kNoStep = 0xffffffffu;
  uint32_t add(const Step& s, std::initializer_list<uint32_t> deps = {});
  void addDep(uint32_t step, uint32_t dep);  // only on the last step added
};

// What a builder needs to know. Counts are in elements of eltSize bytes, with
// the API's meaning: allreduce/broadcast/reduce/alltoall `count`,
// allgather `sendcount`, reduce_scatter `recvcount`, send/recv `count`.
// WEFT_REPRO (docs/reproducibility.md): how a float SUM / AVG / PROD is
// computed. Off: by whatever algorithm is fastest. Ordered: the serial fold
// over ranks 0..n-1 in the type's accumulation precision, rounded once.
// Exact: the exact sum rounded once (SUM and AVG; PROD as Ordered).
enum class Repro : uint8_t { Off = 0, Ordered = 1, Exact = 2 };
const char* reproName(Repro r);  // "off", "ordered", "exact"

struct CollArgs {
  CollType type = CollType::AllReduce;
  size_t count = 0;
  size_t eltSize = 4;
  weft_op_t op = WEFT_SUM;
  int root = 0;    // broadcast, reduce
  int peer = -1;   // send, recv
  bool inPlace = false;
  // Off unless the comm's mode asks for it AND the call is order-sensitive
  // (a float SUM / AVG / PROD allreduce, reduce or reduce_scatter): then
  // only algorithms that fold in rank order (algoFoldsInRankOrder) run it.
  Repro repro = Repro::Off;
  // The format float32 data travels in (docs/compression.md): None unless
  // the comm's setting or the call's op asks for it AND the call is a
  // float32 SUM / AVG allreduce, reduce or reduce_scatter on host memory;
  // then only algorithms in which one rank computes each result element
  // (algoCarriesWire) run it, and the engine narrows every message to the
  // format and widens it at the receiver, accumulating in float32.
  Wire wire = Wire::None;
};
// Two calls of the same shape (what schedules and plans depend on).
inline bool sameShape(const CollArgs& a, const CollArgs& b) {
  return a.type == b.type && a.count == b.count && a.eltSize == b.eltSize && a.op == b.op &&
         a.root == b.root && a.peer == b.peer && a.inPlace == b.inPlace && a.repro == b.repro &&
         a.wire == b.wire;
}
// "allreduce #12 (1024 x float, sum)".
std::string describeOp(const CollArgs& args, weft_datatype_t dtype, uint64_t seq);

// The algorithms weft knows. Each schedule-building one has a builder
// below (one file each); Shm is the shared-memory arena of one host
// (transports/shm/arena.h), which runs without a schedule.
enum class Algo : uint8_t {
  Auto = 0,           // let the selector (select.h) choose
  Ring,               // allreduce, reduce_scatter, allgather: bandwidth-optimal
  RecursiveDoubling,  // allreduce, allgather: log2(n) steps, whole vectors
  HalvingDoubling,    // allreduce, reduce_scatter: Rabenseifner, any n
  DoubleBinaryTree,   // allreduce: NCCL's two complementary trees
  Direct,             // every rank exchanges with every rank in one step
  Chain,              // broadcast, reduce: pipelined chain
  BinomialTree,       // broadcast, reduce
  Bruck,              // allgather: ceil(log2 n) steps, any n
  Pairwise,           // alltoall
  Dissemination,      // barrier
  Shm,                // any collective, all ranks on one host: shm arena
  Hierarchical,       // allreduce over hosts: host reduce-scatter, rails, host allgather
  Fold,               // allreduce, reduce, reduce_scatter: each block's owner folds it in
                      // rank order (reproducible, docs/reproducibility.md), then allgather
  GatherFold,         // allreduce: Bruck allgather of every vector, each rank folds all
                      // (reproducible, small messages: ceil(log2 n) rounds)
  kCount
};
// Canonical name ("ring", "rd", "hd", "dbt", "direct", "chain", "binomial",
// "bruck", "pairwise", "dissemination", "shm", "hier"; "auto").
const char* algoName(Algo a);
// Accepts the canonical names and a few long forms ("recursive_doubling",
// "halving_doubling", "rabenseifner", "tree", "double_binary_tree").
bool parseAlgo(const std::string& name, Algo* out);
// Whether `a` implements collective `t` (Auto: always).
bool algoSupports(Algo a, CollType t);
// Whether `a` computes every element of reduction `t` as one fold over the
// ranks in rank order (the only algorithms a CollArgs::repro call may run):
// direct, fold and shm.
bool algoFoldsInRankOrder(Algo a, CollType t);
// Whether a compressed call (CollArgs::wire) may run on `a`: each element of
// the result is computed by exactly one rank (from wire-rounded partial
// sums) and reaches the others only as that rank's message, so every rank
// ends with the same bits: ring and fold allreduce (reduce-scatter, then the
// owner's result circulated), ring, fold and direct reduce_scatter, fold and
// direct reduce; and shm (the host arena, which runs the call uncompressed:
// src/exec/arena_op.cc reduces in shared memory, nothing travels).
bool algoCarriesWire(Algo a, CollType t);
// The algorithm buildSchedule uses for `t` when none is chosen.
Algo defaultAlgo(CollType t);

struct BuildParams {
  int rank = 0;
  int nranks = 1;
  size_t chunkBytes = 1 << 20;  // largest message a step moves
  int slots = 4;                // scratch slots in flight per stream
  Algo algo = Algo::Auto;       // Auto = defaultAlgo(type)
  // The host of each rank (any ids; same id = same host), for builders that
  // follow the hosts (hierarchical); empty = unknown.
  std::vector<int> hosts;
  // Recursive doubling allreduce: ranks 2i and 2i+1 share a core (two ranks
  // per core, in ring order: topo/comm_topo.h), so each pair folds into one
  // before the doubling and unfolds after it. Taken when n >= 4 and n/2 is a
  // power of two; ignored otherwise.
  bool foldPairs = false;
};

// The message size of a collective as nccl-tests and weft-perf print it:
// count * eltSize, times nranks for allgather, reduce_scatter and alltoall.
size_t collBytes(const CollArgs& a, int nranks);

// Builds the schedule of `args` for `p.rank` with algorithm `p.algo`.
// An algorithm that does not implement the collective (or Shm, which has no
// schedule) is WEFT_ERR_INVALID_USAGE naming both.
Status buildSchedule(const CollArgs& args, const BuildParams& p, Schedule* out);

// The builders, one per file.
void buildRingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildRingReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildRingAllGather(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildChainBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildChainReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildPairwiseAllToAll(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDisseminationBarrier(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildPointToPoint(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildRecursiveDoublingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildRecursiveDoublingAllGather(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildHalvingDoublingAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildHalvingDoublingReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDoubleBinaryTreeAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectAllGather(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildDirectAllToAll(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildBinomialBroadcast(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildBinomialReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildBruckAllGather(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildHierarchicalAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildFoldAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildFoldReduce(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildFoldReduceScatter(const CollArgs& a, const BuildParams& p, Schedule* s);
void buildGatherFoldAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s);

// For a compressed call: gives every Send, Recv and RecvReduce of `s` its
// own wire-format region in scratch (Schedule::wireOff), after the
// builder's scratch. Bytes: about half of what the steps move in float32.
void layOutWire(Wire w, Schedule* s);

// Bytes of the send and receive buffers of `a` on one of `nranks` ranks
// (what the engine binds; the simulator allocates).
size_t sendBytes(const CollArgs& a, int nranks, int rank);
size_t recvBytes(const CollArgs& a, int nranks, int rank);

// Splits `total` elements into `parts` near-equal parts: part i covers
// [partOffset(i), partOffset(i) + partCount(i)).
inline size_t partOffset(size_t total, int parts, int i) {
  size_t base = total / parts, rem = total % parts;
  return base * i + (static_cast<size_t>(i) < rem ? i : rem);
}
inline size_t partCount(size_t total, int parts, int i) {
  return total / parts + (static_cast<size_t>(i) < total % parts ? 1 : 0);
}
inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace weft
