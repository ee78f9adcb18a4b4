// The engine's idle wait: spin, yield, then sleep on a doorbell or the
// transports' poll fds. Two halves (engine.h): prepareIdle() under the
// comm's lock, sleepIdle() without it.
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "core/cpu.h"
#include "exec/engine.h"

namespace weft {

Engine::IdleWait Engine::prepareIdle(int idleRounds, int maxUs) {
  IdleWait w;
  // Local work cannot wake a sleeping engine, nor can cuda_ipc (its copies
  // finish on the GPU; no doorbell): look again soon.
  const bool noWake = localPending_ || deviceOpsInFlight();
  if (noWake) maxUs = std::min(maxUs, 50);
  const uint64_t now = lastNowNs_.load(std::memory_order_relaxed);
  if (idleRounds <= 1) {
    // A new idle period; the last one lasted about lastIdleNs_ - idleSince.
    if (idleSinceNs_) spin_.afterWait(lastIdleNs_ - idleSinceNs_);
    idleSinceNs_ = now;
  }
  lastIdleNs_ = now;
  if (now - idleSinceNs_ < spin_.ns()) {
    w.kind = IdleWait::kRelax;
    return w;
  }
  if (oversubscribed_ && now - idleSinceNs_ < spin_.ns() + 50000) {
    // Ranks share cores: hand ours to a sibling before sleeping.
    w.kind = IdleWait::kYield;
    return w;
  }
  if (pollFds_.empty()) {
    for (Transport* t : transports_) {
      const Transport::Arm a = t->armSleep(&w.token);
      if (a == Transport::Arm::kNews) return w;  // kNone: look again at once
      if (a == Transport::Arm::kArmed) {
        w.kind = IdleWait::kDoorbell;
        w.bell = t;
        w.us = maxUs;
        return w;
      }
    }
    w.kind = IdleWait::kNap;
    w.us = std::min(maxUs, 50 + idleRounds / 64);
    return w;
  }
  // Sockets and maybe shared memory: wait on the sockets, briefly enough
  // that shared-memory peers (which cannot wake poll) are not kept waiting.
  w.kind = IdleWait::kPoll;
  w.us = doorbells_ || noWake ? 20 : std::max(1000, maxUs);
  return w;
}

void Engine::sleepIdle(const IdleWait& w) const {
  switch (w.kind) {
    case IdleWait::kNone:
      return;
    case IdleWait::kRelax:
      cpuRelax();
      return;
    case IdleWait::kYield:
      sched_yield();
      return;
    case IdleWait::kDoorbell:
      w.bell->sleepArmed(w.token, w.us);
      return;
    case IdleWait::kNap:
      usleep(static_cast<useconds_t>(w.us));
      return;
    case IdleWait::kPoll: {
      // A copy: poll() writes revents, and threads may poll at once.
      constexpr size_t kMaxFds = 8;
      ::pollfd fds[kMaxFds];
      const size_t n = std::min(pollFds_.size(), kMaxFds);
      std::copy(pollFds_.begin(), pollFds_.begin() + static_cast<long>(n), fds);
      const long ns = static_cast<long>(w.us) * 1000L;
      timespec ts{ns / 1000000000L, ns % 1000000000L};
      ppoll(fds, n, &ts, nullptr);
      return;
    }
  }
}

}  // namespace weft
