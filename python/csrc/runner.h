// Runner: issues a process group's weft operations in call order, one
// thread, so that ranks that call collectives in the same order issue them
// in the same order (weft matches them by order, as NCCL does).
//
// An op is its weft calls (`issue`, run on the thread that owns the comm
// at that moment), what happens after them (`after`: copies out of staging
// tensors) and its Work. Three ways to run one:
//  - inline, on the caller's thread, for a blocking call while nothing is
//    queued or in flight: no thread handoff, the 8-byte allreduce costs
//    what weft costs;
//  - a collective on the runner thread, blocking there (weft's progress
//    moves everything queued on the comm meanwhile);
//  - sends, receives and coalesced batches as one nonblocking weft group
//    (weft_group_end_async): the runner goes on issuing, and completes them
//    as weft_test reports them done. A receive posted before its send
//    therefore never blocks the ops behind it;
//  - ops on CUDA tensors, async or not, inline on the caller's thread once
//    the ops queued before them are issued: weft enqueues them on the
//    caller's current stream and returns, so they are ordered with the
//    caller's kernels (the op is done when the stream gets there).
// A failed op fails the comm: weft aborts it, and every later op fails at
// once with the first error (as a NCCL communicator after an error).
#pragma once

#include <weft.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "placement.h"
#include "work.h"

namespace weft_torch {

struct Op {
  std::string name;  // "allreduce", for messages
  // The weft calls on `where.stream` (NULL for CPU tensors); returns the
  // first weft result that is not success.
  std::function<weft_result_t(weft_comm_t, weft_stream_t)> issue;
  Placement where;
  std::function<void()> after;  // may be empty
  c10::intrusive_ptr<WorkWeft> work;
  bool p2p = false;        // a send or receive: always nonblocking
  double timeoutS = 0;     // this op's timeout
};

class Runner {
 public:
  Runner(weft_comm_t comm, int rank, int size);
  ~Runner();  // shutdown()

  // Queues `ops` (one op, or a coalesced batch issued as one weft group);
  // their Works complete later. `inlineOk`: the caller waits for them
  // anyway, so they may run on its thread when the runner is idle.
  void submit(std::vector<Op> ops, bool inlineOk);
  // Waits for queued and in-flight ops (bounded by their timeouts), then
  // destroys the comm. Idempotent.
  void shutdown();
  // Fails everything now: weft_comm_abort, pending Works get the error.
  void abort(const std::string& why);
  // The first error, or nullptr.
  std::exception_ptr error() const;

 private:
  struct Batch {
    std::vector<Op> ops;
  };
  struct Flight {
    Batch batch;
    weft_request_t req;
  };

  void loop();
  // Runs or issues a batch on the calling thread (which owns the comm).
  void start(Batch b, bool blocking);
  void finishBatch(Batch& b, weft_result_t r);
  void failBatch(Batch& b, std::exception_ptr e);
  bool pollFlights();  // true when one completed
  std::exception_ptr makeError(const Batch& b, weft_result_t r);

  weft_comm_t comm_;
  const int rank_, size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  // Requests issued and not yet completed: changed (under mu_) only by the
  // thread that owns the comm, read by it without the lock.
  std::vector<Flight> flights_;
  size_t inflight_ = 0;  // flights_.size(), for the other threads
  // One thread at a time issues weft calls on comm_: whoever set busy_.
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::atomic<bool> aborted_{false};  // comm_ was aborted or destroyed
  std::thread thread_;
};

}  // namespace weft_torch
