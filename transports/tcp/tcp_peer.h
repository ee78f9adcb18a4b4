// TcpPeer: the data path between this rank and one peer, over nsocks
// non-blocking streams (tcp_wire.h). Each stream has a FIFO of parts to send
// and a FIFO of parts to receive; the k-th part queued on a stream at one end
// is the k-th at the other. Sends go out with sendmsg (header and payload of
// as many queued parts as fit in one iovec array); receives are read with
// readv straight into the posted buffers. What follows them on the stream,
// up to kSpill bytes, is read in the same call into the stream's spill
// buffer and handed to the receives posted next: a stream of small
// messages (pipelined broadcasts) costs one readv per many messages instead
// of one each. Beyond that, TCP flow control holds back a sender that runs
// ahead.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/base/posted_ops.h"
#include "transports/base/ring_queue.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace weft {
namespace tcp {

// What is wrong with the header of a part received where the receiver
// expected part of message number `op` (tag `tag`, `msgLen` bytes in all)
// with `partLen` bytes of payload (its own split, postRecv).
enum class HeaderFault {
  kNone,
  kMagic,      // not a part header: garbage on the stream
  kMismatch,   // the peer called another collective (tag or length differ)
  kOutOfStep,  // another message or part than this stream expects
};
inline HeaderFault checkPartHeader(const PartHeader& h, uint64_t tag, uint64_t msgLen, uint64_t op,
                                   size_t partLen) {
  if (h.magic != kDataMagic) return HeaderFault::kMagic;
  if (h.tag != tag || h.msgLen != msgLen) return HeaderFault::kMismatch;
  if (h.seq != static_cast<uint32_t>(op) || h.partLen != partLen) return HeaderFault::kOutOfStep;
  return HeaderFault::kNone;
}

class TcpPeer {
 public:
  // Takes ownership of `fds` (one per stream) and registers them in `epfd`
  // with data.u64 = (peer << 32) | stream. `*pending` counts the operations
  // not yet completed, over every peer of the transport; `*activity` grows
  // with every read or write that moved bytes (Transport::activity()).
  TcpPeer(int rank, int peer, const net::Address& remote, const std::vector<int>& fds, int epfd,
          int64_t* pending, uint64_t* activity);
  ~TcpPeer();
  TcpPeer(const TcpPeer&) = delete;
  TcpPeer& operator=(const TcpPeer&) = delete;

  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c);
  // An epoll event on stream `sock`.
  Status onEvent(int sock, uint32_t events);
  // Streams the peer hung up on are out of the epoll set; progress() calls
  // this to serve them while they have pending work.
  bool needsPolling() const { return hups_ > 0; }
  Status pollHungUp();
  // Whether every stream is still open (checkPeer).
  Status check();
  // Closes everything; pending operations are dropped, later posts fail.
  void abort();
  // Shuts every stream (both directions) but keeps the descriptors: the
  // peer sees the connection closed at once (Transport::stoppedAtMismatch).
  void hangUp();
  const Status& failed() const { return state_.failed(); }
  // Test builds: the faults to inject (transports/base/fault_plan.h).
  void setFaults(std::shared_ptr<FaultPlan> f) { faults_ = std::move(f); }

 private:
  struct SendPart {
    PartHeader hdr;
    const char* data;
    size_t len;   // payload bytes
    size_t done;  // bytes of header + payload written
    uint64_t op;  // message number
  };
  struct RecvPart {
    PartHeader hdr;  // read from the wire
    char* data;
    size_t len;  // payload bytes expected
    size_t done;
    uint64_t op;
    uint64_t tag;     // expected
    uint64_t msgLen;  // expected
  };
  struct Op {
    Completion* c;
    int partsLeft;
  };
  struct Stream {
    int fd = -1;
    RingQueue<SendPart> sendq;
    RingQueue<RecvPart> recvq;
    bool outArmed = false;    // EPOLLOUT in the epoll set
    bool hup = false;         // peer hung up; removed from the epoll set
    std::vector<char> spill;  // bytes read past the posted receives
    size_t spillHead = 0, spillLen = 0;
  };

  Status flushSend(Stream& s);
  Status flushRecv(Stream& s, int sock);
  // Copies up to n bytes at `src` into the front receive part(s) of `s`;
  // returns how many it took.
  Status absorb(Stream& s, int sock, const char* src, size_t n, size_t* took);
  Status checkHeader(const RecvPart& p, int sock);
  void partDone(RingQueue<Op>& ops, uint64_t* base, uint64_t op);
  void dropOps(RingQueue<Op>& ops, const Status* st);
  void armOut(Stream& s, bool on);
  void markHup(Stream& s, int sock);
  Status lost(const std::string& why);
  Status fail(const Status& st);

  int rank_;
  int peer_;
  std::string remote_;  // "10.0.0.2:4567"
  int epfd_;
  std::vector<Stream> streams_;
  int nsocks_;
  RingQueue<Op> sendOps_;
  RingQueue<Op> recvOps_;
  uint64_t sendBase_ = 0;  // message number of sendOps_.front()
  uint64_t recvBase_ = 0;
  uint64_t sendSeq_ = 0;  // next message number
  uint64_t recvSeq_ = 0;
  int hups_ = 0;
  int64_t* pending_;
  uint64_t* activity_;
  PeerState state_;
  std::shared_ptr<FaultPlan> faults_;
};

}  // namespace tcp
}  // namespace weft
