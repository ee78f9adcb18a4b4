// CudaIpcPeer: the data path between this rank and one peer on the same
// host, for CUDA device memory. Two FIFOs as the shm transport's
// (transports/shm/shm_segment.h), except that the slots' payload lives in
// device memory owned by the receiver: the sender's copy engine writes the
// peer's slot (mapped through CUDA IPC), the receiver's copy engine reads
// its own slot into the user's buffer. Control (head, tail, slot headers)
// stays in host shared memory.
//
//   send: slot free? -> header, cudaMemcpyAsync(user -> peer's slot), event
//         -> event done: publish head (the peer may read the slot)
//   recv: slot published? -> check header, cudaMemcpyAsync(slot -> user), event
//         -> event done: publish tail (the sender may reuse the slot)
//
// Up to `slots` copies per direction are in flight, so a long message
// streams through the copy engines. Nothing blocks: progress() polls events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/base/posted_ops.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace weft {
namespace cuda_ipc {

class CudaIpcPeer {
 public:
  // out / in: the control FIFOs to and from the peer. outSlots: the peer's
  // device slots for us (mapped); inSlots: ours for the peer. slotBytes:
  // bytes of one device slot. `stream` carries this channel's copies.
  CudaIpcPeer(int rank, int peer, std::string peerDesc, std::unique_ptr<shm::Segment> out,
              std::unique_ptr<shm::Segment> in, char* outSlots, char* inSlots, size_t slotBytes,
              void* stream);
  ~CudaIpcPeer();
  // Creates the events (one per slot and direction); once, before use.
  Status init();

  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status progress();
  Status fail(const Status& st);
  const Status& failed() const { return state_.failed(); }
  void abort();

 private:
  using Op = PostedMsg;
  struct Flight {
    void* event;
    Completion* c;  // the op's completion on its last slot, else NULL
  };

  Status issueSends();
  Status issueRecvs();
  Status retire(std::deque<Flight>* flights, bool send);

  int rank_, peer_;
  std::string peerDesc_;
  std::unique_ptr<shm::Segment> out_, in_;
  char* outSlots_;
  char* inSlots_;
  size_t slotBytes_;
  void* stream_;
  uint32_t slots_;
  std::vector<void*> sendEvents_, recvEvents_;
  std::deque<Op> sends_, recvs_;
  std::deque<Flight> sendFlights_, recvFlights_;
  uint64_t headIssued_ = 0, head_ = 0, tailCache_ = 0, sendSeq_ = 0;
  uint64_t tailIssued_ = 0, tail_ = 0, headCache_ = 0, recvSeq_ = 0;
  PeerState state_;
};

}  // namespace cuda_ipc
}  // namespace weft
