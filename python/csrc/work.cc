#include "work.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

namespace weft_torch {

WorkWeft::WorkWeft(int rank, c10d::OpType type, const char* profilingTitle,
                   const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                   uint64_t seq, std::chrono::milliseconds timeout, const Placement& where)
    : c10d::Work(rank, type, profilingTitle, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          where.cuda() ? std::vector<c10::Device>{where.device} : std::vector<c10::Device>{})),
      seq_(seq),
      timeout_(timeout),
      start_(std::chrono::steady_clock::now()),
      title_(profilingTitle) {}

void WorkWeft::complete(std::exception_ptr error) {
  // Completed (isCompleted, exception) before the Future, so that a thread
  // woken by the Future sees the Work done; wait() also waits for the
  // Future, so that a thread woken by wait() finds its value there.
  std::function<void()> endProfile;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    end_ = std::chrono::steady_clock::now();
    completed_ = true;
    exception_ = error;
    endProfile = std::move(recordFunctionEndCallback_);
  }
  if (endProfile) endProfile();
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  cv_.notify_all();
}

float WorkWeft::getDuration() const {
  std::lock_guard<std::mutex> lk(mutex_);
  if (!completed_) return -1;
  return std::chrono::duration<float, std::milli>(end_ - start_).count();
}

bool WorkWeft::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lk, [this] { return completed_; });
  } else if (!cv_.wait_for(lk, timeout, [this] { return completed_; })) {
    TORCH_CHECK(false, "weft: ", title_, " (sequence number ", seq_, ") did not complete within ",
                timeout.count(), " ms of wait(); it is still running and fails by itself after the "
                "process group's timeout if a peer never joins");
  }
  std::exception_ptr e = exception_;
  lk.unlock();
  future_->wait();  // marked right after completed_ (complete())
  if (e) std::rethrow_exception(e);
  return true;
}

}  // namespace weft_torch
