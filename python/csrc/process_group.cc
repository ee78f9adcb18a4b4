#include "process_group.h"

#include <c10/util/Exception.h>

#include <cstring>

#include "convert.h"
#include "staging.h"

// The group's life (creation through the store, abort, shutdown), how an op
// reaches the runner, coalescing, point to point and barriers. The
// collectives are in pg_reduce.cc and pg_movement.cc.
namespace weft_torch {

using Ptr = c10::intrusive_ptr<c10d::Work>;
using c10d::OpType;

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, std::string groupName)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("weft", timeout)),
      timeout_(timeout) {
  options_->group_name = groupName;
  // The unique id through the c10d store, as ProcessGroupNCCL does its own.
  const std::string key = "weft_unique_id";
  weft_unique_id_t id;
  if (rank == 0) {
    weft_result_t r = weft_get_unique_id(&id);
    TORCH_CHECK(r == WEFT_SUCCESS, "weft: weft_get_unique_id failed on rank 0 of group '",
                groupName, "': ", weft_get_last_error(nullptr));
    const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(b, b + sizeof id.internal));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof id.internal, "weft: the store's ", key, " has ", v.size(),
                " bytes, not ", sizeof id.internal);
    memcpy(id.internal, v.data(), v.size());
  }
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.timeout_s = timeoutS(c10d::kUnsetTimeout);
  cfg.bootstrap_timeout_s = cfg.timeout_s;
  weft_result_t r = weft_comm_init_rank_config(&comm_, size, id, rank, &cfg);
  if (r != WEFT_SUCCESS)
    C10_THROW_ERROR(DistBackendError,
                    "weft: joining the communicator of group '" + groupName + "' as rank " +
                        std::to_string(rank) + " of " + std::to_string(size) + " failed: " +
                        weft_get_error_string(r) + ": " + weft_get_last_error(nullptr));
  runner_ = std::make_unique<Runner>(comm_, rank, size);
}

ProcessGroupWeft::ProcessGroupWeft(weft_comm_t comm, std::chrono::milliseconds timeout,
                                   std::string groupName)
    : c10d::Backend(rankOf(comm), sizeOf(comm)),
      comm_(comm),
      options_(c10::make_intrusive<Options>("weft", timeout)),
      timeout_(timeout) {
  options_->group_name = groupName;
  runner_ = std::make_unique<Runner>(comm_, getRank(), getSize());
}

int ProcessGroupWeft::rankOf(weft_comm_t comm) {
  int r = -1;
  weft_comm_rank(comm, &r);
  return r;
}

int ProcessGroupWeft::sizeOf(weft_comm_t comm) {
  int n = 0;
  weft_comm_size(comm, &n);
  return n;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupWeft::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<Options>& optsOverride) {
  constexpr int kShrinkAbort = 1;  // torch.distributed.SHRINK_ABORT
  if (shrinkFlags & kShrinkAbort) weft_comm_revoke(comm_);
  std::vector<int> exclude(ranksToExclude.begin(), ranksToExclude.end());
  weft_comm_t nc = nullptr;
  weft_result_t r = weft_comm_shrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &nc);
  if (r != WEFT_SUCCESS)
    C10_THROW_ERROR(DistBackendError, std::string("weft: shrinking group '") +
                                          options_->group_name + "' failed on rank " +
                                          std::to_string(getRank()) + ": " +
                                          weft_get_error_string(r) + ": " +
                                          weft_get_last_error(comm_));
  const auto timeout = optsOverride ? optsOverride->timeout : timeout_;
  return c10::make_intrusive<ProcessGroupWeft>(nc, timeout, options_->group_name);
}

ProcessGroupWeft::~ProcessGroupWeft() { shutdown(); }

void ProcessGroupWeft::abort() {
  if (runner_) runner_->abort("abort() was called on rank " + std::to_string(getRank()));
}

void ProcessGroupWeft::shutdown() {
  if (runner_) runner_->shutdown();
}

double ProcessGroupWeft::timeoutS(std::chrono::milliseconds opTimeout) const {
  std::chrono::milliseconds t = opTimeout == c10d::kUnsetTimeout ? timeout_ : opTimeout;
  return std::max(0.001, std::chrono::duration<double>(t).count());
}

Op ProcessGroupWeft::makeOp(const char* name, OpType type, const char* title,
                            const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                            std::chrono::milliseconds timeout) {
  Op op;
  op.name = name;
  op.timeoutS = timeoutS(timeout);
  op.where = placementOf({&inputs, &outputs}, name);
  op.work = c10::make_intrusive<WorkWeft>(
      getRank(), type, title, inputs, std::move(outputs), seq_.fetch_add(1) + 1,
      std::chrono::milliseconds(static_cast<int64_t>(op.timeoutS * 1000)), op.where);
  return op;
}

Ptr ProcessGroupWeft::run(Op op, bool asyncOp) {
  Ptr work = op.work;
  {
    std::lock_guard<std::mutex> lk(coalesceMu_);
    if (coalescing_) {
      coalesced_.push_back(std::move(op));
      return work;
    }
  }
  std::vector<Op> one;
  one.push_back(std::move(op));
  runner_->submit(std::move(one), !asyncOp);
  return work;
}

void ProcessGroupWeft::startCoalescing() {
  std::lock_guard<std::mutex> lk(coalesceMu_);
  TORCH_CHECK(!coalescing_, "weft: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

Ptr ProcessGroupWeft::endCoalescing() {
  std::vector<Op> ops;
  {
    std::lock_guard<std::mutex> lk(coalesceMu_);
    TORCH_CHECK(coalescing_, "weft: endCoalescing without startCoalescing");
    coalescing_ = false;
    ops.swap(coalesced_);
  }
  // One Work for the batch: completes after every op of it (the runner
  // completes a batch's ops in order, this one last).
  Op all = makeOp("coalesced", OpType::COALESCED, "weft:coalesced", {}, {}, c10d::kUnsetTimeout);
  all.issue = [](weft_comm_t, weft_stream_t) { return WEFT_SUCCESS; };
  for (const Op& op : ops) {
    all.p2p |= op.p2p;
    all.timeoutS = std::max(all.timeoutS, op.timeoutS);
  }
  Ptr work = all.work;
  ops.push_back(std::move(all));
  runner_->submit(std::move(ops), false);
  return work;
}

// ---- point to point --------------------------------------------------------

Ptr ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const char* name = "send";
  checkSingle(tensors, name);
  checkTensor(tensors[0], name, "the tensor");
  TORCH_CHECK(dstRank >= 0 && dstRank < getSize(), "weft: send: destination ", dstRank,
              " is outside [0, ", getSize(), ")");
  at::Tensor src = tensors[0].contiguous();
  Op op = makeOp(name, OpType::SEND, "weft:send", tensors, tensors, c10d::kUnsetTimeout);
  op.p2p = true;
  op.issue = [src, dstRank](weft_comm_t c, weft_stream_t s) {
    return weft_send(ptr(src), bytes(src), WEFT_UINT8, dstRank, c, s);
  };
  return run(std::move(op), true);
}

Ptr ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const char* name = "recv";
  checkSingle(tensors, name);
  at::Tensor t = tensors[0];
  checkTensor(t, name, "the tensor");
  TORCH_CHECK(srcRank >= 0 && srcRank < getSize(), "weft: recv: source ", srcRank,
              " is outside [0, ", getSize(), ")");
  at::Tensor buf = writable(t);
  Op op = makeOp(name, OpType::RECV, "weft:recv", tensors, tensors, c10d::kUnsetTimeout);
  op.work->setSourceRank(srcRank);
  op.p2p = true;
  op.issue = [buf, srcRank](weft_comm_t c, weft_stream_t s) {
    return weft_recv(ptr(buf), bytes(buf), WEFT_UINT8, srcRank, c, s);
  };
  if (!buf.is_same(t)) op.after = [t, buf]() { copyBack(t, buf); };
  return run(std::move(op), true);
}

Ptr ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK(false, "weft: recv from any source is not supported (weft matches sends and "
              "receives per pair of ranks); pass src= to recv/irecv");
}

// ---- barriers -------------------------------------------------------------

Ptr ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  Op op = makeOp("barrier", OpType::BARRIER, "weft:barrier", {}, {}, opts.timeout);
  op.issue = [](weft_comm_t c, weft_stream_t s) { return weft_barrier(c, s); };
  return run(std::move(op), opts.asyncOp);
}

void ProcessGroupWeft::monitoredBarrier(const c10d::BarrierOptions& opts, bool /*waitAllRanks*/) {
  // weft's barrier is bounded by the op's timeout, and its error names the
  // rank that did not arrive.
  Op op = makeOp("monitored_barrier", OpType::BARRIER, "weft:monitored_barrier", {}, {},
                 opts.timeout);
  op.issue = [](weft_comm_t c, weft_stream_t s) { return weft_barrier(c, s); };
  Ptr work = run(std::move(op), false);
  work->wait();
}

}  // namespace weft_torch

