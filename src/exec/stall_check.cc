// The end of every round (progress() or runAlone's): the clock, read at
// most once a round, and the stall checks that fail the ops when nothing
// moves: after a second the transports are asked whether the awaited peers
// live; after Config::timeoutS the ops fail with WEFT_ERR_TIMEOUT naming
// the peers (and local work) they wait for. An op starting after a long
// quiet looks first (checkBeforeStart).
#include <algorithm>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "exec/engine.h"

namespace weft {

void Engine::endRound(bool moved, bool active) {
  // At most one clock read per round, which idleWait (following every
  // round) reuses, and while nothing moves only every 16th round: a poll
  // round of the shm FIFOs is so short that a clock read in each was a
  // large share of a small collective's time (figures: docs/performance.md,
  // "The engine's figures"). The spin budget and the stall checks it serves
  // count microseconds and seconds.
  if (moved || active || ++idleCalls_ >= 16) {
    idleCalls_ = 0;
    // An op that finished in this round read the clock for its record.
    const uint64_t now = roundClockNs_ ? roundClockNs_ : nowNs();
    lastNowNs_.store(now, std::memory_order_relaxed);
    if (moved) {
      // The longest this rank went without running while ops were in
      // flight (a completion checks it: advanceOp).
      selfGapNs_ = std::max(selfGapNs_, now - lastProgressNs_);
      lastProgressNs_ = now;
    } else if (!ops_.empty() || alone_) {
      checkStalled(now);
    }
  }
}

void Engine::checkStalled(uint64_t now) {
  const double idleS = static_cast<double>(now - lastProgressNs_) * 1e-9;
  if (idleS < 1.0) return;
  // The peers the oldest unfinished op waits for.
  std::vector<int> waiting;
  const Op* oldest = alone_ && !alone_->finished ? alone_ : nullptr;
  for (auto& op : ops_) {
    if (oldest) break;
    if (!op->finished) oldest = op.get();
  }
  if (!oldest) return;
  if (oldest->runner) {
    oldest->runner->waitingFor(&waiting);
  } else {
    for (size_t i = oldest->firstPending; i < oldest->state.size(); ++i) {
      const Step& s = oldest->schedule().steps[i];
      if (oldest->state[i] == Op::kDone || s.peer < 0) continue;
      if (std::find(waiting.begin(), waiting.end(), s.peer) == waiting.end())
        waiting.push_back(s.peer);
      if (waiting.size() >= 8) break;
    }
  }
  if (tel_) tel_->checkStall(oldest->rec, waiting, now);
  if (now - lastLivenessNs_ > 1000000000ull) {
    lastLivenessNs_ = now;
    if (stallHook_) {
      Status st = stallHook_();
      if (st.isError()) {
        fail(st.withContext(strFormat("rank %d: %s", rank_, oldest->describe().c_str())));
        return;
      }
    }
    for (int p : waiting) {
      Status st = owners_[p] ? owners_[p]->checkPeer(p) : Status();
      if (st.isError()) {
        blamed_.emplace_back(p, st.message());
        fail(st.withContext(strFormat("rank %d: %s", rank_, oldest->describe().c_str())));
        return;
      }
    }
  }
  if (idleS < cfg_.timeoutS) return;
  std::string who;
  for (int p : waiting) {
    blamed_.emplace_back(p, strFormat("made no progress for %.0f s (WEFT_TIMEOUT_S)", idleS));
    if (!who.empty()) who += ", ";
    who += strFormat("rank %d (%s, pid %d)", p, peers_[p].hostname.c_str(), peers_[p].pid);
  }
  if (localPending_) {
    const LocalWork* lw = local_         ? local_.get()
                          : streamLocal_ ? streamLocal_.get()
                                         : deviceLocal_.get();
    who += strFormat("%s%zu local step(s) (%s)", who.empty() ? "" : ", ", localPending_,
                     lw ? lw->name() : "?");
  }
  fail(Status(WEFT_ERR_TIMEOUT,
              strFormat("rank %d: %s made no progress for %.0f s (WEFT_TIMEOUT_S); waiting for %s",
                        rank_, oldest->describe().c_str(), idleS, who.c_str())));
}

// An op that starts more than a second after the last look reads the
// peers' notices first (the stall hook: a revoke, a shrink). A rank woken
// from a stop between two calls would otherwise finish ops from data its
// peers sent before they gave up on it (eager sends wait in socket
// buffers), and learn it was left out only at its next stall. At most one
// look a second: nothing on a small op's path.
void Engine::checkBeforeStart(const Op& op) {
  if (!stallHook_ || !error_.isOk() || op.enqueueNs < lastLivenessNs_ + 1000000000ull) return;
  lastLivenessNs_ = op.enqueueNs;
  Status st = stallHook_();
  if (st.isError()) fail(st.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())));
}

}  // namespace weft
