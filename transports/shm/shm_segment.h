// Shared-memory segments of the shm transport. Two uses, one layout:
//  * FIFO: one segment per directed pair of ranks (src -> dst), created by
//    the receiver (dst) and mapped by the sender (src): a single-producer
//    single-consumer ring of fixed-size slots (below).
//  * Rank block (src == dst == the creator's rank): the creator's part of the
//    host's collective arena (arena.h): its phase flag, its doorbell, and four
//    slots used as staging buffers. Every rank of the host maps every block.
//
//   FifoHeader (constants + handshake flags | head | tail | flag | doorbell)
//   slot 0: SlotHeader (one cache line) + slotBytes of payload
//   slot 1: ...
//
// The sender fills slot head % slots and then publishes head + 1 (release);
// the receiver reads slots below head (acquire), copies them out and
// publishes tail + 1 (release), which frees the slot for the sender. head
// and tail only grow. A message of L bytes takes max(1, ceil(L / slotBytes))
// consecutive slots; each slot names the message's tag, total length and the
// payload bytes it carries.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/hmac.h"
#include "core/status.h"

namespace weft {
namespace shm {

constexpr uint32_t kSegMagic = 0x5753484d;  // "WSHM"
constexpr uint32_t kSegVersion = 4;
constexpr size_t kCacheLine = 64;
// FifoHeader::closed of a rank block: why its creator's communicator ended.
constexpr uint32_t kClosedEnded = 1, kClosedMismatch = 2, kClosedRevoked = 3;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm FIFO needs lock-free atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shm FIFO needs lock-free atomics");

struct alignas(kCacheLine) FifoHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  int32_t src;
  int32_t dst;
  int32_t creatorPid;
  uint64_t slotBytes;              // payload bytes per slot
  uint64_t slotStride;             // bytes from one slot to the next (header + payload, padded)
  std::atomic<uint32_t> attached;  // set by the sender once it mapped the segment
  std::atomic<uint32_t> broken;    // set by the receiver on a protocol error
  // Rank blocks: set when the creator's communicator ends (kClosedEnded:
  // abort, destroy), stops at an error it found in the arena
  // (kClosedMismatch: mismatched collectives) or is revoked
  // (kClosedRevoked), so that peers waiting for it fail at once instead of
  // at WEFT_TIMEOUT_S (its process may live on: a watchdog's abort).
  std::atomic<uint32_t> closed;
  // Where `probeValue` lies in the creator's address space: a peer that
  // reads it there with process_vm_readv and finds the value knows that it
  // may read the creator's memory (the arena's single-copy mode).
  uint64_t probeAddr;
  uint64_t probeValue;
  alignas(kCacheLine) std::atomic<uint64_t> head;  // slots published (sender writes)
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // slots consumed (receiver writes)
  // Rank blocks only (arena.h): one line per round parity. `seq` is the
  // last arena phase the creator finished in a round of that parity; `desc`
  // describes its collective (written before seq).
  struct alignas(kCacheLine) ArenaLine {
    std::atomic<uint64_t> seq;
    uint64_t desc[2];
    uint64_t stamp;  // telemetry: the rank's arrival stamp for the collective
    uint64_t addr;   // single-copy mode: the creator's buffer, in its address space
    uint64_t round;  // the round desc, stamp and addr belong to
    // A one-shot allreduce of up to 16 bytes: the data itself, so that a
    // reader fetches flag, descriptor and data in one cache line.
    alignas(8) char inl[16];
  };
  static_assert(sizeof(ArenaLine) == kCacheLine, "an arena line is one cache line");
  ArenaLine lines[2];
  // The creator sleeps on `bell` (a futex word) after setting `sleeping`;
  // whoever publishes something it may wait for bumps bell and wakes it.
  alignas(kCacheLine) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleeping;
};

struct alignas(kCacheLine) SlotHeader {
  uint64_t tag;
  uint64_t msgLen;
  uint64_t partLen;
  uint64_t seq;    // message number on this FIFO, to detect a desynchronized stream
  uint64_t stamp;  // Completion::stamp of the send
};

// Whether slot `s` is part `part` (bytes) of message #`msgNo` of the call
// the receiver posted (`tag`, `len` bytes): the FIFO transports (shm,
// cuda_ipc) check every slot they read.
inline bool slotMatches(const SlotHeader& s, uint64_t msgNo, uint64_t tag, size_t len,
                        size_t part) {
  return s.tag == tag && s.msgLen == len && s.seq == msgNo && s.partLen == part;
}
// The error of a slot that does not: the ranks called different
// collectives (INVALID_USAGE naming both calls), or the FIFO is corrupt.
Status slotError(const char* transport, const SlotHeader& s, int rank, int peer,
                 const std::string& peerDesc, uint64_t msgNo, uint64_t tag, size_t len,
                 size_t part);

// "/weft-<tag>-<src>-<dst>", the tag derived from the communicator's key
// and `purpose` (deriveTag: it reveals nothing of the key or the job secret).
std::string segmentName(const Key& key, int src, int dst, const char* purpose = "weft shm names");
// The common prefix of every segment of one communicator ("/weft-<tag>-").
std::string segmentPrefix(const Key& key, const char* purpose = "weft shm names");
size_t segmentBytes(uint32_t slots, size_t slotBytes);
// Why a sender cannot use the header `h` of a segment of `mapped` bytes as
// the FIFO src->dst ("" when it can): version, ranks, and every slot (at
// h.slotStride apart, h.slotBytes of payload) inside the mapping.
std::string layoutProblem(const FifoHeader& h, int src, int dst, size_t mapped);

// One mapped segment. The creator unlinks it (unlink(), or close() at the
// latest); close() also unmaps.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() { close(); }

  // Receiver side: creates (O_EXCL, mode 0600), sizes (sparse) and maps the
  // segment and initializes its header.
  Status create(const std::string& name, int src, int dst, uint32_t slots, size_t slotBytes);
  // Commits the memory (posix_fallocate) so that touching a slot can never
  // raise SIGBUS later when /dev/shm fills up.
  Status reserve();
  // Sender side: opens and maps an existing segment and checks its header.
  // *missing is set (with an ok status) when it does not exist yet.
  Status open(const std::string& name, int src, int dst, bool* missing);

  void unlink();  // removes the name (creator only; idempotent)
  void close();   // unlink() + munmap + close

  bool linked() const { return linked_; }
  const std::string& name() const { return name_; }
  FifoHeader* header() const { return static_cast<FifoHeader*>(base_); }
  SlotHeader* slot(uint64_t i) const {
    return reinterpret_cast<SlotHeader*>(static_cast<char*>(base_) + sizeof(FifoHeader) +
                                         i * header()->slotStride);
  }
  static char* payload(SlotHeader* s) { return reinterpret_cast<char*>(s) + sizeof(SlotHeader); }

 private:
  std::string name_;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t size_ = 0;
  bool creator_ = false;
  bool linked_ = false;
};

// Watches a peer process: exited() is true once it terminated (zombies
// included). Uses a pidfd when the kernel has one, else kill(pid, 0) and
// /proc/<pid>/stat. A peer in this very process (threads) never exits alone.
class PidWatch {
 public:
  PidWatch() = default;
  PidWatch(const PidWatch&) = delete;
  PidWatch& operator=(const PidWatch&) = delete;
  ~PidWatch();
  void watch(int pid);
  bool exited() const;
  int pid() const { return pid_; }

 private:
  int pid_ = 0;
  int pidfd_ = -1;
  bool self_ = false;
};

}  // namespace shm
}  // namespace weft
