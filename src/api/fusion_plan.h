// Tensor fusion, the plan: which calls of a group run together as one
// allreduce. A pure function of the call list, so that every rank, given the
// same collectives in the same order, fuses them identically (the fused op
// is one collective on every rank or on none).
//
// The rules, per communicator:
//  * eligible: a host allreduce with count > 0 and at most the comm's
//    threshold bytes (a larger call alone would only pay a copy), and at
//    most the comm's largest fused call (a call whose own latency is less
//    than its copying in and out costs is not worth fusing; fusion.h);
//  * eligible calls of one key (comm, datatype, op, reproducibility mode)
//    gather into an open run, issued where its first call stood, until the
//    next call would take the run past the threshold (a new run starts);
//  * another collective on the comm (broadcast, reduce, barrier, ...) closes
//    the comm's open runs: calls before it stay before it, calls after it
//    stay after it;
//  * an allreduce that is not eligible runs alone at its place, closing
//    nothing, and so does a send or receive: those are not the same on
//    every rank (rank 0 sends where rank 1 receives), so letting them close
//    runs would make the ranks' plans differ. Moving a collective ahead of
//    a send keeps every pair of ranks' message orders consistent, since both
//    sides move it past the matching send and receive alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

// What the planner knows of one call.
struct FusionCall {
  const void* comm = nullptr;  // identity only
  enum Kind : uint8_t { kAllReduce, kOtherCollective, kPointToPoint } kind = kAllReduce;
  bool host = true;  // not stream-ordered
  int dtype = 0, op = 0, repro = 0;
  size_t bytes = 0;
  size_t threshold = 0;  // the comm's fusion threshold in bytes; 0: no fusion
  size_t maxCall = ~size_t{0};  // the comm's largest call that fuses
};

// Items in issue order; item i runs calls members[first .. first + n) (in
// call order), fused when n > 1.
struct FusionPlan {
  struct Item {
    size_t first = 0, n = 0;
    size_t bytes = 0;  // the calls' bytes together
  };
  std::vector<Item> items;
  std::vector<size_t> members;
  size_t fusedItems() const;  // items with n > 1

  // planFusion's working memory, kept for the next group.
  struct Run {
    const void* comm;
    int dtype, op, repro;
    size_t item;
  };
  std::vector<Run> open;
  std::vector<size_t> itemOf;
};

// Plans `n` calls into *plan (its vectors reused). Deterministic.
void planFusion(const FusionCall* calls, size_t n, FusionPlan* plan);

}  // namespace weft
