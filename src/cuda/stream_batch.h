// Stream-ordered execution of one weft call or group on CUDA memory.
//
// The design (docs/cuda.md): the caller's thread only enqueues work on the
// caller's streams and returns; the communicator's progress thread runs the
// collective on pinned host staging with the host engine and transports.
//
//   caller's stream:  [earlier work] -> copy send data D2H into staging ->
//                     record event E -> wait until flag >= ticket ->
//                     copy staging -> recv (kernel, skipped if status != 0)
//   progress thread:  E done? -> run the collective on staging -> write
//                     status, then flag = ticket (a plain store to pinned
//                     memory: no CUDA call, no device sync)
//
// So the collective starts after the stream's earlier work (E), later work
// on the stream waits for it (the flag wait), and a failed collective
// releases the stream without touching the user's buffer. A group on one or
// more streams is one batch: one gate for all its ops, one flag.
//
// Staging blocks come from a process-wide pool of pinned memory and go back
// only once every stream has passed its last read of them (an event after
// the final copy), so a block is never reused under a stream still using it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace weft {
namespace cuda {

// Where a call's send and receive data live inside its staging region. In
// place (the user's send range is inside, or equal to, the receive range,
// or the other way round) both share one region laid out as the user's
// buffers are, so the schedule's in-place relation holds on staging too.
struct StagingLayout {
  size_t bytes = 0;  // the region's size
  size_t sendOff = 0, recvOff = 0;
  bool hasSend = false, hasRecv = false;
};
// send/recv: the user's buffers (either may be NULL: unused), their lengths.
StagingLayout layoutStaging(const void* send, size_t sendLen, const void* recv, size_t recvLen);

// One call of a batch, as the API resolved it.
struct StreamCall {
  void* stream = nullptr;
  const void* send = nullptr;  // read from the stream before the collective (when readSend)
  size_t sendLen = 0;
  bool readSend = false;
  void* recv = nullptr;        // written on the stream after it (when writeRecv)
  void* recvDevice = nullptr;  // the address kernels use for recv (pinned user memory)
  size_t recvLen = 0;
  bool writeRecv = false;
};

// How many direct batches (no staging) this process has issued: the tests
// check that a call took the device path.
uint64_t directBatches();

class StreamBatch {
 public:
  // timeoutS bounds the wait for the streams' earlier work (WEFT_TIMEOUT_S).
  // direct: the ops run on the user's device buffers themselves (the device
  // path, src/cuda/device_path.h): no staging, no copies in or out; the
  // gate and the flag work as staged. A failed direct batch may leave its
  // receive buffers partly written (as NCCL does); the error is the comm's.
  explicit StreamBatch(double timeoutS, bool direct = false);
  ~StreamBatch();  // hands the staging back to the pool (after the streams are past it)
  StreamBatch(const StreamBatch&) = delete;
  StreamBatch& operator=(const StreamBatch&) = delete;

  // Adds calls; then stage() takes the staging and enqueues the copies in
  // and the events. *send / *recv of each call: where its op reads and
  // writes (NULL where the call has no such buffer).
  void add(const StreamCall& c) { calls_.push_back(c); }
  Status stage(std::vector<void*>* sends, std::vector<void*>* recvs);
  // Enqueues the flag waits and the copies out on every stream.
  Status release();

  // The ops' gate: *open once every stream's earlier work is done. An error
  // when that work failed, when it ran past the timeout, or after fail().
  Status gate(bool* open);
  // Makes the gate fail with `st` (an error found while issuing).
  void fail(const Status& st);
  // Called once when every op finished: publishes the outcome to the
  // streams (status word, then the flag).
  void complete(const Status& st);

  struct Block;  // a pinned staging block (stream_batch.cc)

 private:
  std::vector<StreamCall> calls_;
  std::vector<StagingLayout> layouts_;
  std::vector<uint8_t*> regions_;  // each call's staging region
  std::vector<void*> streams_;     // distinct, in order of appearance
  std::vector<void*> ready_;       // an event per stream: its earlier work done
  std::vector<void*> after_;       // an event per stream: past the final copy
  Block* block_ = nullptr;
  uint32_t ticket_ = 0;
  double timeoutS_;
  bool direct_;
  uint64_t gateSinceNs_ = 0;
  std::atomic<bool> open_{false};
  std::atomic<bool> completed_{false};
  bool released_ = false;    // the flag waits are enqueued
  bool readyWords_ = false;  // the streams write ready words (no ready_ events)
  std::mutex mu_;
  Status failed_;
};

}  // namespace cuda
}  // namespace weft
