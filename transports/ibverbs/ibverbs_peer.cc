#include "transports/ibverbs/ibverbs_peer.h"

#include <arpa/inet.h>

#include <cstring>

#include "core/log.h"

namespace weft {
namespace ib {
namespace {

// weft's attribute bits (qp_fsm.h) as verbs masks.
int verbsMask(uint32_t a) {
  int m = 0;
  if (a & kAttrState) m |= IBV_QP_STATE;
  if (a & kAttrPkeyIndex) m |= IBV_QP_PKEY_INDEX;
  if (a & kAttrPort) m |= IBV_QP_PORT;
  if (a & kAttrAccess) m |= IBV_QP_ACCESS_FLAGS;
  if (a & kAttrPath) m |= IBV_QP_AV;
  if (a & kAttrPathMtu) m |= IBV_QP_PATH_MTU;
  if (a & kAttrDestQpn) m |= IBV_QP_DEST_QPN;
  if (a & kAttrRqPsn) m |= IBV_QP_RQ_PSN;
  if (a & kAttrMaxDestRdAtomic) m |= IBV_QP_MAX_DEST_RD_ATOMIC;
  if (a & kAttrMinRnrTimer) m |= IBV_QP_MIN_RNR_TIMER;
  if (a & kAttrSqPsn) m |= IBV_QP_SQ_PSN;
  if (a & kAttrTimeout) m |= IBV_QP_TIMEOUT;
  if (a & kAttrRetryCnt) m |= IBV_QP_RETRY_CNT;
  if (a & kAttrRnrRetry) m |= IBV_QP_RNR_RETRY;
  if (a & kAttrMaxQpRdAtomic) m |= IBV_QP_MAX_QP_RD_ATOMIC;
  return m;
}

ibv_mtu mtuEnum(int bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    default:
      return IBV_MTU_4096;
  }
}

ibv_qp_state verbsState(QpState s) {
  switch (s) {
    case QpState::Reset:
      return IBV_QPS_RESET;
    case QpState::Init:
      return IBV_QPS_INIT;
    case QpState::Rtr:
      return IBV_QPS_RTR;
    case QpState::Rts:
      return IBV_QPS_RTS;
    case QpState::Error:
      return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

}  // namespace

IbPeer::IbPeer(Shared* sh, int peer, int nqps, const std::string& host, int pid, bool sameHost)
    : sh_(sh),
      peer_(peer),
      nqps_(nqps),
      host_(host),
      pid_(pid),
      sameHost_(sameHost),
      state_("ibverbs", sh->rank, LogLevel::Info) {
  if (sameHost_ && pid_ > 0) watch_.watch(pid_);
  // The transport set up GPUDirect RDMA before making its peers.
  state_.setMemory(true, sh_->gdr != GdrMode::Off,
                   "ibverbs transport: device memory needs GPUDirect RDMA (WEFT_NET_GDR), which "
                   "is off here: " +
                       sh_->gdrWhy);
}

IbPeer::~IbPeer() {
  for (Qp& q : qps_)
    if (q.qp) ibv_destroy_qp(q.qp);
  if (slabMr_) ibv_dereg_mr(slabMr_);
}

std::string IbPeer::describe() const {
  return strFormat("rank %d (%s, pid %d)", peer_, host_.c_str(), pid_);
}

char* IbPeer::recvSlot(int q, uint32_t i) {
  return slab_.data() + (static_cast<size_t>(q) * 2 * kSlots + i) * kSlotBytes;
}
char* IbPeer::sendSlot(int q, uint32_t i) { return recvSlot(q, kSlots + i); }

Status IbPeer::modify(Qp& q, QpState to, const RemoteQp* remote) {
  uint32_t attrs = 0;
  WEFT_RETURN_IF_ERROR(q.fsm.plan(to, remote, &attrs));
  ibv_qp_attr a{};
  a.qp_state = verbsState(to);
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(sh_->port.port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (remote) {
    a.path_mtu = mtuEnum(commonMtu(sh_->port.mtu, remote->mtu));
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = remote->lid;
    a.ah_attr.port_num = static_cast<uint8_t>(sh_->port.port);
    if (remote->useGid) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(sh_->port.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
    }
  }
  a.sq_psn = q.psn;
  // 4.096 us * 2^18: ~1.07 s per try, 7 retries: a peer may reach RTR up to
  // ~8 s after this side sends its Hello (ranks connect without a barrier
  // in between); a dead remote peer is reported after as long.
  a.timeout = 18;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  int rc = ibv_modify_qp(q.qp, &a, verbsMask(attrs));
  if (rc != 0)
    return systemError(strFormat("ibverbs: QP to %s: %s -> %s", describe().c_str(),
                                 qpStateName(q.fsm.state()), qpStateName(to)),
                       rc);
  q.fsm.commit(to);
  return Status::ok();
}

Status IbPeer::postRecvSlot(int q, uint32_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(recvSlot(q, i)), static_cast<uint32_t>(kSlotBytes),
              slabMr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wrId(WrKind::Recv, peer_, q, i);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qps_[q].qp, &wr, &bad);
  if (rc != 0) return systemError("ibverbs: ibv_post_recv to " + describe(), rc);
  return Status::ok();
}

Status IbPeer::create() {
  slab_.resize(static_cast<size_t>(nqps_) * 2 * kSlots * kSlotBytes);
  slabMr_ = ibv_reg_mr(sh_->pd, slab_.data(), slab_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!slabMr_) return systemError("ibverbs: ibv_reg_mr of the slots for " + describe(), errno);
  qps_.resize(nqps_);
  for (int k = 0; k < nqps_; ++k) {
    Qp& q = qps_[k];
    ibv_qp_init_attr ia{};
    ia.send_cq = sh_->cq;
    ia.recv_cq = sh_->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 2 * kSlots;
    ia.cap.max_recv_wr = kSlots;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    q.qp = ibv_create_qp(sh_->pd, &ia);
    if (!q.qp) return systemError("ibverbs: ibv_create_qp for " + describe(), errno);
    q.psn = (static_cast<uint32_t>(sh_->rank) * 7919u + static_cast<uint32_t>(peer_) * 104729u +
             static_cast<uint32_t>(k)) & 0xffffff;
    WEFT_RETURN_IF_ERROR(modify(q, QpState::Init, nullptr));
    for (uint32_t i = 0; i < kSlots; ++i) {
      WEFT_RETURN_IF_ERROR(postRecvSlot(k, i));
      q.freeSend.push_back(i);
    }
  }
  return Status::ok();
}

std::vector<QpAddr> IbPeer::addrs() const {
  std::vector<QpAddr> out;
  for (const Qp& q : qps_) out.push_back({q.qp ? q.qp->qp_num : 0, q.psn});
  return out;
}

Status IbPeer::connect(const BlobHeader& remote, const QpAddr* remoteQps, const Key& key,
                       uint64_t commId) {
  key_ = key;
  commId_ = commId;
  if (remote.nqps != nqps_)
    return invalidUsage(strFormat("ibverbs: %s uses %d queue pairs per peer, this rank %d "
                                  "(WEFT_IB_QPS_PER_PEER must agree)",
                                  describe().c_str(), remote.nqps, nqps_));
  for (int k = 0; k < nqps_; ++k) {
    RemoteQp r;
    r.qpn = remoteQps[k].qpn;
    r.psn = remoteQps[k].psn;
    r.lid = remote.lid;
    r.useGid = remote.useGid != 0;
    memcpy(r.gid, remote.gid, 16);
    r.mtu = remote.mtu;
    WEFT_RETURN_IF_ERROR(modify(qps_[k], QpState::Rtr, &r));
    WEFT_RETURN_IF_ERROR(modify(qps_[k], QpState::Rts, nullptr));
  }
  const Header h = helloHeader(commId, sh_->rank);
  const Mac m = helloMac(key, commId, sh_->rank, peer_);
  sendMsg(0, h, m.data(), m.size());
  return state_.failed();
}

void IbPeer::sendMsg(int q, Header h, const void* payload, size_t len) {
  std::string m(reinterpret_cast<const char*>(&h), sizeof h);
  if (len) m.append(static_cast<const char*>(payload), len);
  qps_[q].backlog.push_back(std::move(m));
  drain(q);
}

// Sends what the backlog holds while credits and send slots allow; the
// credits this side owes ride in each header as it leaves.
void IbPeer::drain(int qi) {
  Qp& q = qps_[qi];
  while (!q.backlog.empty() && state_.live()) {
    std::string& m = q.backlog.front();
    Header h;
    memcpy(&h, m.data(), sizeof h);
    const bool creditOnly = h.type == static_cast<uint8_t>(MsgType::Credit);
    if (q.freeSend.empty()) return;
    if (!(creditOnly ? q.credits.takeForCreditReturn() : q.credits.takeForData())) return;
    uint32_t slot = q.freeSend.back();
    q.freeSend.pop_back();
    h.credits = q.credits.takeOwed();
    memcpy(&m[0], &h, sizeof h);
    memcpy(sendSlot(qi, slot), m.data(), m.size());
    ibv_sge sge{reinterpret_cast<uintptr_t>(sendSlot(qi, slot)), static_cast<uint32_t>(m.size()),
                slabMr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wrId(WrKind::SendSlot, peer_, qi, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(q.qp, &wr, &bad);
    if (rc != 0) {
      fail(systemError("ibverbs: ibv_post_send to " + describe(), rc));
      return;
    }
    q.backlog.pop_front();
  }
  if (q.backlog.empty() && q.credits.creditReturnDue()) {
    Header h{};
    h.magic = kHdrMagic;
    h.type = static_cast<uint8_t>(MsgType::Credit);
    q.backlog.push_back(std::string(reinterpret_cast<const char*>(&h), sizeof h));
    drain(qi);
  }
}

Status IbPeer::postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  const uint64_t seq = sendSeq_++;
  const int q = static_cast<int>(seq % static_cast<uint64_t>(nqps_));
  Header h{};
  h.magic = kHdrMagic;
  h.seq = static_cast<uint32_t>(seq);
  h.tag = tag;
  h.len = len;
  h.addr = c->stamp;  // telemetry's arrival stamp rides in the unused field
  const bool device = mem != MemType::Host;
  if (len <= kEager && !device) {
    // Copied now (into a slot, or the backlog): the caller's buffer is free.
    // Device memory never goes eager: the host cannot read it; the NIC
    // writes it from the registration instead.
    h.type = static_cast<uint8_t>(MsgType::Eager);
    sendMsg(q, h, buf, len);
    if (state_.failed().isError()) return state_.failed();
    c->finish();
    return Status::ok();
  }
  const Registration* reg = nullptr;
  RegCache* cache = device ? sh_->devCache : sh_->cache;
  WEFT_RETURN_IF_ERROR(cache->acquire(buf, len, &reg));
  sends_.push_back({seq, static_cast<const char*>(buf), len, tag, c, reg, false, cache});
  ++sh_->pending;
  h.type = static_cast<uint8_t>(MsgType::Rts);
  sendMsg(q, h, nullptr, 0);
  return state_.failed().isError() ? state_.failed() : Status::inProgress();
}

Status IbPeer::postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  const uint64_t seq = recvSeq_++;
  if (recvs_.empty()) recvBase_ = seq;
  const bool device = mem != MemType::Host;
  recvs_.push_back({seq, static_cast<char*>(buf), len, tag, c, nullptr, false, device,
                    device ? sh_->devCache : sh_->cache});
  ++sh_->pending;
  auto it = early_.find(static_cast<uint32_t>(seq));
  if (it != early_.end()) {
    Arrival a = std::move(it->second);
    early_.erase(it);
    match(recvs_.back(), a.h, a.data.data());
  }
  if (state_.failed().isError()) return state_.failed();
  return Status::inProgress();
}

IbPeer::RecvOp* IbPeer::recvOp(uint32_t seq) {
  uint32_t idx = seq - static_cast<uint32_t>(recvBase_);
  return idx < recvs_.size() ? &recvs_[idx] : nullptr;
}

IbPeer::SendOp* IbPeer::sendOp(uint32_t seq) {
  for (SendOp& s : sends_)
    if (static_cast<uint32_t>(s.seq) == seq && !s.done) return &s;
  return nullptr;
}

void IbPeer::match(RecvOp& r, const Header& h, const char* data) {
  if (h.tag != r.tag || h.len != r.len) {
    fail(mismatchError("ibverbs", sh_->rank, peer_, describe(), r.seq, {r.tag, r.len},
                       {h.tag, h.len}));
    return;
  }
  r.c->stamp = h.addr;
  if (h.type == static_cast<uint8_t>(MsgType::Eager)) {
    Status st;
    if (r.len && r.device) st = copyToDevice(r.buf, data, r.len);
    else if (r.len) memcpy(r.buf, data, r.len);
    finishOp(r, st);
    return;
  }
  // RTS: let the sender write straight into the receive buffer.
  Status st = r.cache->acquire(r.buf, r.len, &r.reg);
  if (st.isError()) {
    fail(st);
    return;
  }
  Header cts{};
  cts.magic = kHdrMagic;
  cts.type = static_cast<uint8_t>(MsgType::Cts);
  cts.seq = h.seq;
  cts.len = r.len;
  cts.addr = reinterpret_cast<uintptr_t>(r.buf);
  cts.rkey = r.reg->rkey;
  sendMsg(static_cast<int>(r.seq % static_cast<uint64_t>(nqps_)), cts, nullptr, 0);
}

void IbPeer::onArrival(const Header& h, const char* data) {
  RecvOp* r = recvOp(h.seq);
  if (r && !r->done) {
    match(*r, h, data);
    return;
  }
  Arrival a;
  a.h = h;
  if (h.type == static_cast<uint8_t>(MsgType::Eager) && h.len <= kEager) a.data.assign(data, h.len);
  early_[h.seq] = std::move(a);
}

void IbPeer::onCts(const Header& h) {
  SendOp* s = sendOp(h.seq);
  if (!s || h.len != s->len) {
    fail(Status(WEFT_ERR_REMOTE, strFormat("ibverbs: %s sent a CTS for message %u that this rank "
                                           "is not sending",
                                           describe().c_str(), h.seq)));
    return;
  }
  const int qi = static_cast<int>(s->seq % static_cast<uint64_t>(nqps_));
  qps_[qi].writes.push_back(h);
  issueWrites(qi);
}

// A write with immediate consumes a receive slot at the peer, so it needs a
// credit like a SEND; CTSs wait in order until one is free.
void IbPeer::issueWrites(int qi) {
  Qp& q = qps_[qi];
  while (!q.writes.empty() && state_.live() && q.credits.takeForData()) {
    const Header h = q.writes.front();
    q.writes.pop_front();
    SendOp* s = sendOp(h.seq);
    if (!s) continue;
    ibv_sge sge{reinterpret_cast<uintptr_t>(s->buf), static_cast<uint32_t>(s->len), s->reg->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wrId(WrKind::Write, peer_, qi, h.seq);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(h.seq);
    wr.wr.rdma.remote_addr = h.addr;
    wr.wr.rdma.rkey = h.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(q.qp, &wr, &bad);
    if (rc != 0) fail(systemError("ibverbs: RDMA write to " + describe(), rc));
  }
}

template <typename OpT>
void IbPeer::finishOp(OpT& op, const Status& st) {
  if (op.done) return;
  op.done = true;
  --sh_->pending;
  if (op.reg) op.cache->release(op.reg);
  op.reg = nullptr;
  op.c->finish(st);
}

void IbPeer::popDone() {
  while (!sends_.empty() && sends_.front().done) sends_.pop_front();
  while (!recvs_.empty() && recvs_.front().done) {
    recvs_.pop_front();
    ++recvBase_;
  }
}

void IbPeer::onCompletion(const ibv_wc& wc) {
  const int qi = wrQp(wc.wr_id);
  if (qi >= nqps_) return;
  if (wc.status != IBV_WC_SUCCESS) {
    if (!state_.aborted())
      fail(Status(WEFT_ERR_REMOTE, strFormat("ibverbs: connection to %s lost: %s (QP %d)",
                                             describe().c_str(), ibv_wc_status_str(wc.status), qi)));
    return;
  }
  Qp& q = qps_[qi];
  switch (wrKind(wc.wr_id)) {
    case WrKind::SendSlot:
      q.freeSend.push_back(wrValue(wc.wr_id));
      break;
    case WrKind::Write:
      if (SendOp* s = sendOp(wrValue(wc.wr_id))) finishOp(*s, Status());
      break;
    case WrKind::Recv: {
      const uint32_t slot = wrValue(wc.wr_id);
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if (RecvOp* r = recvOp(ntohl(wc.imm_data))) finishOp(*r, Status());
      } else {
        Header h;
        memcpy(&h, recvSlot(qi, slot), sizeof h);
        const HeaderFault fault = checkHeader(h, wc.byte_len);
        if (fault != HeaderFault::kNone) {
          const char* why = fault == HeaderFault::kGarbage ? ""
                            : fault == HeaderFault::kType  ? " (unknown message type)"
                                                           : " (length disagrees with its header)";
          fail(Status(WEFT_ERR_REMOTE, strFormat("garbage from %s on ibverbs QP %d to rank %d%s",
                                                 describe().c_str(), qi, sh_->rank, why)));
          return;
        }
        q.credits.grant(h.credits);
        switch (static_cast<MsgType>(h.type)) {
          case MsgType::Eager:
          case MsgType::Rts:
            onArrival(h, recvSlot(qi, slot) + sizeof h);
            break;
          case MsgType::Cts:
            onCts(h);
            break;
          case MsgType::Hello:
            helloOk_ = helloOk(h, reinterpret_cast<const uint8_t*>(recvSlot(qi, slot) + sizeof h),
                               key_, commId_, peer_, sh_->rank);
            if (!helloOk_)
              fail(Status(WEFT_ERR_REMOTE, strFormat("ibverbs: the hello from %s is not from this "
                                                     "job and communicator",
                                                     describe().c_str())));
            break;
          case MsgType::Credit:
            break;
        }
      }
      Status st = postRecvSlot(qi, slot);
      if (st.isError()) {
        fail(st);
        return;
      }
      q.credits.slotReposted();
      break;
    }
  }
  for (int k = 0; k < nqps_; ++k) issueWrites(k);
  for (int k = 0; k < nqps_; ++k) drain(k);
  popDone();
}

void IbPeer::fail(const Status& st) {
  if (state_.fail(st) && sh_->sticky.isOk()) sh_->sticky = st;
  for (SendOp& s : sends_) finishOp(s, state_.failed());
  for (RecvOp& r : recvs_) finishOp(r, state_.failed());
  popDone();
}

void IbPeer::drop() {
  state_.abort();
  for (SendOp& s : sends_)
    if (!s.done) {
      s.done = true;
      --sh_->pending;
    }
  for (RecvOp& r : recvs_)
    if (!r.done) {
      r.done = true;
      --sh_->pending;
    }
  for (Qp& q : qps_)
    if (q.qp && q.fsm.state() != QpState::Error) modify(q, QpState::Error, nullptr);
}

Status IbPeer::check() {
  if (!state_.failed().isOk()) return state_.failed();
  if (sameHost_ && watch_.exited()) fail(Status(WEFT_ERR_REMOTE, describe() + " exited"));
  return state_.failed();
}

}  // namespace ib
}  // namespace weft
