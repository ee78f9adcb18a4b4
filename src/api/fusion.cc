// Tensor fusion, the execution (fusion.h): the comm's buffer pool, the
// group's plan with each comm's threshold, and the fused op, whose results
// are copied out by a completion hook (a tracker of its own that reports to
// the group's: OpTracker::onDone).
#include "api/fusion.h"

#include <cstddef>
#include <cstring>
#include <new>

#include "api/api_state.h"
#include "core/log.h"

namespace weft {

std::unique_ptr<FusionPool::Batch> FusionPool::take(size_t bytes) {
  std::unique_ptr<Batch> b;
  {
    std::lock_guard<Mutex> lk(mu_);
    // The smallest spare that fits, else the largest (grown below).
    size_t best = spare_.size();
    for (size_t i = 0; i < spare_.size(); ++i) {
      const size_t cap = spare_[i]->cap;
      if (best == spare_.size()) {
        best = i;
        continue;
      }
      const size_t bc = spare_[best]->cap;
      if (cap >= bytes ? (bc < bytes || cap < bc) : (bc < bytes && cap > bc)) best = i;
    }
    if (best < spare_.size()) {
      b = std::move(spare_[best]);
      spare_.erase(spare_.begin() + static_cast<long>(best));
    }
  }
  if (!b) b.reset(new (std::nothrow) Batch);
  if (!b) return nullptr;
  b->slices.clear();
  if (b->cap < bytes) {
    // Grown to a power of two, so that a loop of slowly growing groups
    // reallocates a few times only.
    size_t cap = 4096;
    while (cap < bytes) cap <<= 1;
    b->data.reset();
    b->data.reset(new (std::nothrow) uint8_t[cap]);
    b->cap = b->data ? cap : 0;
    if (!b->data) return nullptr;
  }
  return b;
}

void FusionPool::giveBack(std::unique_ptr<Batch> b) {
  std::lock_guard<Mutex> lk(mu_);
  size_t bytes = b->cap;
  for (auto& s : spare_) bytes += s->cap;
  if (spare_.size() < kKeep || bytes <= kKeepBytes) {
    spare_.push_back(std::move(b));
    return;
  }
  // Full: keep the larger ones.
  auto smallest = std::min_element(spare_.begin(), spare_.end(),
                                   [](const std::unique_ptr<Batch>& x,
                                      const std::unique_ptr<Batch>& y) { return x->cap < y->cap; });
  if ((*smallest)->cap < b->cap) *smallest = std::move(b);
}

size_t FusionPool::release() {
  std::lock_guard<Mutex> lk(mu_);
  size_t bytes = 0;
  for (auto& b : spare_) bytes += b->cap;
  spare_.clear();
  return bytes;
}

size_t FusionPool::spareBytes() {
  std::lock_guard<Mutex> lk(mu_);
  size_t bytes = 0;
  for (auto& b : spare_) bytes += b->cap;
  return bytes;
}

size_t fusionRequest(size_t env, const weft_config_t* config) {
  const bool has = config && config->size >= offsetof(weft_config_t, fusion_threshold) +
                                                 sizeof(config->fusion_threshold);
  if (!has || config->fusion_threshold == 0) return env;
  return config->fusion_threshold == WEFT_FUSION_OFF ? 0 : config->fusion_threshold;
}

void planGroupFusion(const std::vector<PendingCall>& calls, FusionPlan* plan) {
  thread_local std::vector<FusionCall> fc;
  fc.resize(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const PendingCall& pc = calls[i];
    FusionCall& f = fc[i];
    f.comm = pc.comm.get();
    const CollType t = pc.args.type;
    f.kind = t == CollType::AllReduce                     ? FusionCall::kAllReduce
             : t == CollType::Send || t == CollType::Recv ? FusionCall::kPointToPoint
                                                          : FusionCall::kOtherCollective;
    f.host = !pc.onStream;
    f.dtype = static_cast<int>(pc.dtype);
    f.op = static_cast<int>(pc.args.op);
    f.repro = static_cast<int>(pc.args.repro);
    f.bytes = pc.args.count * pc.args.eltSize;
    f.threshold = pc.comm->fusionThreshold();
    f.maxCall = pc.comm->fusionMaxCall();
  }
  planFusion(fc.data(), fc.size(), plan);
}

Status enqueueFused(const std::vector<PendingCall>& calls, const FusionPlan& plan,
                    const FusionPlan::Item& it, const std::shared_ptr<OpTracker>& tracker) {
  const PendingCall& head = calls[plan.members[it.first]];
  Comm* comm = head.comm.get();
  std::shared_ptr<FusionPool> pool = comm->fusionPool();
  std::unique_ptr<FusionPool::Batch> b = pool->take(it.bytes);
  if (!b)
    return Status(WEFT_ERR_SYSTEM, strFormat("allreduce: no memory for a fusion buffer of %zu "
                                             "bytes (WEFT_FUSION_THRESHOLD=0 turns fusion off)",
                                             it.bytes));
  // Every send read now, before any result is written (fusion.h).
  size_t at = 0;
  for (size_t k = it.first; k < it.first + it.n; ++k) {
    const PendingCall& pc = calls[plan.members[k]];
    const size_t len = pc.args.count * pc.args.eltSize;
    std::memcpy(b->data.get() + at, pc.send, len);
    b->slices.push_back(FusionPool::Batch::Slice{pc.recv, at, len});
    at += len;
  }
  CollArgs args = head.args;
  args.count = it.bytes / args.eltSize;
  args.inPlace = true;
  uint8_t* data = b->data.get();
  // The fused op's own tracker: when the op ends, its results go out (on
  // success only) and the buffer back, then the group's tracker counts it.
  // The hook runs exactly when the op was enqueued (Comm::enqueue returned
  // ok), so the batch is owned by the hook from then on, and here before.
  FusionPool::Batch* raw = b.release();
  auto own = std::make_shared<OpTracker>();
  own->onDone = [raw, pool, tracker](const Status& st) {
    if (st.isOk())
      for (const FusionPool::Batch::Slice& s : raw->slices)
        std::memcpy(s.recv, raw->data.get() + s.offset, s.len);
    pool->giveBack(std::unique_ptr<FusionPool::Batch>(raw));
    tracker->finishOne(st);
  };
  tracker->pending++;
  std::lock_guard<Mutex> lk(comm->mu);
  Status st =
      comm->enqueue(args, head.dtype, data, data, own, false, 0, static_cast<uint32_t>(it.n));
  if (st.isError()) {
    tracker->pending--;
    pool->giveBack(std::unique_ptr<FusionPool::Batch>(raw));
  }
  return st;
}

}  // namespace weft
