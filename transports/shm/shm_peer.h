// ShmPeer: the data path between this rank and one peer on the same host,
// over two FIFOs (shm_segment.h): `out` to the peer, `in` from it. Posted
// operations wait in FIFOs and are matched in order; a send copies into free
// slots at once, a recv copies out of filled slots; whatever does not fit is
// continued by progress(). No system call on this path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/base/posted_ops.h"
#include "transports/base/ring_queue.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace weft {
namespace shm {

class Arena;

class ShmPeer {
 public:
  // `peerDesc` names the peer in errors: "rank 3 (pid 1234 on host x)".
  ShmPeer(int rank, int peer, std::string peerDesc, std::unique_ptr<Segment> out,
          std::unique_ptr<Segment> in);

  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  // Advances both directions; returns the channel's error once it failed.
  Status progress();
  // Slots this rank has published and consumed so far (never decreases).
  uint64_t slotsMoved() const { return head_ + tail_; }
  // Puts the channel in the failed state: every pending operation completes
  // with `st`, later posts return it. Returns `st`.
  Status fail(const Status& st);
  const Status& failed() const { return state_.failed(); }
  // Whether the peer ended its communicator (abort, destroy): its abort()
  // marks both FIFOs closed.
  bool peerLeft() const;
  // Drops pending operations, marks both FIFOs closed for the peer, unlinks
  // them; later posts fail.
  void abort();
  // Rings the peer's doorbell (if it sleeps) after each publish.
  void setWaker(Arena* a) { waker_ = a; }
  // Test builds: the faults to inject (transports/base/fault_plan.h).
  void setFaults(std::shared_ptr<FaultPlan> f) { faults_ = std::move(f); }
  // Something arrived or room was freed for a pending operation since the
  // last progress(): the engine must not sleep.
  bool hasNews() const;

 private:
  using Op = PostedMsg;

  bool pushSend(Op& op);                // true once the whole message is in slots
  Status pullRecv(Op& op, bool* done);  // copies out what has arrived
  Status injectAtSend();                // fault injection: delay, drop

  int rank_;
  int peer_;
  std::string peerDesc_;
  std::unique_ptr<Segment> out_;
  std::unique_ptr<Segment> in_;

  // Sender side (out_).
  FifoHeader* outHdr_;
  uint32_t outSlots_;
  size_t outSlotBytes_;
  uint64_t head_ = 0;       // slots published
  uint32_t headIdx_ = 0;    // head_ % outSlots_
  uint64_t tailCache_ = 0;  // last tail seen
  uint64_t sendSeq_ = 0;

  // Receiver side (in_).
  FifoHeader* inHdr_;
  uint32_t inSlots_;
  size_t inSlotBytes_;
  uint64_t tail_ = 0;       // slots consumed
  uint32_t tailIdx_ = 0;    // tail_ % inSlots_
  uint64_t headCache_ = 0;  // last head seen
  uint64_t recvSeq_ = 0;

  RingQueue<Op> sends_;
  RingQueue<Op> recvs_;
  PeerState state_;
  std::shared_ptr<FaultPlan> faults_;
  Arena* waker_ = nullptr;
  void wakePeer();
};

}  // namespace shm
}  // namespace weft
