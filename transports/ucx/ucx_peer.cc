#include "transports/ucx/ucx_peer.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "transports/ucx/ucx_tls.h"

namespace weft {
namespace ucx {
namespace {

// What a part's request slot holds while UCP is posting it (beginPart).
char postingMark;
void* const kPosting = &postingMark;

// Whether UCX_TLS lets UCP use a network transport (all of which handle
// peer failure); false for shared-memory-only lists such as "sm".
bool tlsHaveNetwork() { return tlsMayUse({"tcp", "rc", "ud", "dc", "ib"}); }

}  // namespace

MsgOp* Shared::takeOp() {
  if (freeOps.empty()) {
    pool.push_back(std::make_unique<MsgOp>());
    freeOps.push_back(pool.back().get());
  }
  MsgOp* op = freeOps.back();
  freeOps.pop_back();
  return op;
}

void Shared::giveOp(MsgOp* op) {
  op->c = nullptr;
  op->finished = false;
  op->req[0] = op->req[1] = nullptr;
  op->headerSt = Status();
  op->dataSt = Status();
  freeOps.push_back(op);
}

UcxPeer::UcxPeer(Shared* sh, int peer, const std::string& host, int pid, bool sameHost)
    : sh_(sh),
      peer_(peer),
      host_(host),
      pid_(pid),
      sameHost_(sameHost),
      state_("ucx", sh->rank, LogLevel::Info) {
  if (sameHost_ && pid_ > 0) watch_.watch(pid_);
}

UcxPeer::~UcxPeer() {
  // The transport drained or destroyed the worker first; nothing may call
  // back into this peer any more.
}

std::string UcxPeer::describe() const {
  return strFormat("rank %d (%s, pid %d)", peer_, host_.c_str(), pid_);
}

Status UcxPeer::open(const void* workerAddr, bool bulk) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = static_cast<const ucp_address_t*>(workerAddr);
  // Peer mode: a lost peer fails its requests and calls onError instead of
  // taking this process down.
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &UcxPeer::onError;
  p.err_handler.arg = this;
  if (sameHost_ && pid_ > 0 && !tlsHaveNetwork()) {
    // UCX's shared-memory transports have no peer failure handling, so
    // with UCX_TLS=sm no endpoint could be made in peer mode; a peer on this
    // host is watched by pid instead.
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  }
  ucs_status_t st = ucp_ep_create(sh_->worker, &p, &ep_);
  if (st == UCS_OK && bulk && p.err_mode == UCP_ERR_HANDLING_MODE_PEER) {
    // No failure mode, but the handler stays: over tcp UCP still reports a
    // reset connection through it.
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    st = ucp_ep_create(sh_->worker, &p, &bulkEp_);
  } else {
    bulkEp_ = ep_;
  }
  if (st != UCS_OK)
    return Status(WEFT_ERR_REMOTE, strFormat("ucx transport: rank %d cannot reach %s: %s",
                                             sh_->rank, describe().c_str(), ucs_status_string(st)));
  return Status::ok();
}

Status UcxPeer::sendFailed(ucs_status_t st) const {
  return Status(WEFT_ERR_REMOTE, strFormat("ucx transport: send to %s failed: %s",
                                           describe().c_str(), ucs_status_string(st)));
}

Status UcxPeer::sendPart(MsgOp* op, int i, const void* data, size_t len, Kind k) {
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = &UcxPeer::onSend;
  prm.user_data = &op->part[i];
  ucp_ep_h ep = k == Kind::Data ? bulkEp_ : ep_;
  beginPart(op, i);
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, data, len, ucpTag(sh_->rank, k, op->seq), &prm);
  if (UCS_PTR_IS_ERR(r)) {
    abandonPart(op, i);
    return sendFailed(UCS_PTR_STATUS(r));
  }
  endPart(op, i, r, len);
  return Status::ok();
}

Status UcxPeer::recvPart(MsgOp* op, int i, void* data, size_t len, Kind k) {
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.recv = &UcxPeer::onRecv;
  prm.user_data = &op->part[i];
  beginPart(op, i);
  ucs_status_ptr_t r =
      ucp_tag_recv_nbx(sh_->worker, data, len, ucpTag(peer_, k, op->seq), ~0ull, &prm);
  if (UCS_PTR_IS_ERR(r)) {
    abandonPart(op, i);
    return Status(WEFT_ERR_REMOTE,
                  strFormat("ucx transport: receive from %s failed: %s", describe().c_str(),
                            ucs_status_string(UCS_PTR_STATUS(r))));
  }
  // Completed at once: UCX 1.13 does not report the length then; the header
  // says it, and UCX would have failed a longer message as truncated.
  endPart(op, i, r, kUnknownLength);
  return Status::ok();
}

// A part is counted before UCP sees it, because UCP may finish it inside the
// posting call and run its callback there: a receive whose eager fragments
// all arrived before it was posted completes in ucp_tag_recv_nbx, which then
// returns the request its callback already freed. Counted after, that
// callback took the op's last count and released it under the caller.
// req[i] holds kPosting until the call returns: a callback clears it.
void UcxPeer::beginPart(MsgOp* op, int i) {
  ++op->parts;
  op->req[i] = kPosting;
}

void UcxPeer::abandonPart(MsgOp* op, int i) {
  --op->parts;  // the caller's own count keeps the op
  op->req[i] = nullptr;
}

void UcxPeer::endPart(MsgOp* op, int i, ucs_status_ptr_t r, size_t immediateLen) {
  if (r == nullptr) {  // done in the call, no callback
    op->req[i] = nullptr;
    partDone(op, i, UCS_OK, immediateLen);
  } else if (op->req[i] == kPosting) {  // pending
    op->req[i] = r;
  }  // else its callback ran in the call
}

namespace {

// Fault injection (corrupt): one bit of a field the receiver checks.
void corruptHeader(MsgHeader* h, uint64_t r) {
  switch (r % 4) {
    case 0: flipBit(&h->magic, sizeof h->magic, r >> 8); break;
    case 1: flipBit(&h->seq, sizeof h->seq, r >> 8); break;
    case 2: flipBit(&h->tag, sizeof h->tag, r >> 8); break;
    default: flipBit(&h->len, sizeof h->len, r >> 8); break;
  }
}

}  // namespace

Status UcxPeer::injectAtSend() {
  Shared& sh = *sh_;
  if (sh.faults->fire(FaultKind::Delay, "ucx send"))
    std::this_thread::sleep_for(std::chrono::milliseconds(sh.faults->delayMs()));
  if (!sh.faults->fire(FaultKind::Drop, "ucx send")) return Status::ok();
  fail(Status(WEFT_ERR_REMOTE, strFormat("ucx connection from rank %d to %s dropped by fault "
                                         "injection (WEFT_TEST_FAULTS)",
                                         sh.rank, describe().c_str())));
  // Closed at once, as a connection that breaks: the peer's endpoint fails.
  closeEndpoints(false, nullptr);
  return state_.failed();
}

Status UcxPeer::postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  if (lost_.isError()) {
    fail(lost_);
    return state_.failed();
  }
  bool corrupt = false;
  if (sh_->faults) {
    WEFT_RETURN_IF_ERROR(injectAtSend());
    corrupt = sh_->faults->fire(FaultKind::Corrupt, "ucx send");
  }
  if (len <= kImmediate) {
    // A small message UCP can send at once (its eager short path, copied
    // into the wire or socket before the call returns) needs no pooled op:
    // header and payload go from the stack, and the send is done. If UCP
    // cannot take it now (its queue to the peer is busy), it says so
    // without sending, and the message goes the pooled way below.
    alignas(8) char msg[sizeof(MsgHeader) + kImmediate];
    MsgHeader h{kHdrMagic, static_cast<uint32_t>(sendSeq_), tag, len, c->stamp};
    if (corrupt) corruptHeader(&h, sh_->faults->draw());
    memcpy(msg, &h, sizeof h);
    if (len) memcpy(msg + sizeof h, buf, len);
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    ucs_status_ptr_t r =
        ucp_tag_send_nbx(ep_, msg, sizeof h + len, ucpTag(sh_->rank, Kind::Header, sendSeq_), &prm);
    if (r == nullptr) {
      ++sendSeq_;
      c->finish();
      return Status::ok();
    }
    if (UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE) {
      Status st = sendFailed(UCS_PTR_STATUS(r));
      fail(st);
      return st;
    }
  }
  MsgOp* op = sh_->takeOp();
  op->peer = this;
  op->c = c;
  op->recv = false;
  op->seq = sendSeq_++;
  op->postedRound = sh_->rounds;
  op->tag = tag;
  op->len = len;
  op->buf = static_cast<char*>(const_cast<void*>(buf));
  op->live = live_.size();
  live_.push_back(op);
  ++sh_->pending;
  MsgHeader h{kHdrMagic, static_cast<uint32_t>(op->seq), tag, len, c->stamp};
  if (corrupt) corruptHeader(&h, sh_->faults->draw());
  memcpy(op->slot, &h, sizeof h);
  // Hold a part of our own so that parts finishing inline cannot release
  // the op before both are posted.
  ++op->parts;
  Status st;
  if (len <= kInline) {
    if (len) memcpy(op->slot + sizeof h, buf, len);
    st = sendPart(op, 0, op->slot, sizeof h + len, Kind::Header);
  } else {
    st = sendPart(op, 0, op->slot, sizeof h, Kind::Header);
    if (st.isOk()) st = sendPart(op, 1, buf, len, Kind::Data);
  }
  if (st.isError()) fail(st);
  const bool doneNow = op->parts == 1 && !op->finished;
  partDone(op, -1, UCS_OK, 0);
  if (st.isError()) return st;
  return doneNow ? Status::ok() : Status::inProgress();
}

Status UcxPeer::postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  MsgOp* op = sh_->takeOp();
  op->peer = this;
  op->c = c;
  op->recv = true;
  op->seq = recvSeq_++;
  op->postedRound = sh_->rounds;
  op->tag = tag;
  op->len = len;
  op->buf = static_cast<char*>(buf);
  op->live = live_.size();
  live_.push_back(op);
  ++sh_->pending;
  ++op->parts;
  // The header slot takes any header message whole, so a sender that
  // disagrees about the length is read and reported, never truncated.
  Status st = recvPart(op, 0, op->slot, sizeof op->slot, Kind::Header);
  if (st.isOk() && len > kInline) st = recvPart(op, 1, buf, len, Kind::Data);
  if (st.isError()) fail(st);
  const bool doneNow = op->parts == 1 && !op->finished;
  partDone(op, -1, UCS_OK, 0);
  if (st.isError()) return st;
  return doneNow ? Status::ok() : Status::inProgress();
}

void UcxPeer::onSend(void* request, ucs_status_t status, void* user) {
  Part* p = static_cast<Part*>(user);
  ucp_request_free(request);
  p->op->req[p->index] = nullptr;
  p->op->peer->partDone(p->op, p->index, status, 0);
}

void UcxPeer::onRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                     void* user) {
  Part* p = static_cast<Part*>(user);
  ucp_request_free(request);
  p->op->req[p->index] = nullptr;
  p->op->peer->partDone(p->op, p->index, status, info ? info->length : 0);
}

// A peer that finished and closed its endpoint looks, from here, like a lost
// one; yet what it sent before leaving sits in this worker, and receives
// posted for it still complete. So a lost endpoint fails sends at once, and
// receives only when they are still pending a full progress round after
// both the loss and their posting.
void UcxPeer::onError(void* arg, ucp_ep_h, ucs_status_t status) {
  UcxPeer* self = static_cast<UcxPeer*>(arg);
  if (self->state_.aborted() || self->lost_.isError()) return;
  self->lost_ =
      Status(WEFT_ERR_REMOTE, strFormat("ucx transport: connection to %s lost: %s",
                                        self->describe().c_str(), ucs_status_string(status)));
  self->lostRound_ = self->sh_->rounds;
  self->sh_->lost.push_back(self);
  WEFT_TRACE(kTransport, "ucx transport: rank %d: %s", self->sh_->rank,
             self->lost_.message().c_str());
}

void UcxPeer::sweepLost() {
  if (lost_.isOk() || state_.failed().isError() || state_.aborted()) return;
  if (sh_->rounds < lostRound_ + 2) return;
  for (MsgOp* op : live_)
    if (!op->finished && (!op->recv || sh_->rounds >= op->postedRound + 2)) {
      fail(lost_);
      return;
    }
}

void UcxPeer::checkHeader(MsgOp* op, size_t got) {
  MsgHeader h;
  memcpy(&h, op->slot, sizeof h);  // the slot is larger: garbage at worst, checked below
  switch (ucx::checkHeader(h, got, op->seq, op->tag, op->len)) {
    case HeaderFault::kNone:
      break;
    case HeaderFault::kShort:
      op->headerSt =
          Status(WEFT_ERR_REMOTE, strFormat("garbage from %s on ucx to rank %d: a %zu-byte header",
                                            describe().c_str(), sh_->rank, got));
      return;
    case HeaderFault::kGarbage:
      op->headerSt =
          Status(WEFT_ERR_REMOTE, strFormat("garbage from %s on ucx to rank %d: bad header "
                                            "(magic 0x%08x, message %u, expected %u)",
                                            describe().c_str(), sh_->rank, h.magic, h.seq,
                                            static_cast<uint32_t>(op->seq)));
      return;
    case HeaderFault::kMismatch:
      op->headerSt = mismatchError("ucx", sh_->rank, peer_, describe(), op->seq,
                                   {op->tag, op->len}, {h.tag, h.len});
      return;
    case HeaderFault::kInlineLength:
      op->headerSt =
          Status(WEFT_ERR_REMOTE, strFormat("garbage from %s on ucx to rank %d: %zu bytes inline, "
                                            "header says %llu",
                                            describe().c_str(), sh_->rank, got - sizeof h,
                                            static_cast<unsigned long long>(h.len)));
      return;
  }
  op->c->stamp = h.stamp;
  if (op->len <= kInline && op->len) memcpy(op->buf, op->slot + sizeof h, op->len);
}

void UcxPeer::partDone(MsgOp* op, int i, ucs_status_t st, size_t got) {
  if (i >= 0 && !op->finished) {
    if (st == UCS_OK && op->recv && i == 0) {
      checkHeader(op, got);
      // A bad header breaks the order of this pair for good.
      if (op->headerSt.isError()) fail(op->headerSt);
    } else if (st == UCS_OK && op->recv && i == 1 && got != kUnknownLength && got != op->len) {
      op->dataSt =
          Status(WEFT_ERR_REMOTE, strFormat("ucx transport: %zu bytes from %s, expected %zu", got,
                                            describe().c_str(), op->len));
    } else if (st != UCS_OK && op->dataSt.isOk()) {
      op->dataSt = Status(WEFT_ERR_REMOTE, strFormat("ucx transport: %s %s failed: %s",
                                                     op->recv ? "receive from" : "send to",
                                                     describe().c_str(), ucs_status_string(st)));
    }
  }
  if (--op->parts > 0) return;
  if (!op->finished) {
    if (op->headerSt.isError()) {
      finishOp(op, op->headerSt);
    } else if (op->dataSt.isError()) {
      finishOp(op, op->dataSt);
      fail(op->dataSt);
    } else {
      finishOp(op, Status());
    }
  }
  release(op);
}

void UcxPeer::finishOp(MsgOp* op, const Status& st) {
  op->finished = true;
  --sh_->pending;
  if (op->c) op->c->finish(st);
}

void UcxPeer::release(MsgOp* op) {
  MsgOp* last = live_.back();
  live_[op->live] = last;
  last->live = op->live;
  live_.pop_back();
  sh_->giveOp(op);
}

void UcxPeer::cancelRecvs() {
  // Cancelling may complete requests (and release ops) inline: walk a copy.
  std::vector<MsgOp*> ops(live_);
  for (MsgOp* op : ops)
    if (op->recv)
      for (void* r : op->req)
        if (r) ucp_request_cancel(sh_->worker, r);
}

void UcxPeer::fail(const Status& st) {
  if (state_.fail(st) && sh_->sticky.isOk()) sh_->sticky = st;
  for (MsgOp* op : live_)
    if (!op->finished) finishOp(op, state_.failed());
  cancelRecvs();
}

void UcxPeer::drop(bool flush, std::vector<void*>* closing) {
  state_.abort();
  for (MsgOp* op : live_)
    if (!op->finished) {
      op->finished = true;  // dropped: the completion never fires
      --sh_->pending;
    }
  cancelRecvs();
  closeEndpoints(flush, closing);
}

void UcxPeer::closeEndpoints(bool flush, std::vector<void*>* closing) {
  ucp_request_param_t prm{};
  if (!flush) {
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  if (bulkEp_ == ep_) bulkEp_ = nullptr;
  for (ucp_ep_h* e : {&bulkEp_, &ep_}) {
    if (!*e) continue;
    void* r = ucp_ep_close_nbx(*e, &prm);
    *e = nullptr;
    if (!UCS_PTR_IS_PTR(r)) continue;
    if (closing)
      closing->push_back(r);
    else
      ucp_request_free(r);  // released when UCX is done with it
  }
}

bool UcxPeer::receiving() const {
  for (const MsgOp* op : live_)
    if (op->recv && (op->req[0] || op->req[1])) return true;
  return false;
}

bool UcxPeer::quiet() const {
  if (lost_.isError() || state_.aborted() || !ep_) return false;
  if (state_.failed().isError() && state_.failed().code() != WEFT_ERR_INVALID_USAGE) return false;
  for (const MsgOp* op : live_)
    if (!op->finished || op->req[0] || op->req[1]) return false;
  if (sameHost_ && watch_.exited()) return false;
  return true;
}

Status UcxPeer::check() {
  if (!state_.failed().isOk()) return state_.failed();
  sweepLost();
  if (!state_.failed().isOk()) return state_.failed();
  if (sameHost_ && watch_.exited()) fail(Status(WEFT_ERR_REMOTE, describe() + " exited"));
  return state_.failed();
}

}  // namespace ucx
}  // namespace weft
