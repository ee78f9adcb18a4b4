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

const Op* Engine::waitingFor(std::vector<int>* waiting) const {
  const Op* oldest = alone_ && !alone_->finished ? alone_ : nullptr;
  for (auto& op : ops_) {
    if (oldest) break;
    if (!op->finished) oldest = op.get();
  }
  if (!oldest) return nullptr;
  if (oldest->runner) {
    oldest->runner->waitingFor(waiting);
  } else {
    for (size_t i = oldest->firstPending; i < oldest->state.size(); ++i) {
      const Step& s = oldest->schedule().steps[i];
      if (oldest->state[i] == Op::kDone || s.peer < 0) continue;
      if (std::find(waiting->begin(), waiting->end(), s.peer) == waiting->end())
        waiting->push_back(s.peer);
      if (waiting->size() >= 8) break;
    }
  }
  return oldest;
}

void Engine::checkStalled(uint64_t now) {
  const double idleS = static_cast<double>(now - lastProgressNs_) * 1e-9;
  if (idleS < 1.0) return;
  std::vector<int> waiting;
  const Op* oldest = waitingFor(&waiting);
  if (!oldest) return;
  if (tel_) tel_->checkStall(oldest->rec, waiting, now);
  if (now - lastLivenessNs_ > 1000000000ull) {
    lastLivenessNs_ = now;
    if (hooks_.check) {
      std::vector<int> others;
      for (int p : waiting)
        if (p != rank_) others.push_back(p);
      Status st = hooks_.check(others);
      if (st.isError()) {
        fail(st.withContext(strFormat("rank %d: %s", rank_, oldest->describe().c_str())), true);
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
  // The ranks this one waits for may be waiting for others in turn: their
  // notices say (timingOut), so that every rank names the one stuck.
  std::vector<int> ranks;
  for (int p : waiting)
    if (p != rank_) ranks.push_back(p);
  std::vector<int> stuck = hooks_.timingOut && !ranks.empty() ? hooks_.timingOut(ranks) : ranks;
  std::string via;
  if (stuck != ranks) {
    for (int p : ranks)
      if (std::find(stuck.begin(), stuck.end(), p) == stuck.end())
        via += strFormat("%s%d", via.empty() ? "" : ", ", p);
    if (!via.empty()) via = strFormat(" (through rank(s) %s, which wait for it too)", via.c_str());
    waiting = stuck;
  }
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
              strFormat("rank %d: %s made no progress for %.0f s (WEFT_TIMEOUT_S); waiting for %s%s",
                        rank_, oldest->describe().c_str(), idleS, who.c_str(), via.c_str())));
}

// An op that starts more than a second after the last look reads the
// peers' notices first (the stall hook: a revoke, a shrink). A rank woken
// from a stop between two calls would otherwise finish ops from data its
// peers sent before they gave up on it (eager sends wait in socket
// buffers), and learn it was left out only at its next stall. At most one
// look a second: nothing on a small op's path.
void Engine::checkBeforeStart(const Op& op) {
  if (!hooks_.check || !error_.isOk() || op.enqueueNs < lastLivenessNs_ + 1000000000ull) return;
  lastLivenessNs_ = op.enqueueNs;
  Status st = hooks_.check({});
  if (st.isError())
    fail(st.withContext(strFormat("rank %d: %s", rank_, op.describe().c_str())), true);
}

}  // namespace weft
