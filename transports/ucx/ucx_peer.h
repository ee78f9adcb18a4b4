// UcxPeer: the data path between this rank and one peer over a UCP endpoint
// (ucx_wire.h says what travels). Each posted message is a MsgOp holding the
// UCP requests of its parts (header, maybe data) and, for small payloads, the
// bounce slot they ride in. MsgOps come from a pool owned by the transport,
// so the fast path does not allocate once the pool has grown to the number
// of messages in flight.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "transports/base/posted_ops.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"

namespace weft {
namespace ucx {

class UcxPeer;

struct MsgOp;
struct Part {
  MsgOp* op;
  int index;  // 0: header (with inline payload), 1: data
};

struct MsgOp {
  UcxPeer* peer = nullptr;
  Completion* c = nullptr;
  bool recv = false;
  bool finished = false;  // the completion was set (or dropped)
  int parts = 0;          // UCP requests still outstanding
  uint64_t seq = 0;
  uint64_t postedRound = 0;  // Shared::rounds when posted
  uint64_t tag = 0;          // expected (recv) or sent (send)
  size_t len = 0;            // expected (recv) or sent (send)
  char* buf = nullptr;
  void* req[2] = {nullptr, nullptr};
  Part part[2] = {{this, 0}, {this, 1}};
  Status headerSt;  // garbage or mismatch found in the header
  Status dataSt;    // the UCP status of a failed part
  size_t live = 0;  // index in the peer's live list
  alignas(8) char slot[sizeof(MsgHeader) + kInline];
};

// What every peer of one transport shares: the worker, the op pool, the
// count of pending operations and the first error seen.
struct Shared {
  int rank = 0;
  ucp_worker_h worker = nullptr;
  std::vector<std::unique_ptr<MsgOp>> pool;
  std::vector<MsgOp*> freeOps;
  int64_t pending = 0;
  uint64_t rounds = 0;         // progress() calls so far
  std::vector<UcxPeer*> lost;  // peers whose endpoint failed
  Status sticky;
  std::shared_ptr<FaultPlan> faults;  // test builds (transports/base/fault_plan.h)
  MsgOp* takeOp();
  void giveOp(MsgOp* op);
};

class UcxPeer {
 public:
  UcxPeer(Shared* sh, int peer, const std::string& host, int pid, bool sameHost);
  ~UcxPeer();
  UcxPeer(const UcxPeer&) = delete;
  UcxPeer& operator=(const UcxPeer&) = delete;

  // Creates the UCP endpoints to the peer's worker address: the control
  // endpoint (headers and inline payloads; peer failure mode, so that a lost
  // peer is reported) and, with `bulk`, a second one for large payloads (see
  // bulkEp_). Both sides create them in this order, so UCP pairs control
  // with control and bulk with bulk.
  Status open(const void* workerAddr, bool bulk);
  ucp_ep_h ep() const { return ep_; }
  ucp_ep_h bulkEp() const { return bulkEp_; }

  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  // Liveness (checkPeer): the first error, or the process gone (same host).
  Status check();
  // Fails every pending operation with `st`; later posts fail with it too.
  void fail(const Status& st);
  // After progress(): a lost endpoint fails the operations that could not
  // complete from what the peer sent before it went (see onError).
  void sweepLost();
  // Shutdown: pending operations are dropped (their completions never fire),
  // receives cancelled, the endpoints closed: after flushing what completed
  // sends left in UCX's buffers (`flush`), else at once. Appends the close
  // requests to wait for to `closing`.
  void drop(bool flush, std::vector<void*>* closing);
  const Status& failed() const { return state_.failed(); }
  // Nothing pending with this peer and its endpoint not lost: safe to flush.
  bool quiet() const;
  // A receive still owns a UCP request: data may land in its buffer.
  bool receiving() const;
  std::string describe() const;

  // UCP callbacks (user_data is a Part, or the peer for the error handler).
  static void onSend(void* request, ucs_status_t status, void* user);
  static void onRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                     void* user);
  static void onError(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  // Fault injection at a send: delay, drop (fault_plan.h).
  Status injectAtSend();
  // Closes both endpoints (`flush`: after what is queued; else at once); the
  // requests to wait for go to `closing`, or are let go when it is null.
  void closeEndpoints(bool flush, std::vector<void*>* closing);
  Status sendPart(MsgOp* op, int i, const void* data, size_t len, Kind k);
  // The error of a send UCP refused, naming the peer.
  Status sendFailed(ucs_status_t st) const;
  Status recvPart(MsgOp* op, int i, void* data, size_t len, Kind k);
  // Around each UCP post of part i (see ucx_peer.cc): count it, uncount it
  // when UCP refused it, and settle what the call returned.
  void beginPart(MsgOp* op, int i);
  void abandonPart(MsgOp* op, int i);
  void endPart(MsgOp* op, int i, ucs_status_ptr_t r, size_t immediateLen);
  void partDone(MsgOp* op, int i, ucs_status_t st, size_t got);
  void checkHeader(MsgOp* op, size_t got);
  void finishOp(MsgOp* op, const Status& st);
  void release(MsgOp* op);
  void cancelRecvs();

  Shared* sh_;
  int peer_;
  std::string host_;
  int pid_;
  bool sameHost_;
  ucp_ep_h ep_ = nullptr;
  // With WEFT_UCX_FAST_RNDV=1 (over tcp), large payloads travel on an
  // endpoint without UCP's peer failure mode: in that mode UCP 1.13 moves
  // rendezvous data over tcp as 64 KiB active messages (one send each)
  // instead of one zero-copy put (a 2 MiB allreduce took 1.3x as long).
  // Off by default: a peer lost in the middle of such a transfer can trip
  // an assertion in UCX 1.13's tcp transport that aborts this process
  // (seen in 2 of 30 runs of the conformance suite's SIGKILL case), where
  // weft must report the peer. Otherwise equal to ep_.
  ucp_ep_h bulkEp_ = nullptr;
  uint64_t sendSeq_ = 0, recvSeq_ = 0;
  std::vector<MsgOp*> live_;  // ops with outstanding UCP requests
  shm::PidWatch watch_;
  PeerState state_;
  Status lost_;  // the endpoint failed (onError); not yet a failure of ours
  uint64_t lostRound_ = 0;
};

}  // namespace ucx
}  // namespace weft
