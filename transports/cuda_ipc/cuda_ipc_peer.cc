#include "transports/cuda_ipc/cuda_ipc_peer.h"

#include <algorithm>

#include "core/log.h"
#include "cuda/runtime.h"

namespace weft {
namespace cuda_ipc {

using shm::FifoHeader;
using shm::SlotHeader;

CudaIpcPeer::CudaIpcPeer(int rank, int peer, std::string peerDesc,
                         std::unique_ptr<shm::Segment> out, std::unique_ptr<shm::Segment> in,
                         char* outSlots, char* inSlots, size_t slotBytes, void* stream)
    : rank_(rank),
      peer_(peer),
      peerDesc_(std::move(peerDesc)),
      out_(std::move(out)),
      in_(std::move(in)),
      outSlots_(outSlots),
      inSlots_(inSlots),
      slotBytes_(slotBytes),
      stream_(stream),
      slots_(std::min(out_->header()->slots, in_->header()->slots)),
      state_("cuda_ipc", rank) {
  state_.setMemory(false, true, "cuda_ipc transport: host memory is not supported (use shm)");
}

CudaIpcPeer::~CudaIpcPeer() {
  for (void* e : sendEvents_) cuda::eventDestroy(e);
  for (void* e : recvEvents_) cuda::eventDestroy(e);
}

Status CudaIpcPeer::init() {
  for (uint32_t i = 0; i < slots_; ++i) {
    void* e = nullptr;
    WEFT_RETURN_IF_ERROR(cuda::eventCreate(&e));
    sendEvents_.push_back(e);
    WEFT_RETURN_IF_ERROR(cuda::eventCreate(&e));
    recvEvents_.push_back(e);
  }
  return Status();
}

// Copies the front sends into free slots of the peer, one slot a step, as
// long as slots are free. A slot is published only once its copy is done.
Status CudaIpcPeer::issueSends() {
  FifoHeader* h = out_->header();
  while (!sends_.empty()) {
    Op& op = sends_.front();
    if (headIssued_ - tailCache_ >= slots_) {
      tailCache_ = h->tail.load(std::memory_order_acquire);
      if (headIssued_ - tailCache_ >= slots_) break;
    }
    const uint32_t idx = static_cast<uint32_t>(headIssued_ % slots_);
    const size_t part = std::min(slotBytes_, op.len - op.off);
    SlotHeader* s = out_->slot(idx);
    s->tag = op.tag;
    s->msgLen = op.len;
    s->partLen = part;
    s->seq = sendSeq_;
    if (part)
      WEFT_RETURN_IF_ERROR(
          cuda::copyAsync(outSlots_ + idx * slotBytes_, op.buf + op.off, part, stream_));
    WEFT_RETURN_IF_ERROR(cuda::eventRecord(sendEvents_[idx], stream_));
    op.off += part;
    ++headIssued_;
    const bool last = op.off >= op.len;
    sendFlights_.push_back(Flight{sendEvents_[idx], last ? op.c : nullptr});
    if (last) {
      ++sendSeq_;
      sends_.pop_front();
    }
  }
  return Status();
}

// Copies published slots out into the front receives, checking each slot's
// header against the receive it fills.
Status CudaIpcPeer::issueRecvs() {
  FifoHeader* h = in_->header();
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    if (tailIssued_ == headCache_) {
      headCache_ = h->head.load(std::memory_order_acquire);
      if (tailIssued_ == headCache_) break;
    }
    const uint32_t idx = static_cast<uint32_t>(tailIssued_ % slots_);
    const SlotHeader* s = in_->slot(idx);
    const size_t part = std::min(slotBytes_, op.len - op.off);
    if (!slotMatches(*s, recvSeq_, op.tag, op.len, part)) {
      h->broken.store(1, std::memory_order_release);
      return fail(
          slotError("cuda_ipc", *s, rank_, peer_, peerDesc_, recvSeq_, op.tag, op.len, part));
    }
    if (part)
      WEFT_RETURN_IF_ERROR(
          cuda::copyAsync(op.buf + op.off, inSlots_ + idx * slotBytes_, part, stream_));
    WEFT_RETURN_IF_ERROR(cuda::eventRecord(recvEvents_[idx], stream_));
    op.off += part;
    ++tailIssued_;
    const bool last = op.off >= op.len;
    recvFlights_.push_back(Flight{recvEvents_[idx], last ? op.c : nullptr});
    if (last) {
      ++recvSeq_;
      recvs_.pop_front();
    }
  }
  return Status();
}

// Publishes the slots whose copies are done, in order; completes the ops
// whose last slot that was.
Status CudaIpcPeer::retire(std::deque<Flight>* flights, bool send) {
  while (!flights->empty()) {
    bool done = false;
    Status st = cuda::eventDone(flights->front().event, &done);
    if (st.isError()) return fail(st.withContext("cuda_ipc transport, peer " + peerDesc_));
    if (!done) break;
    if (send)
      out_->header()->head.store(++head_, std::memory_order_release);
    else
      in_->header()->tail.store(++tail_, std::memory_order_release);
    Completion* c = flights->front().c;
    flights->pop_front();
    if (c) c->finish();
  }
  return Status();
}

Status CudaIpcPeer::postSend(const void* buf, size_t len, uint64_t tag, MemType mem,
                             Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  sends_.push_back(Op{static_cast<char*>(const_cast<void*>(buf)), len, 0, tag, c});
  WEFT_RETURN_IF_ERROR(progress());
  return c->done ? Status::ok() : Status::inProgress();
}

Status CudaIpcPeer::postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  recvs_.push_back(Op{static_cast<char*>(buf), len, 0, tag, c});
  WEFT_RETURN_IF_ERROR(progress());
  return c->done ? Status::ok() : Status::inProgress();
}

Status CudaIpcPeer::progress() {
  if (state_.aborted()) return Status();
  if (!state_.failed().isOk()) return state_.failed();
  WEFT_RETURN_IF_ERROR(retire(&sendFlights_, true));
  WEFT_RETURN_IF_ERROR(retire(&recvFlights_, false));
  WEFT_RETURN_IF_ERROR(issueSends());
  WEFT_RETURN_IF_ERROR(issueRecvs());
  if (!sends_.empty() && out_->header()->broken.load(std::memory_order_acquire))
    return fail(peerReportedMismatch("cuda_ipc", rank_, peerDesc_));
  return Status();
}

Status CudaIpcPeer::fail(const Status& st) {
  state_.fail(st);
  finishAll(sendFlights_, st);
  finishAll(recvFlights_, st);
  finishAll(sends_, st);
  finishAll(recvs_, st);
  return st;
}

void CudaIpcPeer::abort() {
  state_.abort();
  sendFlights_.clear();
  recvFlights_.clear();
  sends_.clear();
  recvs_.clear();
  out_->unlink();
  in_->unlink();
}

}  // namespace cuda_ipc
}  // namespace weft
