#include "transports/shm/arena.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/log.h"

namespace weft {
namespace shm {
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int maxUs) {
  timespec ts{maxUs / 1000000, static_cast<long>(maxUs % 1000000) * 1000};
  // Shared (not FUTEX_PRIVATE): the word lives in memory mapped by several
  // processes. EAGAIN (the word already changed), EINTR and ETIMEDOUT all
  // just return: callers re-check their condition.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 0x7fffffff, nullptr, nullptr,
          0);
}

Arena::Arena(int rank, int nranks, std::vector<Segment*> blocks, std::vector<PidWatch*> watches,
             std::vector<std::string> describe, long spinUs, int hostCpus)
    : rank_(rank),
      nranks_(nranks),
      chunk_(blocks[rank]->header()->slotBytes),
      watches_(std::move(watches)),
      describe_(std::move(describe)),
      seen_(nranks, 0) {
  for (int r = 0; r < nranks; ++r) {
    hdr_.push_back(blocks[r]->header());
    for (int i = 0; i < 4; ++i) bufs_.push_back(Segment::payload(blocks[r]->slot(i)));
    ring_.push_back(Segment::payload(blocks[r]->slot(4)));
  }
  // Ring slots of up to 4 KiB (a 64-byte header, then data) in the fifth
  // buffer; smaller when the chunk is (with a 4 KiB chunk, the header
  // alone: the ring then takes no broadcast, ringPayload() being 0).
  static_assert(4096 / kRingSlots >= sizeof(RingSlot), "a ring slot fits the smallest chunk");
  ringSlotBytes_ = std::min<size_t>(4096, chunk_ / kRingSlots) / 64 * 64;
  // Fault the broadcast rings in now (256 KiB per rank): the first small
  // broadcasts otherwise pay a page fault per slot, on the writer and on
  // every reader, and a short benchmark's first size measured that.
  const size_t ringBytes = kRingSlots * ringSlotBytes_;
  memset(ring_[rank_], 0, ringBytes);
  for (int r = 0; r < nranks; ++r)
    for (size_t off = 0; off < ringBytes; off += 4096)
      (void)*static_cast<volatile const char*>(ring_[r] + off);
  oversubscribed_ = nranks > hostCpus;
  // Auto: spin long when every rank has a core (a sleep/wake pair costs a
  // few microseconds), barely when ranks share cores.
  spin_.configure(spinUs, oversubscribed_);
}

bool Arena::probeDirect() const {
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_ || hdr_[r]->creatorPid == getpid()) continue;
    uint64_t v = 0;
    if (readFrom(r, hdr_[r]->probeAddr, &v, sizeof v).isError() || v != hdr_[r]->probeValue)
      return false;
  }
  return true;
}

Status Arena::readFrom(int r, uint64_t remote, void* dst, size_t n) const {
  if (!n) return Status::ok();
  const pid_t pid = hdr_[r]->creatorPid;
  if (pid == getpid()) {  // a thread of this process: the address is ours too
    memcpy(dst, reinterpret_cast<const void*>(remote), n);
    return Status::ok();
  }
  size_t done = 0;
  while (done < n) {
    iovec local{static_cast<char*>(dst) + done, n - done};
    iovec far{reinterpret_cast<void*>(remote + done), n - done};
    ssize_t k = process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return Status(
          WEFT_ERR_SYSTEM,
          strFormat("rank %d: reading %zu bytes of %s's memory (process_vm_readv): %s", rank_,
                    n - done, describe_[r].c_str(), k < 0 ? strerror(errno) : "nothing read"));
    }
    done += static_cast<size_t>(k);
  }
  return Status::ok();
}

void Arena::publish(uint64_t flag) {
  hdr_[rank_]->lines[lineOf(flag)].seq.store(flag, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_ && hdr_[r]->sleeping.load(std::memory_order_relaxed)) wakeIfSleeping(r);
}

void Arena::wakeIfSleeping(int r) {
  FifoHeader* h = hdr_[r];
  if (!h->sleeping.load(std::memory_order_relaxed)) return;
  h->bell.fetch_add(1, std::memory_order_acq_rel);
  futexWakeAll(&h->bell);
}

bool Arena::reachedSlow(uint64_t v, int* lagging, int only) const {
  const int li = lineOf(v);
  const int lo = only < 0 ? 0 : only, hi = only < 0 ? nranks_ : only + 1;
  for (int r = lo; r < hi; ++r) {
    // An earlier acquire load already saw rank r past v (phases only grow,
    // in order): no need to fetch its line again. A broadcast ring's gate
    // (16 rounds of slack) then reads the other ranks' lines about once in
    // 16 calls instead of every call, each read a cache miss on a line the
    // owner keeps writing.
    if (seen_[r] >= v) continue;
    uint64_t f = hdr_[r]->lines[li].seq.load(std::memory_order_acquire);
    if (f > seen_[r]) seen_[r] = f;
    if (f < v) {
      if (lagging) *lagging = r;
      return false;
    }
  }
  if (only < 0) minSeen_ = *std::min_element(seen_.begin(), seen_.end());
  return true;
}

// Announces a sleep on this rank's bell: the bell's value first, then the
// `sleeping` flag, then the look (ready()), so that a publisher that finds
// no sleeper published before the look, and one that finds it rings a bell
// that moved from *bell. False (and no sleeper) when ready() holds.
bool Arena::armBell(const std::function<bool()>& ready, uint32_t* bell) {
  FifoHeader* me = hdr_[rank_];
  *bell = me->bell.load(std::memory_order_acquire);
  me->sleeping.store(1, std::memory_order_seq_cst);
  if (!ready()) return true;
  me->sleeping.store(0, std::memory_order_relaxed);
  return false;
}

// Sleeps on this rank's bell unless ready() holds once `sleeping` is set.
// Returns ready()'s last answer.
bool Arena::sleepOnBell(int maxUs, const std::function<bool()>& ready) {
  uint32_t bell = 0;
  if (!armBell(ready, &bell)) return true;
  sleepArmed(bell, maxUs);
  return ready();
}

Status Arena::wait(uint64_t v, double timeoutS, const std::function<std::string()>& what,
                   const std::atomic<bool>* cancel, const std::function<void()>& tick, int only) {
  int lag = -1;
  if (reached(v, &lag, only)) return Status::ok();
  // The clock is read only after 512 rounds of spinning (some 13 us here,
  // where pause takes 25 ns; only with a spin budget, i.e. a core per
  // rank): a wait that ends sooner (a small collective's usual one) lasted
  // under the spin budget, which is all the budget needs to know, and costs
  // no clock read. With 64 rounds, enough waits ran past them that an
  // 8-byte allreduce took 0.31 us instead of 0.28 (A/B, 9 runs each).
  for (int i = 0; i < 512 && spin_.ns() > 0; ++i) {
    cpuRelax();
    if (seqOf(lag, v) >= v && reached(v, &lag, only)) {
      spin_.afterWait(0);
      return Status::ok();
    }
  }
  const uint64_t start = nowNs();
  uint64_t now = start;
  for (int i = 0; now - start < spin_.ns(); ++i) {
    cpuRelax();
    if (seqOf(lag, v) >= v && reached(v, &lag, only)) {
      spin_.afterWait(nowNs() - start);
      return Status::ok();
    }
    if ((i & 63) == 63) now = nowNs();
  }
  uint64_t nextCheck = now + 1000000000ull;
  const uint64_t end = start + static_cast<uint64_t>(timeoutS * 1e9);
  // Ranks sharing cores: hand the core to a sibling for a while (cheaper
  // than a futex sleep and wake) before sleeping.
  const uint64_t yieldUntil = oversubscribed_ ? now + 50000 : now;
  for (;;) {
    if (now < yieldUntil) {
      sched_yield();
      if (reached(v, &lag, only)) {
        spin_.afterWait(nowNs() - start);
        return Status::ok();
      }
    } else if (sleepOnBell(1000, [&] { return reached(v, &lag, only); })) {
      spin_.afterWait(nowNs() - start);
      return Status::ok();
    }
    if (cancel && cancel->load(std::memory_order_relaxed))
      return Status(WEFT_ERR_ABORTED, "communicator was aborted");
    now = nowNs();
    if (now < nextCheck) continue;
    nextCheck = now + 1000000000ull;
    if (tick) tick();
    std::string behind;
    for (int r = 0; r < nranks_; ++r) {
      if ((only >= 0 && r != only) || seqOf(r, v) >= v) continue;
      if (exited(r) || left(r))
        return Status(WEFT_ERR_REMOTE, strFormat("rank %d: %s: %s %s", rank_, what().c_str(),
                                                 describe_[r].c_str(), whyGone(r).c_str()));
      behind += (behind.empty() ? "" : ", ") + describe_[r];
    }
    if (now >= end)
      return Status(WEFT_ERR_TIMEOUT,
                    strFormat("rank %d: %s made no progress for %.0f s (WEFT_TIMEOUT_S); waiting "
                              "for %s",
                              rank_, what().c_str(), timeoutS, behind.c_str()));
  }
}

std::string Arena::whyGone(int r) const {
  // The marker first: a rank that found a mismatch may well have exited
  // since, and the mismatch is the cause.
  if (stoppedAtMismatch(r))
    return "stopped: it found mismatched collectives (its error names the calls)";
  if (hdr_[r]->closed.load(std::memory_order_acquire) == kClosedRevoked)
    return "revoked the communicator (weft_comm_revoke)";
  if (exited(r)) return "exited";
  return "ended its communicator (abort or destroy)";
}

bool Arena::armSleep(const std::function<bool()>& news, uint32_t* bell) {
  return armBell(
      [&] {
        for (int r = 0; r < nranks_; ++r)
          if (std::max(hdr_[r]->lines[0].seq.load(std::memory_order_acquire),
                       hdr_[r]->lines[1].seq.load(std::memory_order_acquire)) > seen_[r])
            return true;
        return news && news();
      },
      bell);
}

void Arena::sleepArmed(uint32_t bell, int maxUs) {
  FifoHeader* me = hdr_[rank_];
  futexWait(&me->bell, bell, maxUs);
  me->sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace shm
}  // namespace weft
