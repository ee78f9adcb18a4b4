// Where a schedule's local steps (reduce, copy, divide) run.
//
// The engine runs them on the host, synchronously, by a direct call: that is
// the default, and the host path has no backend object at all (Engine keeps
// a null pointer and calls the host executor as before). A LocalWork backend
// is for local work that finishes later:
//
//   * the device backend (src/cuda/device_local_work.h) launches
//     kernels/cuda kernels on a stream of the communicator and records an
//     event after each;
//   * the async host backend (below) runs the work on a worker thread, some
//     time later. It exists so that the CPU tests prove the engine treats a
//     local step that is not complete yet correctly (dependencies, chunk
//     pipelining, errors, teardown) without a GPU.
//
// Contract: submit*() only enqueues and returns a ticket (> 0). Work runs in
// submission order; done(t) is true once the work of ticket t (and of every
// earlier ticket) has finished, and its writes are visible to the caller's
// thread. Buffers belong to the backend until then. Nothing here blocks,
// except drain(), which the engine calls before it frees buffers after a
// failure, and which is bounded.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/status.h"
#include "exec/op.h"
#include "weft.h"

namespace weft {

class LocalWork {
 public:
  virtual ~LocalWork() = default;
  virtual const char* name() const = 0;
  // dst[i] = op(a[i], b[i]) for i < count (dst may equal a or b).
  virtual Status submitReduce(void* dst, const void* a, const void* b, size_t count,
                              weft_datatype_t dt, weft_op_t op, uint64_t* ticket) = 0;
  // dst[0, bytes) = src[0, bytes) (dst may equal src).
  virtual Status submitCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket) = 0;
  // dst[i] /= n (finishes AVG).
  virtual Status submitDivide(void* dst, size_t count, weft_datatype_t dt, uint64_t n,
                              uint64_t* ticket) = 0;
  // dst = the reproducible fold of srcs[0..n) (kernels/cpu/fold.h). The
  // srcs array itself may be reused once this returns. Backends without
  // it answer an error; the communicator keeps reproducible calls on
  // those that have it (the host's).
  virtual Status submitFold(void* dst, const void* const* srcs, int n, size_t count,
                            weft_datatype_t dt, weft_op_t op, bool exact, uint64_t* ticket) {
    (void)dst, (void)srcs, (void)n, (void)count, (void)dt, (void)op, (void)exact, (void)ticket;
    return Status(WEFT_ERR_INTERNAL, std::string(name()) + " local work has no reproducible fold");
  }
  // *done once ticket t has finished; an error when the work failed (then
  // the backend is unusable and the engine fails its ops).
  virtual Status done(uint64_t t, bool* done) = 0;
  // Waits until everything submitted has finished, for at most timeoutS;
  // false when it had not.
  virtual bool drain(double timeoutS) = 0;
  // Scratch memory (uninitialized) that both this backend's work and the
  // transports can use: host memory here; pinned, device-mapped memory for
  // the GPU backend. An error when none can be had.
  virtual Status allocScratch(size_t bytes, ScratchPtr* out) {
    out->reset(new uint8_t[bytes]);
    return Status();
  }
};

// Process-wide counts, for tests and the TRACE log.
struct LocalWorkCounters {
  std::atomic<uint64_t> steps{0};       // local steps run through a backend
  std::atomic<uint64_t> overlapped{0};  // of them, pending while a transfer was in flight
};
LocalWorkCounters& localWorkCounters();

// The async host backend: a worker thread that runs each step after
// `delayUs` microseconds (0: as soon as it gets to it) with the host
// executor. Test builds select it with WEFT_TEST_ASYNC_LOCAL_US.
std::unique_ptr<LocalWork> makeAsyncHostLocalWork(long delayUs);

// The backend the configuration asks for; nullptr = the host, synchronous.
std::unique_ptr<LocalWork> localWorkFromConfig(const Config& cfg);

}  // namespace weft
