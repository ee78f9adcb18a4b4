// The collective arena of one host. When every rank of a communicator runs
// on this host, each rank creates a rank block (shm_segment.h) and maps every
// other rank's: a phase flag, a descriptor, a futex doorbell and four staging
// buffers of `chunk` bytes. Collectives then run in rounds without messages
// (src/algo/arena_plan.h, run by src/exec/arena_op.cc): a rank writes its staging buffers,
// publishes its flag, and reads the other ranks' buffers in place. That is one copy in and one copy
// out per byte, with the reduction fused into reading, and a few cache-line transfers of
// synchronization per round.
//
// Flags: a rank publishes the phases it finishes, numbered in one sequence.
// Every rank runs the same phase sequence (the communicator's collectives in
// call order), so "rank p has finished phase k" is a comparison: there are
// no per-op handshakes and no resets. The flag lives in one of two cache
// lines (by round parity), with the round's descriptor.
//
// Waiting: a waiting rank spins (pause) for a while, then sleeps on its own
// futex bell; publishing a flag wakes the ranks that sleep (Dekker: the
// publisher stores its flag then reads `sleeping`, the sleeper stores
// `sleeping` then re-reads the flags, both with full fences). The spin is
// short when the host has fewer cores than ranks, so that ranks sharing a
// core hand it over instead of burning their slice.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/status.h"
#include "transports/shm/shm_segment.h"

namespace weft {
namespace shm {

// Futex helpers on a 32-bit word in (possibly shared) memory.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int maxUs);
void futexWakeAll(std::atomic<uint32_t>* word);

class Arena {
 public:
  // blocks[r]: rank r's block (all ranks, this one included), mapped;
  // watches[r]: its process (nullptr for this rank). Not owned.
  // hostCpus: the CPUs the ranks may run on (transport.h's hostCpus).
  Arena(int rank, int nranks, std::vector<Segment*> blocks, std::vector<PidWatch*> watches,
        std::vector<std::string> describe, long spinUs, int hostCpus);

  // A rank block: 4 staging buffers, then the broadcast ring (below).
  static constexpr int kBlockSlots = 5;
  // The broadcast ring: small broadcasts (up to ringPayload() bytes) stage
  // in slot g % kRingSlots of the root's ring instead of its staging buffer
  // of parity g % 2, each slot with the root's descriptor and stamp in its
  // first line. The root may then run up to kRingSlots rounds ahead of the
  // readers (src/algo/arena_plan.h) where the parity buffers allow one. 64:
  // with more ranks than cores, a rank runs until the ring is full or empty
  // before its core goes to a sibling, and with fewer slots those switches
  // dominate (docs/performance.md, "The shm arena"). 64 slots of at least
  // 64 bytes fit the smallest chunk (4 KiB).
  static constexpr int kRingSlots = 64;
  // Up to kRingInline bytes of data ride in the header line itself, so that
  // a reader of a tiny broadcast fetches one line.
  static constexpr size_t kRingInline = 32;
  struct RingSlot {
    uint64_t desc[2];
    uint64_t stamp;
    // The round that wrote it, stored last (release): a reader that sees
    // its round here may read the slot without waiting for the flag.
    std::atomic<uint64_t> round;
    alignas(8) char inl[kRingInline];
    char* data(size_t len) { return len <= kRingInline ? inl : reinterpret_cast<char*>(this + 1); }
    const char* data(size_t len) const {
      return len <= kRingInline ? inl : reinterpret_cast<const char*>(this + 1);
    }
  };
  static_assert(sizeof(RingSlot) == 64, "a ring slot's header is one cache line");
  RingSlot* ringSlot(int r, uint64_t g) const {
    return reinterpret_cast<RingSlot*>(ring_[r] + (g % kRingSlots) * ringSlotBytes_);
  }
  size_t ringPayload() const { return ringSlotBytes_ - sizeof(RingSlot); }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Bytes of each staging buffer.
  size_t chunk() const { return chunk_; }
  // Rank r's staging buffer i (0..3), 64-byte aligned.
  char* buf(int r, int i) const { return bufs_[static_cast<size_t>(r) * 4 + i]; }
  bool oversubscribed() const { return oversubscribed_; }

  // Reserves `rounds` consecutive round numbers for one collective; every
  // rank reserves in the same order, so they agree. Round numbers start at 1.
  uint64_t reserveRounds(uint64_t rounds) {
    uint64_t base = nextRound_;
    nextRound_ += rounds;
    return base;
  }
  // The call history: a hash chained over the calls of every arena
  // collective so far, this one's (w0, count) included, in issue order.
  // Ranks that called the same collectives hold the same chain; it rides in
  // spare bits of the descriptor beside each rank's flag (arena_op.cc), so
  // that a collective that compares calls also compares everything before
  // it, at no extra cache line: a broadcast whose root differs between
  // ranks (no rank compares anything there) shows at the next collective
  // that does.
  uint32_t chainCall(uint64_t w0, uint64_t count) {
    uint64_t x = (static_cast<uint64_t>(chain_) << 32) ^ w0 ^ (count * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    chain_ = static_cast<uint32_t>(x ^ (x >> 31));
    return chain_;
  }
  // This rank stopped at an error it found in the arena (mismatched
  // collectives): ranks waiting for it fail at once, saying so.
  // Revoked (weft_comm_revoke): the same, with kClosedRevoked.
  void markFailed(uint32_t mark = kClosedMismatch) {
    hdr_[rank_]->closed.store(mark, std::memory_order_release);
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_) wakeIfSleeping(r);
  }

  // Rank r's descriptor words for rounds of parity `par` (2 words each).
  const uint64_t* desc(int r, int par) const { return hdr_[r]->lines[par].desc; }
  // Writes this rank's descriptor for round g (parity line g % 2; before
  // publishing).
  void setDesc(uint64_t g, uint64_t w0, uint64_t w1, uint64_t stamp, const void* addr = nullptr) {
    FifoHeader::ArenaLine& l = hdr_[rank_]->lines[g & 1];
    l.desc[0] = w0;
    l.desc[1] = w1;
    l.stamp = stamp;
    l.addr = reinterpret_cast<uint64_t>(addr);
    l.round = g;
  }
  // Rank r's descriptor and stamp for round g, from its parity line or,
  // when it ran that round as a ring broadcast, its ring slot; nullptr when
  // neither holds round g (call after rank r published A(g)). `ringFirst`:
  // look at the ring slot first (a ring reader: the parity line holds rank
  // r's flag, which it writes every round, so reading it costs both ranks
  // a cache miss).
  const uint64_t* descOf(int r, uint64_t g, uint64_t* stamp, bool ringFirst = false) const {
    const RingSlot* s = ringSlot(r, g);
    if (ringFirst && s->round.load(std::memory_order_acquire) == g) {
      *stamp = s->stamp;
      return s->desc;
    }
    const FifoHeader::ArenaLine& l = hdr_[r]->lines[g & 1];
    if (l.round == g) {
      *stamp = l.stamp;
      return l.desc;
    }
    if (s->round.load(std::memory_order_acquire) == g) {
      *stamp = s->stamp;
      return s->desc;
    }
    return nullptr;
  }
  // Rank r's inline data in its line of round g (FifoHeader::ArenaLine::inl).
  static constexpr size_t kInlineBytes = 16;
  char* inlineData(int r, uint64_t g) const { return hdr_[r]->lines[g & 1].inl; }
  // Rank r's published buffer for parity `par` (single-copy mode).
  uint64_t addr(int r, int par) const { return hdr_[r]->lines[par].addr; }

  // Single-copy mode: ranks read each other's buffers directly, with
  // process_vm_readv (or memcpy between threads of one process). probe()
  // checks that this rank may read every other rank's memory; the
  // communicator agrees on the result and sets directMin: broadcasts and
  // allgathers of at least that many bytes then run single-copy (0: never).
  // `limited`: the ranks share cores, where only large allgathers measured
  // faster single-copy (src/algo/arena_plan.cc).
  bool probeDirect() const;
  void setDirectMin(size_t bytes, bool limited) {
    directMin_ = bytes;
    directLimited_ = limited;
  }
  size_t directMin() const { return directMin_; }
  bool directLimited() const { return directLimited_; }
  // Copies n bytes at `remote` in rank r's address space to `dst`.
  Status readFrom(int r, uint64_t remote, void* dst, size_t n) const;
  // Rank r's arrival stamp for parity `par` (in the line its flag is in).
  uint64_t stamp(int r, int par) const { return hdr_[r]->lines[par].stamp; }

  // Publishes this rank's flag (release) and wakes ranks that sleep.
  void publish(uint64_t flag);
  // True when every rank's flag (only rank `only`'s when >= 0) is >= v;
  // else *lagging is a rank behind.
  bool reached(uint64_t v, int* lagging, int only = -1) const {
    // Every rank was seen past v already (a broadcast root's gate, 16
    // rounds behind, nearly always is): no line to read.
    if (only < 0 && v <= minSeen_) return true;
    return reachedSlow(v, lagging, only);
  }
  // Appends the ranks (of all, or just `only`) whose flag is below v.
  void behind(uint64_t v, std::vector<int>* ranks, int only = -1) const {
    for (int r = 0; r < nranks_; ++r)
      if ((only < 0 || r == only) && seqOf(r, v) < v) ranks->push_back(r);
  }
  // Waits until reached(v): spins, then sleeps. Fails when a rank behind
  // has exited (WEFT_ERR_REMOTE) or after timeoutS (WEFT_ERR_TIMEOUT), naming
  // the ranks behind and `what` (the collective).
  // A true *cancel (set by another thread: abort) ends it with
  // WEFT_ERR_ABORTED.
  // `tick`, when set, is called about once a second while it waits (stall
  // reports).
  // `only` >= 0: waits for that rank alone.
  Status wait(uint64_t v, double timeoutS, const std::function<std::string()>& what,
              const std::atomic<bool>* cancel = nullptr,
              const std::function<void()>& tick = nullptr, int only = -1);
  // The engine's idle sleep, in two halves (Transport::armSleep): armSleep()
  // announces it and returns false if a flag moved since reached() last
  // looked or `news` says there is work; else it leaves the bell's value in
  // *bell, and sleepArmed() sleeps at most maxUs until the bell moves from
  // it. Only sleepArmed() may run without the comm's lock.
  bool armSleep(const std::function<bool()>& news, uint32_t* bell);
  void sleepArmed(uint32_t bell, int maxUs);
  // Bumps rank r's bell and wakes it if it sleeps (FIFO publishers use it).
  void wakeIfSleeping(int r);
  // Wakes this rank's own sleeper (another thread of it: abort).
  void wakeSelf() {
    hdr_[rank_]->bell.fetch_add(1, std::memory_order_acq_rel);
    futexWakeAll(&hdr_[rank_]->bell);
  }
  // Rank r's process has exited.
  bool exited(int r) const { return watches_[r] && watches_[r]->exited(); }
  // Rank r ended its communicator (abort or destroy; its process may live
  // on), or stopped at a mismatch it found (markFailed).
  bool left(int r) const { return hdr_[r]->closed.load(std::memory_order_acquire) != 0; }
  bool stoppedAtMismatch(int r) const {
    return hdr_[r]->closed.load(std::memory_order_acquire) == kClosedMismatch;
  }
  // A peer that revoked the communicator, -1 when none: a blocking op that
  // ends after a revoke fails (the peer's pending calls did). Not a peer
  // that stopped at a mismatch: that may have come after this op, which
  // it completed too.
  int peerRevoked() const {
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_ && hdr_[r]->closed.load(std::memory_order_acquire) == kClosedRevoked) return r;
    return -1;
  }
  // Stopped at a mismatch, or revoked: a marker that names the cause.
  bool stoppedEarly(int r) const {
    const uint32_t c = hdr_[r]->closed.load(std::memory_order_acquire);
    return c == kClosedMismatch || c == kClosedRevoked;
  }
  // Why rank r is gone, for messages: "exited", "ended its communicator ...".
  std::string whyGone(int r) const;
  const std::string& describe(int r) const { return describe_[r]; }

 private:
  bool armBell(const std::function<bool()>& ready, uint32_t* bell);
  bool sleepOnBell(int maxUs, const std::function<bool()>& ready);
  // Phase v of round g (v = 2g+1 or 2g+2) is published in line g % 2, where
  // values only grow; rank r has passed v iff that line's seq >= v.
  static int lineOf(uint64_t v) { return static_cast<int>(((v - 1) >> 1) & 1); }
  uint64_t seqOf(int r, uint64_t v) const {
    return hdr_[r]->lines[lineOf(v)].seq.load(std::memory_order_acquire);
  }

  int rank_, nranks_;
  size_t chunk_;
  std::vector<FifoHeader*> hdr_;
  std::vector<char*> bufs_;
  std::vector<char*> ring_;  // per rank: its broadcast ring
  size_t ringSlotBytes_ = 0;
  std::vector<PidWatch*> watches_;
  std::vector<std::string> describe_;
  uint64_t nextRound_ = 1;
  uint32_t chain_ = 0;
  SpinBudget spin_;
  bool oversubscribed_;
  bool reachedSlow(uint64_t v, int* lagging, int only) const;
  mutable std::vector<uint64_t> seen_;  // highest seq reached() has read per rank
  mutable uint64_t minSeen_ = 0;        // the least of seen_ after reached()'s last full pass
  size_t directMin_ = 0;
  bool directLimited_ = false;
};

}  // namespace shm

}  // namespace weft
