#include "runner.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace weft_torch {
namespace {

// Errors that leave the comm unusable (a peer died or hung, an abort):
// the comm is revoked and every later op fails with the first error.
bool fatal(weft_result_t r) {
  return r != WEFT_ERR_INVALID_ARGUMENT && r != WEFT_ERR_INVALID_USAGE;
}

std::string seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

std::exception_ptr distError(const std::string& msg, bool backendError) {
  try {
    if (backendError) C10_THROW_ERROR(DistBackendError, msg);
    C10_THROW_ERROR(Error, msg);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

Runner::Runner(weft_comm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {
  thread_ = std::thread([this] { loop(); });
}

Runner::~Runner() { shutdown(); }

std::exception_ptr Runner::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void Runner::submit(std::vector<Op> ops, bool inlineOk) {
  Batch b{std::move(ops)};
  std::unique_lock<std::mutex> lk(mu_);
  bool onStream = false;
  for (const Op& op : b.ops) onStream |= op.where.stream != nullptr;
  if (onStream) {
    // Enqueued on the caller's stream now, in call order: after the ops
    // queued before it are issued (bounded by their timeouts).
    cv_.wait(lk, [this] { return (queue_.empty() && !busy_ && inflight_ == 0) || error_ || stop_; });
    inlineOk = true;
  }
  if (error_ || stop_) {
    std::exception_ptr e =
        error_ ? error_ : distError("weft: the process group was shut down", false);
    lk.unlock();
    failBatch(b, e);
    return;
  }
  if (inlineOk && queue_.empty() && !busy_ && inflight_ == 0) {
    busy_ = true;  // the caller owns the comm until it is done
    lk.unlock();
    start(std::move(b), /*blocking=*/true);
    lk.lock();
    busy_ = false;
    lk.unlock();
    cv_.notify_all();
    return;
  }
  queue_.push_back(std::move(b));
  lk.unlock();
  cv_.notify_all();
}

void Runner::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  int idlePolls = 0;
  for (;;) {
    cv_.wait(lk, [this] { return !busy_ && (stop_ || !queue_.empty() || inflight_ > 0); });
    if (stop_ && queue_.empty() && inflight_ == 0) return;
    busy_ = true;
    bool moved = false;
    if (!queue_.empty()) {
      Batch b = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      start(std::move(b), /*blocking=*/false);
      moved = true;
    } else {
      lk.unlock();
    }
    moved |= pollFlights();
    lk.lock();
    busy_ = false;
    cv_.notify_all();
    // In-flight requests complete in weft's progress thread; look again
    // soon: spin a little, then back off to a millisecond.
    if (!moved && inflight_ > 0 && queue_.empty() && !stop_) {
      ++idlePolls;
      if (idlePolls > 64) {
        auto wait = std::chrono::microseconds(std::min(1000, 20 * (idlePolls - 64)));
        cv_.wait_for(lk, wait, [this] { return !queue_.empty() || stop_; });
      } else {
        lk.unlock();
        std::this_thread::yield();
        lk.lock();
      }
    } else {
      idlePolls = 0;
    }
  }
}

void Runner::start(Batch b, bool blocking) {
  if (std::exception_ptr e = error()) {
    failBatch(b, e);
    return;
  }
  double timeoutS = 0;
  bool p2p = false;
  for (const Op& op : b.ops) {
    timeoutS = std::max(timeoutS, op.timeoutS);
    p2p |= op.p2p;
  }
  if (timeoutS > 0) weft_comm_set_timeout(comm_, timeoutS);
  if (b.ops.size() == 1 && !p2p) {  // one collective: weft's own fast path
    finishBatch(b, b.ops[0].issue(comm_, b.ops[0].where.stream));
    return;
  }
  weft_result_t r = weft_group_start();
  for (size_t i = 0; r == WEFT_SUCCESS && i < b.ops.size(); ++i)
    r = b.ops[i].issue(comm_, b.ops[i].where.stream);
  if (r != WEFT_SUCCESS) {
    weft_group_end();  // issues nothing: the group holds a refused call
    finishBatch(b, r);
    return;
  }
  if (blocking || !p2p) {
    finishBatch(b, weft_group_end());
    return;
  }
  weft_request_t req = nullptr;
  r = weft_group_end_async(&req);
  if (r != WEFT_SUCCESS) {
    finishBatch(b, r);
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  flights_.push_back(Flight{std::move(b), req});
  ++inflight_;
}

bool Runner::pollFlights() {
  bool completed = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (flights_.empty()) return false;
  }
  // flights_ is only changed by the comm's owner (this thread, now).
  for (size_t i = 0; i < flights_.size();) {
    int isDone = 0;
    weft_result_t r = weft_test(flights_[i].req, &isDone);
    if (!isDone && r == WEFT_SUCCESS) {
      ++i;
      continue;
    }
    Flight f = std::move(flights_[i]);
    {
      std::lock_guard<std::mutex> lk(mu_);
      flights_.erase(flights_.begin() + static_cast<long>(i));
      --inflight_;
    }
    weft_request_free(f.req);
    finishBatch(f.batch, r);
    completed = true;
  }
  return completed;
}

std::exception_ptr Runner::makeError(const Batch& b, weft_result_t r) {
  std::string names;
  for (const Op& op : b.ops) names += (names.empty() ? "" : ", ") + op.name;
  // "Timed out" as gloo words it: scripts and torch's own tests look for it.
  const std::string what = r == WEFT_ERR_TIMEOUT
                               ? "Timed out after " + seconds(b.ops[0].timeoutS) +
                                     " without progress"
                               : std::string(weft_get_error_string(r));
  std::string msg = "weft: " + names + " failed on rank " + std::to_string(rank_) + " of " +
                    std::to_string(size_) + ": " + what + ": " + weft_get_last_error(nullptr);
  return distError(msg, fatal(r));
}

void Runner::finishBatch(Batch& b, weft_result_t r) {
  if (r != WEFT_SUCCESS) {
    std::exception_ptr e = makeError(b, r);
    if (fatal(r)) {
      bool first = false;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) {
          error_ = e;
          first = true;
        }
      }
      // The peers learn of it through weft (their ops on this comm fail
      // promptly); revoked, not aborted, the comm can still be shrunk to
      // the survivors (weft.torch.elastic) and is destroyed at shutdown.
      if (first && !aborted_) weft_comm_revoke(comm_);
    }
    failBatch(b, e);
    return;
  }
  for (Op& op : b.ops) {
    std::exception_ptr e;
    if (op.after) {
      try {
        op.after();
      } catch (...) {
        e = std::current_exception();
      }
    }
    op.work->complete(e);
  }
}

void Runner::failBatch(Batch& b, std::exception_ptr e) {
  for (Op& op : b.ops) op.work->complete(e);
}

void Runner::abort(const std::string& why) {
  std::deque<Batch> queued;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_) error_ = distError("weft: the process group was aborted (" + why + ")", true);
    queued.swap(queue_);
  }
  for (Batch& b : queued) failBatch(b, error_);
  // A call blocked in the comm returns WEFT_ERR_ABORTED; requests in
  // flight fail when next tested.
  if (!aborted_.exchange(true)) weft_comm_abort(comm_);
  cv_.notify_all();
}

void Runner::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!aborted_.exchange(true)) weft_comm_destroy(comm_);
}

}  // namespace weft_torch
