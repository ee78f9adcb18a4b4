// One operation in flight: a collective (or one send / recv of a group)
// with its schedule, the buffers the schedule's BufRefs bind to, and the
// progress of every step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "algo/schedule.h"
#include "core/mutex.h"
#include "telemetry/record.h"
#include "transports/transport.h"

namespace weft {

class LocalWork;  // exec/local_work.h

// Shared by the ops of one weft call or group: counts the ops still running
// and keeps the first error. The request (weft_group_end_async) holds it.
// Ops of one group may span several comms (each under its own lock), so the
// count is atomic and the status has its own lock.
struct OpTracker {
  std::atomic<int> pending{0};
  Mutex mu;
  Status status;
  // Stream-ordered work (src/cuda/stream_batch.h): the ops of this tracker
  // start only once `gate` opens (*open); an error from it fails them.
  // `onDone` runs once, when the last op finishes, with the outcome.
  std::function<Status(bool* open)> gate;
  // Stream-ordered ops on the user's device buffers, no staging (the
  // direct path, src/cuda/device_path.h): the engine posts them on its
  // cuda_ipc endpoints and runs their local steps on its GPU backend.
  bool direct = false;
  std::function<void(const Status&)> onDone;
  void finishOne(const Status& st) {
    if (st.isError()) {
      std::lock_guard<Mutex> lk(mu);
      if (status.isOk()) status = st;
    }
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1 && onDone) onDone(result());
  }
  Status result() {
    std::lock_guard<Mutex> lk(mu);
    return status;
  }
};

// An op that runs without a schedule (the shm arena, src/exec/arena_op.h).
// The engine calls progress() in issue order; runner ops start one after
// another (they share the arena's round sequence).
class OpRunner {
 public:
  virtual ~OpRunner() = default;
  // Advances without blocking; true once finished, with *st set on error.
  // *moved is set when it got anywhere (for stall detection).
  virtual bool progress(Status* st, bool* moved) = 0;
  // The ranks it waits for now (stall and timeout reports).
  virtual void waitingFor(std::vector<int>* ranks) const = 0;
};

// The engine's scratch memory: host memory (delete[]) unless a LocalWork
// backend allocated it (then `fn` frees it: pinned memory for a GPU backend).
struct ScratchFree {
  void (*fn)(uint8_t*) = nullptr;
  void operator()(uint8_t* p) const {
    if (fn)
      fn(p);
    else
      delete[] p;
  }
};
using ScratchPtr = std::unique_ptr<uint8_t[], ScratchFree>;

// Op::reset() resets every member: a member added here is added there.
struct Op {
  CollArgs args;
  weft_datatype_t dtype = WEFT_FLOAT32;
  Schedule sched;
  // A schedule shared with the communicator's cache (Comm::enqueue): used
  // instead of `sched` when set, so that a repeated call does not copy it.
  std::shared_ptr<const Schedule> shared;
  const Schedule& schedule() const { return shared ? *shared : sched; }
  std::unique_ptr<OpRunner> runner;  // instead of a schedule
  uint64_t seq = 0;                  // collective sequence number on this comm (0 for p2p)
  uint64_t tag = 0;                  // carried by every message of this op

  // Bound buffers.
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t sendLen = 0, recvLen = 0;
  ScratchPtr scratch;  // sched.scratchBytes, from the engine's pool
  size_t scratchLen = 0;
  // A copy of the send buffer, when it overlaps a receive of the same group
  // (a send and a receive on one buffer, as nccl-tests' in-place sendrecv).
  std::vector<uint8_t> staged;

  // Progress of each step.
  // kLocal: the step's local work runs on a LocalWork backend (exec/local_work.h).
  // kNarrowed: a compressed send whose wire bytes are ready but that the
  // transport had no room for yet (pending otherwise; wire_steps.cc).
  enum : uint8_t { kPending = 0, kPosted = 1, kDone = 2, kLocal = 3, kNarrowed = 4 };
  std::vector<uint8_t> state;
  std::vector<Completion> comps;
  LocalWork* lw = nullptr;      // runs the local steps (nullptr: the host, inline)
  bool deviceEps = false;       // transfers to other ranks on the cuda_ipc endpoints
  MemType mem = MemType::Host;  // ... posted with this (exec/placement.h)
  std::vector<uint64_t> local;  // per step: lw's ticket (only with lw)
  size_t firstPending = 0;      // steps before it are all done
  size_t doneCount = 0;

  uint64_t enqueueNs = 0;
  telemetry::OpRecord rec;  // filed by the engine when it finishes (if entryNs is set)
  bool gateOpen = false;    // the tracker's gate (stream order) has opened for it
  bool finished = false;
  Status status;
  std::shared_ptr<OpTracker> tracker;

  std::string describe() const;  // "allreduce #12 (1024 x float, sum)"
  // As a new Op, but keeping the capacity of its vectors (the engine
  // recycles ops: a small collective's allocations were a tenth of its
  // engine time).
  void reset();
};

// The tag of a collective's messages: its type, datatype, op, a hash of
// count and root, and its sequence number (low 24 bits), so that ranks
// running different collectives at the same point see a mismatch that names
// both calls (core/tag.h prints tags). Point-to-point messages carry a fixed
// tag: they match by order alone.
uint64_t opTag(const CollArgs& args, weft_datatype_t dt, uint64_t seq);
// opTag(args, dt, seq) from opTag(args, dt, 0): the sequence number's bits
// are the top ones, the rest depends on the call's shape only.
inline uint64_t opTagWithSeq(uint64_t tagOfSeq0, uint64_t seq) {
  return tagOfSeq0 | (seq & 0xffffffull) << 40;
}

}  // namespace weft
