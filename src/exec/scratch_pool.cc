// The engine's memory kept from one op for the next: finished Ops, reset
// with their vectors' capacity kept (newOp), and scratch buffers, the
// largest few per backend, so that a loop of collectives allocates and
// zeroes nothing per op.
#include "exec/engine.h"

namespace weft {

std::unique_ptr<Op> Engine::newOp() {
  if (freeOps_.empty()) return std::unique_ptr<Op>(new Op());
  std::unique_ptr<Op> op = std::move(freeOps_.back());
  freeOps_.pop_back();
  return op;
}

size_t Engine::releaseSpareScratch() {
  if (busy()) return 0;
  size_t bytes = 0;
  for (const Spare& sp : spare_) bytes += sp.len;
  spare_.clear();
  spareBytes_ = 0;
  for (auto& op : freeOps_) bytes += op->scratchLen;
  freeOps_.clear();
  return bytes;
}

size_t Engine::spareScratchBytes(bool device) const {
  size_t bytes = 0;
  for (const Spare& sp : spare_)
    if ((sp.from != nullptr) == device) bytes += sp.len;
  if (!device)
    for (const auto& op : freeOps_) bytes += op->scratchLen;
  return bytes;
}

void Engine::recycle(std::unique_ptr<Op>& op) {
  if (freeOps_.size() < kFreeOps) {
    // A small host scratch buffer stays with the op: the next op of a loop
    // of small collectives takes it back without a search of the pool.
    ScratchPtr keep;
    size_t keepLen = 0;
    if (op->scratch && !op->lw && op->scratchLen <= kKeepScratch) {
      keep = std::move(op->scratch);
      keepLen = op->scratchLen;
    } else {
      giveBackScratch(*op, op->lw);
    }
    op->reset();
    op->scratch = std::move(keep);
    op->scratchLen = keepLen;
    freeOps_.push_back(std::move(op));
    return;
  }
  giveBackScratch(*op, op->lw);
  op.reset();
}

Status Engine::takeScratch(Op& op) {
  const size_t need = op.schedule().scratchBytes;
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i)
    if (spare_[i].from == op.lw && spare_[i].len >= need &&
        (best == spare_.size() || spare_[i].len < spare_[best].len))
      best = i;
  if (best < spare_.size()) {
    op.scratch = std::move(spare_[best].buf);
    op.scratchLen = spare_[best].len;
    spareBytes_ -= op.scratchLen;
    spare_.erase(spare_.begin() + static_cast<long>(best));
    return Status();
  }
  // Not zeroed: steps write before they read.
  if (op.lw) {
    WEFT_RETURN_IF_ERROR(op.lw->allocScratch(need, &op.scratch));
  } else {
    op.scratch.reset(new uint8_t[need]);
  }
  op.scratchLen = need;
  return Status();
}

void Engine::dropScratch(Op& op) {
  giveBackScratch(op, nullptr);
  op.scratch.reset();  // the pool kept larger ones
  op.scratchLen = 0;
}

void Engine::giveBackScratch(Op& op, const LocalWork* from) {
  if (!op.scratch || op.scratchLen > kSpareBytes) return;  // the caller frees it
  while (spare_.size() >= kSpareScratch || spareBytes_ + op.scratchLen > kSpareBytes) {
    // Full: the largest buffers stay.
    size_t smallest = 0;
    for (size_t i = 1; i < spare_.size(); ++i)
      if (spare_[i].len < spare_[smallest].len) smallest = i;
    if (spare_[smallest].len >= op.scratchLen) return;
    spareBytes_ -= spare_[smallest].len;
    spare_.erase(spare_.begin() + static_cast<long>(smallest));
  }
  spareBytes_ += op.scratchLen;
  spare_.push_back(Spare{op.scratchLen, std::move(op.scratch), from});
}

}  // namespace weft
