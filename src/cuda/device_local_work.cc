// device_local_work.h with CUDA. Work is enqueued on one stream, so it
// finishes in submission order: the events in flight are kept in a FIFO and
// done() retires them from the front while cudaEventQuery says they are
// complete. Events are reused (a free list), so a step costs one launch and
// one cudaEventRecord, no allocation.
//
// The calling thread's current device may differ from the backend's (the
// engine is driven from whichever thread calls progress): each call sets the
// backend's device and puts the caller's back.
#include "cuda/device_local_work.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <deque>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "cuda/runtime.h"
#include "cuda/scratch_cache.h"
#include "kernels/cuda/reduce.h"

namespace weft {
namespace cuda {
namespace {

Status allocScratchBlock(ScratchCache::Kind kind, size_t bytes, void** out) {
  return kind == ScratchCache::kDevice ? deviceAlloc(bytes, out) : pinnedAlloc(bytes, out);
}

ScratchCache& scratchCache() {
  // Never destroyed: no CUDA calls during exit (scratch_cache.h).
  static ScratchCache* c = new ScratchCache(&allocScratchBlock);
  return *c;
}

void putScratch(uint8_t* p) { scratchCache().put(p); }

// Makes `dev` current for the scope, restoring the caller's device.
class OnDevice {
 public:
  explicit OnDevice(int dev) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != dev && cudaSetDevice(dev) == cudaSuccess)
      restore_ = true;
  }
  ~OnDevice() {
    if (restore_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = -1;
  bool restore_ = false;
};

Status launchError(const char* what, int e) {
  return Status(WEFT_ERR_CUDA,
                strFormat("GPU local work: %s: %s (cudaError %d)", what, cudaErrorText(e), e));
}

class DeviceLocalWork : public LocalWork {
 public:
  DeviceLocalWork(int dev, void* stream, ScratchMem scratch, std::vector<void*> events)
      : dev_(dev), stream_(stream), scratch_(scratch), free_(std::move(events)) {}
  ~DeviceLocalWork() override {
    OnDevice on(dev_);
    drain(10);
    for (const InFlight& f : inflight_) free_.push_back(f.ev);
    for (void* ev : free_) eventDestroy(ev);
    streamDestroy(stream_);
  }
  const char* name() const override { return "cuda"; }

  Status submitReduce(void* dst, const void* a, const void* b, size_t count, weft_datatype_t dt,
                      weft_op_t op, uint64_t* ticket) override {
    OnDevice on(dev_);
    const void* srcs[2] = {a, b};
    int e = reduceOnStream(dst, nullptr, srcs, 2, count, dt, op, stream_);
    if (e) return launchError("reduce kernel", e);
    return record(ticket);
  }
  Status submitCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket) override {
    OnDevice on(dev_);
    // The copy engine; cudaMemcpyDefault finds each side's memory type.
    if (bytes && dst != src) WEFT_RETURN_IF_ERROR(copyAsync(dst, src, bytes, stream_));
    return record(ticket);
  }
  Status submitDivide(void* dst, size_t count, weft_datatype_t dt, uint64_t n,
                      uint64_t* ticket) override {
    OnDevice on(dev_);
    int e = divideOnStream(dst, count, dt, n, stream_);
    if (e) return launchError("divide kernel", e);
    return record(ticket);
  }
  Status done(uint64_t t, bool* done) override {
    if (finished_ < t) {
      OnDevice on(dev_);
      while (!inflight_.empty()) {
        bool fin = false;
        Status st = eventDone(inflight_.front().ev, &fin);
        if (st.isError()) return st.withContext("GPU local work");
        if (!fin) break;
        finished_ = inflight_.front().ticket;
        free_.push_back(inflight_.front().ev);
        inflight_.pop_front();
      }
    }
    *done = finished_ >= t;
    return Status();
  }
  bool drain(double timeoutS) override {
    // Polled, never cudaStreamSynchronize: a hung kernel must not hang us.
    const uint64_t end = nowNs() + static_cast<uint64_t>(timeoutS * 1e9);
    for (;;) {
      bool fin = false;
      if (done(submitted_, &fin).isError()) return false;
      if (fin) return true;
      if (nowNs() > end) return false;
      usleep(20);
    }
  }
  Status allocScratch(size_t bytes, ScratchPtr* out) override {
    uint8_t* p = nullptr;
    OnDevice on(dev_);
    WEFT_RETURN_IF_ERROR(scratchCache().take(
        scratch_ == ScratchMem::Device ? ScratchCache::kDevice : ScratchCache::kPinned, dev_, bytes,
        &p));
    *out = ScratchPtr(p, ScratchFree{&putScratch});
    return Status();
  }

 private:
  struct InFlight {
    uint64_t ticket;
    void* ev;
  };

  Status record(uint64_t* ticket) {
    void* ev = nullptr;
    if (free_.empty()) {
      // Events made at setup are all in flight: retire the finished ones
      // before making one here (a resource call can wait behind a caller's
      // blocking copy on a stream weft holds).
      bool ignored = false;
      WEFT_RETURN_IF_ERROR(done(submitted_, &ignored));
    }
    if (!free_.empty()) {
      ev = free_.back();
      free_.pop_back();
    } else {
      WEFT_RETURN_IF_ERROR(eventCreate(&ev));
    }
    Status st = eventRecord(ev, stream_);
    if (st.isError()) {
      free_.push_back(ev);
      return st.withContext("GPU local work");
    }
    inflight_.push_back(InFlight{++submitted_, ev});
    *ticket = submitted_;
    return Status();
  }

  const int dev_;
  void* const stream_;
  const ScratchMem scratch_;
  uint64_t submitted_ = 0, finished_ = 0;
  std::deque<InFlight> inflight_;
  std::vector<void*> free_;
};

// Events made with the backend: enough for the steps a comm keeps in
// flight (a ring's chunks) without making one on the progress thread.
constexpr size_t kSetupEvents = 128;

}  // namespace

Status makeDeviceLocalWork(std::unique_ptr<LocalWork>* out, ScratchMem scratch) {
  const CudaState cs = cudaState();
  if (!cs.usable) return Status(WEFT_ERR_CUDA, "GPU local work: " + cs.why);
  void* stream = nullptr;
  WEFT_RETURN_IF_ERROR(streamCreate(&stream));
  // Its kernels run while callers' streams are held (runtime.h), and so do
  // its event records: the events are made here, not on the progress thread.
  std::vector<void*> events;
  Status st = loadKernelsFor(stream);
  while (st.isOk() && events.size() < kSetupEvents) {
    void* ev = nullptr;
    st = eventCreate(&ev);
    if (st.isOk()) events.push_back(ev);
  }
  if (st.isError()) {
    for (void* ev : events) eventDestroy(ev);
    streamDestroy(stream);
    return st;
  }
  out->reset(new DeviceLocalWork(cs.device, stream, scratch, std::move(events)));
  WEFT_INFO(kInit, "GPU local work on device %d (scratch in %s memory)", cs.device,
            scratch == ScratchMem::Device ? "device" : "mapped pinned");
  return Status();
}

}  // namespace cuda
}  // namespace weft
