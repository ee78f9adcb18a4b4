// What every transport does with the operations posted to one peer, written
// once. Each transport keeps its own queues of posted sends and receives
// (FIFOs of slots, socket streams, UCP requests, queue pairs); around them
// they all need the same three things:
//
//   PeerState      whether the peer still takes posts: the argument checks
//                  of a posted send or recv (checkPost), and the peer's first
//                  error, kept (later posts return it) and logged once;
//   finishAll      completes every pending operation of a queue with that
//                  error (a failed peer fails all its pending operations);
//   mismatchError  the error of a message whose tag or length differs from
//                  the receive it fills: mismatched collectives, both calls
//                  named (transport.h's contract).
#pragma once

#include <cstdint>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "transports/transport.h"

namespace weft {

class PeerState {
 public:
  // `transport` ("tcp") names the transport in errors and log lines, `rank`
  // this rank. A failure is logged at `failLevel` (subsystem TRANSPORT).
  PeerState(const char* transport, int rank, LogLevel failLevel = LogLevel::Warn)
      : transport_(transport), rank_(rank), failLevel_(failLevel) {}

  const char* transport() const { return transport_; }
  // Shut down (Transport::shutdown): pending operations were dropped.
  bool aborted() const { return aborted_; }
  void abort() { aborted_ = true; }
  // The peer's first error; ok while it works.
  const Status& failed() const { return failed_; }
  // Neither shut down nor failed.
  bool live() const { return !aborted_ && failed_.isOk(); }

  // Keeps `st` as the peer's error unless it failed before (then the first
  // error stays); logs the first. Returns true for the first.
  bool fail(const Status& st);

  // The memory a post may name: host memory only unless told otherwise.
  // `whyNot` is the error's text for the other kind ("" = "<transport>
  // transport: device memory is not supported", or "... host memory ...").
  void setMemory(bool host, bool device, std::string whyNot = std::string());
  bool moves(MemType mem) const { return mem == MemType::Host ? host_ : device_; }

  // Whether a post of `mem` is refused; cheap, for the fast path.
  bool refuses(MemType mem) const { return !live() || !moves(mem); }
  // Why a post of `mem` is refused, checked in this order, or ok:
  //   shut down   ABORTED "<transport> transport: shut down";
  //   failed      the peer's first error, again;
  //   memory      INVALID_ARGUMENT, setMemory()'s reason.
  Status checkPost(MemType mem) const;

 private:
  const char* transport_;
  int rank_;
  LogLevel failLevel_;
  bool aborted_ = false;
  bool host_ = true, device_ = false;
  std::string whyNot_;
  Status failed_;
};

// A posted send or receive of a FIFO transport (shm, cuda_ipc): the user's
// buffer, its length, how far it got, the call's tag, its completion.
struct PostedMsg {
  char* buf = nullptr;
  size_t len = 0;
  size_t off = 0;
  uint64_t tag = 0;
  Completion* c = nullptr;
};

// Completes every operation of `q` (a RingQueue or std::deque of ops with a
// `Completion* c`; null completions are skipped) with `st`, and empties it.
template <class Queue>
void finishAll(Queue& q, const Status& st) {
  while (!q.empty()) {
    if (q.front().c) q.front().c->finish(st);
    q.pop_front();
  }
}

// One side of a message: what its collective called and its length.
struct MsgSig {
  uint64_t tag;
  uint64_t len;
};

// The error (INVALID_USAGE) of message #`msgNo` from `peer` to `rank`, whose
// sender called `sent` where the receiver expected `recv`:
//   "mismatched collectives between rank 0 and rank 1 (10.0.0.2:4567), tcp
//    message #3: rank 0 called <recv> (A bytes), rank 1 called <sent> (B bytes)"
// `peerDesc` names the peer as the transport's other errors do ("rank 1
// (10.0.0.2:4567)", describePeer()); "" for plain "rank 1". A rank's messages
// to itself (peer == rank) name the receive and the send instead. Calls are
// printed with describeTag (core/tag.h).
Status mismatchError(const char* transport, int rank, int peer, const std::string& peerDesc,
                     uint64_t msgNo, MsgSig recv, MsgSig sent);

// What the sender of a mismatched message learns from a FIFO transport
// (shm, cuda_ipc): the receiver raised the FIFO's `broken` flag.
Status peerReportedMismatch(const char* transport, int rank, const std::string& peerDesc);

// "rank 3 (pid 1234 on host x)": how the same-host transports name a peer in
// errors; "localhost" when the host is unknown.
std::string describePeer(int rank, int pid, const std::string& host);

}  // namespace weft
