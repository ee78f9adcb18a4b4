// WorkWeft: the c10d::Work of one weft operation. Completed by the
// backend's runner (or at once, for a call run inline); carries a Future
// whose value is the op's output tensors (DDP communication hooks chain on
// it) and whose error is the op's weft message. For CUDA tensors the op is
// complete once weft has enqueued it on the caller's stream; the Future is
// then a CUDA one (its device listed), so waiting on it from another stream
// makes that stream wait for the op.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>

#include <chrono>
#include <vector>

#include "placement.h"

namespace weft_torch {

class WorkWeft : public c10d::Work {
 public:
  WorkWeft(int rank, c10d::OpType type, const char* profilingTitle,
           const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
           uint64_t seq, std::chrono::milliseconds timeout, const Placement& where);

  // Marks the op done: the Future gets the outputs, or the error.
  void complete(std::exception_ptr error);

  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive's source rank (sourceRank() of c10d's recv Work).
  void setSourceRank(int r) { source_ = r; }
  int sourceRank() const override { return source_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
  float getDuration() const override;
  // wait(timeout) with a timeout names the op and how long it waited.
  bool wait(std::chrono::milliseconds timeout) override;

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const uint64_t seq_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point end_;
  const char* title_;
  int source_ = -1;
};

}  // namespace weft_torch
