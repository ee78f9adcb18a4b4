// IbPeer: the data path to one peer over nqps RC queue pairs (ibverbs_wire.h
// says what travels). It owns the QPs and their slot buffers; the transport
// owns the protection domain, the completion queue (shared by all peers)
// and the registration cache, and hands each work completion to the peer
// its wr_id names.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "transports/base/posted_ops.h"
#include "transports/ibverbs/credits.h"
#include "transports/ibverbs/gdr.h"
#include "transports/ibverbs/ibverbs_device.h"
#include "transports/ibverbs/ibverbs_wire.h"
#include "transports/ibverbs/qp_fsm.h"
#include "transports/ibverbs/reg_cache.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace weft {
namespace ib {

// wr_id: kind (4 bits) | peer (24) | qp (4) | value (32: slot or message).
enum class WrKind : uint64_t { Recv = 1, SendSlot = 2, Write = 3 };
inline uint64_t wrId(WrKind k, int peer, int qp, uint32_t v) {
  return (static_cast<uint64_t>(k) << 60) | (static_cast<uint64_t>(peer) << 36) |
         (static_cast<uint64_t>(qp) << 32) | v;
}
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 60); }
inline int wrPeer(uint64_t id) { return static_cast<int>((id >> 36) & 0xffffff); }
inline int wrQp(uint64_t id) { return static_cast<int>((id >> 32) & 0xf); }
inline uint32_t wrValue(uint64_t id) { return static_cast<uint32_t>(id); }

struct Shared {
  int rank = 0;
  IbPort port;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  RegCache* cache = nullptr;     // host memory
  RegCache* devCache = nullptr;  // device memory, when GPUDirect RDMA is on
  GdrMode gdr = GdrMode::Off;
  std::string gdrWhy;  // why it is off
  int64_t pending = 0;
  Status sticky;
};

class IbPeer {
 public:
  IbPeer(Shared* sh, int peer, int nqps, const std::string& host, int pid, bool sameHost);
  ~IbPeer();
  IbPeer(const IbPeer&) = delete;
  IbPeer& operator=(const IbPeer&) = delete;

  // Creates the QPs (to INIT) and posts their receive slots.
  Status create();
  // This side's QP numbers and PSNs, published for the peer.
  std::vector<QpAddr> addrs() const;
  // RTR and RTS against the peer's QPs, then a Hello on QP 0.
  Status connect(const BlobHeader& remote, const QpAddr* remoteQps, const Key& key,
                 uint64_t commId);
  bool helloReceived() const { return helloOk_; }

  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  // A work completion of this peer's QPs.
  void onCompletion(const ibv_wc& wc);
  Status check();
  void fail(const Status& st);
  // Shutdown: QPs to ERROR, pending operations dropped.
  void drop();
  const Status& failed() const { return state_.failed(); }
  std::string describe() const;

 private:
  struct Qp {
    ibv_qp* qp = nullptr;
    QpFsm fsm;
    CreditWindow credits{kSlots};
    uint32_t psn = 0;
    std::vector<uint32_t> freeSend;  // send slot indexes
    std::deque<std::string> backlog;  // headers (+ payload) waiting for credits or slots
    std::deque<Header> writes;        // CTSs whose RDMA write waits for a credit
  };
  struct SendOp {
    uint64_t seq;
    const char* buf;
    size_t len;
    uint64_t tag;
    Completion* c;
    const Registration* reg;
    bool done;
    RegCache* cache;  // the one `reg` came from
  };
  struct RecvOp {
    uint64_t seq;
    char* buf;
    size_t len;
    uint64_t tag;
    Completion* c;
    const Registration* reg;
    bool done;
    bool device;      // buf is device memory
    RegCache* cache;  // the one `reg` came from
  };
  struct Arrival {
    Header h;
    std::string data;
  };

  Status modify(Qp& q, QpState to, const RemoteQp* remote);
  char* recvSlot(int q, uint32_t i);
  char* sendSlot(int q, uint32_t i);
  Status postRecvSlot(int q, uint32_t i);
  // Queues a header (and payload) for SEND on QP q; goes now when credits
  // and a send slot allow, else from the backlog later.
  void sendMsg(int q, Header h, const void* payload, size_t len);
  void issueWrites(int q);
  void drain(int q);
  void onArrival(const Header& h, const char* data);
  void match(RecvOp& r, const Header& h, const char* data);
  void onCts(const Header& h);
  // A send or receive is over: its registration released, its completion
  // finished with `st` (once).
  template <typename OpT>
  void finishOp(OpT& op, const Status& st);
  void popDone();
  SendOp* sendOp(uint32_t seq);
  RecvOp* recvOp(uint32_t seq);

  Shared* sh_;
  int peer_;
  int nqps_;
  std::string host_;
  int pid_;
  bool sameHost_;
  shm::PidWatch watch_;
  std::vector<Qp> qps_;
  std::vector<char> slab_;  // per QP: kSlots receive slots, then kSlots send slots
  ibv_mr* slabMr_ = nullptr;
  uint64_t sendSeq_ = 0, recvSeq_ = 0;
  std::deque<SendOp> sends_;  // large sends waiting for CTS or the write
  std::deque<RecvOp> recvs_;
  uint64_t recvBase_ = 0;              // seq of recvs_.front()
  std::map<uint32_t, Arrival> early_;  // arrived before their receive was posted
  bool helloOk_ = false;
  Key key_{};
  uint64_t commId_ = 0;
  PeerState state_;
};

}  // namespace ib
}  // namespace weft
