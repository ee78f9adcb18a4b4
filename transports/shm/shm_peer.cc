#include "transports/shm/shm_peer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "transports/shm/arena.h"

namespace weft {
namespace shm {

ShmPeer::ShmPeer(int rank, int peer, std::string peerDesc, std::unique_ptr<Segment> out,
                 std::unique_ptr<Segment> in)
    : rank_(rank),
      peer_(peer),
      peerDesc_(std::move(peerDesc)),
      out_(std::move(out)),
      in_(std::move(in)),
      outHdr_(out_->header()),
      outSlots_(outHdr_->slots),
      outSlotBytes_(outHdr_->slotBytes),
      inHdr_(in_->header()),
      inSlots_(inHdr_->slots),
      inSlotBytes_(inHdr_->slotBytes),
      state_("shm", rank) {}

bool ShmPeer::pushSend(Op& op) {
  do {
    if (head_ - tailCache_ >= outSlots_) {
      tailCache_ = outHdr_->tail.load(std::memory_order_acquire);
      if (head_ - tailCache_ >= outSlots_) return false;
    }
    SlotHeader* s = out_->slot(headIdx_);
    size_t part = std::min(outSlotBytes_, op.len - op.off);
    s->tag = op.tag;
    s->msgLen = op.len;
    s->partLen = part;
    s->seq = sendSeq_;
    s->stamp = op.c->stamp;
    if (faults_ && op.off == 0 && faults_->fire(FaultKind::Corrupt, "shm send")) {
      const uint64_t r = faults_->draw();
      switch (r % 4) {
        case 0: flipBit(&s->tag, sizeof s->tag, r >> 8); break;
        case 1: flipBit(&s->msgLen, sizeof s->msgLen, r >> 8); break;
        case 2: flipBit(&s->partLen, sizeof s->partLen, r >> 8); break;
        default: flipBit(&s->seq, sizeof s->seq, r >> 8); break;
      }
    }
    if (part) memcpy(Segment::payload(s), op.buf + op.off, part);
    op.off += part;
    ++head_;
    if (++headIdx_ == outSlots_) headIdx_ = 0;
    outHdr_->head.store(head_, std::memory_order_release);
    wakePeer();
  } while (op.off < op.len);
  ++sendSeq_;
  return true;
}

void ShmPeer::wakePeer() {
  if (!waker_) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  waker_->wakeIfSleeping(peer_);
}

bool ShmPeer::hasNews() const {
  if (!state_.live()) return false;
  if (!recvs_.empty() && inHdr_->head.load(std::memory_order_acquire) != tail_) return true;
  if (!sends_.empty() && outHdr_->tail.load(std::memory_order_acquire) != tailCache_) return true;
  return false;
}

Status ShmPeer::pullRecv(Op& op, bool* done) {
  *done = false;
  do {
    if (tail_ == headCache_) {
      headCache_ = inHdr_->head.load(std::memory_order_acquire);
      if (tail_ == headCache_) return Status::ok();
    }
    const SlotHeader* s = in_->slot(tailIdx_);
    const size_t part = std::min(inSlotBytes_, op.len - op.off);
    if (!slotMatches(*s, recvSeq_, op.tag, op.len, part)) {
      inHdr_->broken.store(1, std::memory_order_release);
      return fail(slotError("shm", *s, rank_, peer_, peerDesc_, recvSeq_, op.tag, op.len, part));
    }
    if (part) memcpy(op.buf + op.off, Segment::payload(const_cast<SlotHeader*>(s)), part);
    if (op.off == 0) op.c->stamp = s->stamp;
    op.off += part;
    ++tail_;
    if (++tailIdx_ == inSlots_) tailIdx_ = 0;
    inHdr_->tail.store(tail_, std::memory_order_release);
    wakePeer();
  } while (op.off < op.len);
  ++recvSeq_;
  *done = true;
  return Status::ok();
}

Status ShmPeer::injectAtSend() {
  if (faults_->fire(FaultKind::Delay, "shm send"))
    std::this_thread::sleep_for(std::chrono::milliseconds(faults_->delayMs()));
  if (!faults_->fire(FaultKind::Drop, "shm send")) return Status::ok();
  // As the peer sees a channel whose owner ended its communicator.
  Status st = fail(Status(WEFT_ERR_REMOTE,
                          strFormat("shm channel from rank %d to %s dropped by fault injection "
                                    "(WEFT_TEST_FAULTS)",
                                    rank_, peerDesc_.c_str())));
  for (Segment* seg : {out_.get(), in_.get()})
    if (seg && seg->header()) seg->header()->closed.store(1, std::memory_order_release);
  return st;
}

Status ShmPeer::postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  if (faults_) WEFT_RETURN_IF_ERROR(injectAtSend());
  Op op{static_cast<char*>(const_cast<void*>(buf)), len, 0, tag, c};
  if (sends_.empty() && pushSend(op)) {
    c->finish();
    return Status::ok();
  }
  sends_.push_back(op);
  return Status::inProgress();
}

Status ShmPeer::postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  Op op{static_cast<char*>(buf), len, 0, tag, c};
  if (recvs_.empty()) {
    bool done = false;
    Status st = pullRecv(op, &done);
    if (st.isError()) {
      c->finish(st);
      return st;
    }
    if (done) {
      c->finish();
      return Status::ok();
    }
  }
  recvs_.push_back(op);
  return Status::inProgress();
}

Status ShmPeer::progress() {
  if (state_.aborted()) return Status::ok();
  if (!state_.failed().isOk()) return state_.failed();
  while (!sends_.empty()) {
    Op& op = sends_.front();
    if (!pushSend(op)) {
      if (outHdr_->broken.load(std::memory_order_acquire))
        return fail(peerReportedMismatch("shm", rank_, peerDesc_));
      break;
    }
    Completion* c = op.c;
    sends_.pop_front();
    c->finish();
  }
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    bool done = false;
    WEFT_RETURN_IF_ERROR(pullRecv(op, &done));
    if (!done) break;
    Completion* c = op.c;
    recvs_.pop_front();
    c->finish();
  }
  return Status::ok();
}

Status ShmPeer::fail(const Status& st) {
  state_.fail(st);
  finishAll(sends_, st);
  finishAll(recvs_, st);
  return st;
}

void ShmPeer::abort() {
  state_.abort();
  sends_.clear();
  recvs_.clear();
  // The peer maps both FIFOs: it sees that this rank left (peerLeft).
  for (Segment* s : {out_.get(), in_.get()})
    if (s && s->header()) s->header()->closed.store(1, std::memory_order_release);
  // Names go now; the mappings when the channel is destroyed (another
  // thread may still look at them).
  out_->unlink();
  in_->unlink();
}

bool ShmPeer::peerLeft() const {
  if (state_.aborted()) return false;  // this side's own abort set the flags
  for (const Segment* s : {out_.get(), in_.get()})
    if (s && s->header() && s->header()->closed.load(std::memory_order_acquire)) return true;
  return false;
}

}  // namespace shm
}  // namespace weft
