// ProcessGroupWeft: weft as a c10d::Backend ("weft" in torch.distributed).
// Each c10d call checks its tensors on the caller's thread (a refused call
// raises and changes no tensor), stages what weft cannot read or write in
// place (non-contiguous tensors, lists), and hands the weft calls to the
// group's Runner (runner.h), which issues them in call order.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <weft.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "runner.h"

namespace weft_torch {

class ProcessGroupWeft : public c10d::Backend {
 public:
  // Joins the weft communicator of this group: rank 0 makes the unique id
  // and publishes it in `store`, the others read it there. Collective over
  // the group's ranks, bounded by `timeout`.
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, std::string groupName);
  // Takes over `comm` (a communicator weft_comm_shrink made): its rank and size.
  ProcessGroupWeft(weft_comm_t comm, std::chrono::milliseconds timeout, std::string groupName);
  ~ProcessGroupWeft() override;

  const std::string getBackendName() const override { return "weft"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void abort() override;
  void shutdown() override;
  // torch.distributed.shrink_group: weft_comm_shrink without the excluded
  // ranks (which do not call); SHRINK_ABORT revokes the group first, so
  // that its pending work ends now. docs/elastic.md.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude,
                                           int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& optsOverride) override;
  // The weft communicator (for tests and weft's own Python helpers).
  weft_comm_t comm() const { return comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 public:
  // An allreduce of a float32 tensor with its data carried as `wire`
  // (WEFT_WIRE_BF16 / _FP16 / _NONE) and accumulated in float32, averaged
  // when `average` (docs/compression.md; pg_wire.cc): what the DDP comm
  // hook of weft/torch/hooks.py runs on each gradient bucket. Asynchronous.
  c10::intrusive_ptr<c10d::Work> allreduceWire(at::Tensor t, int wire, bool average);

 private:
  // Hands `op` to the runner (or, between startCoalescing and
  // endCoalescing, to the coalesced batch) and returns its Work.
  c10::intrusive_ptr<c10d::Work> run(Op op, bool asyncOp);
  Op makeOp(const char* name, c10d::OpType type, const char* title,
                 const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                 std::chrono::milliseconds timeout);
  double timeoutS(std::chrono::milliseconds opTimeout) const;
  // allgather of each input j into outputLists[j] (one tensor per rank).
  c10::intrusive_ptr<c10d::Work> allgatherLists(std::vector<std::vector<at::Tensor>>& outputLists,
                                                std::vector<at::Tensor>& inputs,
                                                const c10d::AllgatherOptions& opts, const char* name);
  c10::intrusive_ptr<c10d::Work> allreduceOne(at::Tensor t, const c10d::ReduceOp& op,
                                              std::chrono::milliseconds timeout, bool asyncOp,
                                              const char* name);

  static int rankOf(weft_comm_t comm);
  static int sizeOf(weft_comm_t comm);
  weft_comm_t comm_ = nullptr;
  std::unique_ptr<Runner> runner_;
  c10::intrusive_ptr<Options> options_;
  std::chrono::milliseconds timeout_;
  std::atomic<uint64_t> seq_{0};
  std::mutex coalesceMu_;
  bool coalescing_ = false;
  std::vector<Op> coalesced_;
};

}  // namespace weft_torch
