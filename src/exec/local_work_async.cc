// The async host backend (local_work.h): local steps run on a worker thread
// of the engine, each after a delay, so that the engine sees them pending
// for a while, as it does a GPU kernel's. One worker per engine, a FIFO of
// jobs; the worker publishes the last finished ticket with a release store,
// which the engine reads with an acquire load: the step's writes are then
// visible to the engine's thread (and to the sends it posts next).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/local_work.h"
#include "kernels/cpu/fold.h"
#include "kernels/cpu/reduce.h"

namespace weft {
namespace {

class AsyncHostLocalWork : public LocalWork {
 public:
  explicit AsyncHostLocalWork(long delayUs) : delayUs_(delayUs) {
    worker_ = std::thread([this] { run(); });
  }
  ~AsyncHostLocalWork() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();  // finishes the queue first: nothing is left writing
  }
  const char* name() const override { return "async-host (test)"; }

  Status submitReduce(void* dst, const void* a, const void* b, size_t count, weft_datatype_t dt,
                      weft_op_t op, uint64_t* ticket) override {
    Job j;
    j.kind = Job::Reduce;
    j.dst = dst;
    j.a = a;
    j.b = b;
    j.count = count;
    j.dt = dt;
    j.op = op;
    return push(j, ticket);
  }
  Status submitCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket) override {
    Job j;
    j.kind = Job::Copy;
    j.dst = dst;
    j.a = src;
    j.count = bytes;
    return push(j, ticket);
  }
  Status submitDivide(void* dst, size_t count, weft_datatype_t dt, uint64_t n,
                      uint64_t* ticket) override {
    Job j;
    j.kind = Job::Divide;
    j.dst = dst;
    j.count = count;
    j.dt = dt;
    j.n = n;
    return push(j, ticket);
  }
  Status submitFold(void* dst, const void* const* srcs, int n, size_t count, weft_datatype_t dt,
                    weft_op_t op, bool exact, uint64_t* ticket) override {
    Job j;
    j.kind = Job::Fold;
    j.dst = dst;
    j.srcs.assign(srcs, srcs + n);
    j.count = count;
    j.dt = dt;
    j.op = op;
    j.exact = exact;
    return push(std::move(j), ticket);
  }
  Status done(uint64_t t, bool* done) override {
    *done = finished_.load(std::memory_order_acquire) >= t;
    return Status();
  }
  bool drain(double timeoutS) override {
    std::unique_lock<std::mutex> lk(mu_);
    return idle_.wait_for(lk, std::chrono::duration<double>(timeoutS), [this] {
      return finished_.load(std::memory_order_acquire) == submitted_;
    });
  }

 private:
  struct Job {
    enum Kind { Reduce, Copy, Divide, Fold } kind = Copy;
    void* dst = nullptr;
    const void* a = nullptr;
    const void* b = nullptr;
    size_t count = 0;  // elements (bytes for Copy)
    weft_datatype_t dt = WEFT_FLOAT32;
    weft_op_t op = WEFT_SUM;
    uint64_t n = 1;
    uint64_t ticket = 0;
    std::vector<const void*> srcs;  // Fold
    bool exact = false;             // Fold
  };

  Status push(Job j, uint64_t* ticket) {
    uint64_t t = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      t = j.ticket = ++submitted_;
      jobs_.push_back(std::move(j));
    }
    cv_.notify_one();
    *ticket = t;
    return Status();
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_, and nothing left to do
      Job j = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();
      if (delayUs_ > 0) usleep(static_cast<useconds_t>(delayUs_));
      execute(j);
      lk.lock();
      finished_.store(j.ticket, std::memory_order_release);
      if (finished_.load(std::memory_order_relaxed) == submitted_) idle_.notify_all();
    }
  }

  static void execute(const Job& j) {
    switch (j.kind) {
      case Job::Reduce:
        reduceHost(j.dst, j.a, j.b, j.count, j.dt, j.op);
        break;
      case Job::Copy:
        if (j.dst != j.a && j.count) memmove(j.dst, j.a, j.count);
        break;
      case Job::Divide:
        divideByCount(j.dst, j.count, j.dt, j.n);
        break;
      case Job::Fold:
        foldHost(j.dst, j.srcs.data(), static_cast<int>(j.srcs.size()), j.count, j.dt, j.op,
                 j.exact);
        break;
    }
  }

  const long delayUs_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Job> jobs_;
  uint64_t submitted_ = 0;  // under mu_
  std::atomic<uint64_t> finished_{0};
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<LocalWork> makeAsyncHostLocalWork(long delayUs) {
  return std::unique_ptr<LocalWork>(new AsyncHostLocalWork(delayUs));
}

LocalWorkCounters& localWorkCounters() {
  static LocalWorkCounters c;
  return c;
}

std::unique_ptr<LocalWork> localWorkFromConfig(const Config& cfg) {
  if (cfg.testAsyncLocalUs >= 0) return makeAsyncHostLocalWork(cfg.testAsyncLocalUs);
  return nullptr;
}

}  // namespace weft
