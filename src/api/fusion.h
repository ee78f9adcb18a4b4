// Tensor fusion, the execution (the plan: fusion_plan.h). The calls of a
// fused item are copied into a buffer from the comm's pool, one allreduce
// runs in place on it, and when it has succeeded each call's slice is copied
// to its recvbuf. All sends are read when the group is issued and all
// results written when the fused op is done: calls whose buffers alias one
// another get what the group's unfused calls are specified to give (each
// reads its input at issue), and a failed fused op writes no recvbuf.
#pragma once

#include <memory>
#include <vector>

#include "api/fusion_plan.h"
#include "core/mutex.h"
#include "core/status.h"

namespace weft {

struct PendingCall;  // api_state.h
struct OpTracker;    // exec/op.h

// Fusion buffers kept per communicator, so that a training loop's groups
// allocate nothing once the buffers have grown to its sizes. Shared with
// the fused ops in flight (they give their buffer back when done, which may
// be after the comm is gone). Thread-safe.
class FusionPool {
 public:
  // One fused op's buffer and the slices to copy out of it.
  struct Batch {
    std::unique_ptr<uint8_t[]> data;
    size_t cap = 0;
    struct Slice {
      void* recv;
      size_t offset, len;
    };
    std::vector<Slice> slices;
  };
  // A batch of at least `bytes`, slices empty; nullptr when out of memory.
  std::unique_ptr<Batch> take(size_t bytes);
  void giveBack(std::unique_ptr<Batch> b);
  // Frees the spare batches; returns their bytes (ncclCommSuspend).
  size_t release();
  size_t spareBytes();

 private:
  // Spare batches kept: as many as a group had in flight, so that the next
  // iteration of a training loop allocates nothing, up to kKeepBytes (and
  // at least kKeep batches, whatever their size).
  static constexpr size_t kKeep = 4;
  static constexpr size_t kKeepBytes = 64 << 20;
  Mutex mu_;
  std::vector<std::unique_ptr<Batch>> spare_;
};

// The plan for a group's host calls, each comm with its own threshold.
void planGroupFusion(const std::vector<PendingCall>& calls, FusionPlan* plan);

// Issues the fused item `it` of `plan` (n > 1, one comm): copies the sends
// in, enqueues the allreduce under the comm's lock, counted as one op of
// `tracker`. On error nothing is enqueued.
Status enqueueFused(const std::vector<PendingCall>& calls, const FusionPlan& plan,
                    const FusionPlan::Item& it, const std::shared_ptr<OpTracker>& tracker);

}  // namespace weft
