// Fault tolerance on a communicator: revoke, what failed, shrink
// (docs/elastic.md). The agreement itself is bootstrap/agree.h.
#include <algorithm>
#include <chrono>
#include <thread>

#include "api/comm.h"
#include "bootstrap/agree.h"
#include "core/clock.h"
#include "core/log.h"

namespace weft {

Status Comm::closedStatus() const {
  if (revoked_)
    return Status(WEFT_ERR_REVOKED,
                  strFormat("rank %d: the communicator was revoked (weft_comm_revoke): shrink it "
                            "(weft_comm_shrink) or destroy it",
                            rank_));
  return Status(WEFT_ERR_ABORTED, "communicator was aborted");
}

void Comm::revoke() {
  if (revoked_.exchange(true)) return;
  // An op running under the lock (the arena's, runAlone's) ends on this.
  aborting_ = true;
  std::unique_lock<Mutex> lk(mu);
  if (closed_) return;  // aborted already: nothing to tell
  noteFailures();       // before the transports close: what they knew
  if (engine_) engine_->fail(closedStatus());
  // Peers blocked on this rank learn it now, not at their timeout.
  for (auto& t : transports_) {
    t->stopped(StopCause::Revoked);
    t->shutdown();
  }
  if (devTransport_) devTransport_->shutdown();
  // The bootstrap stays: shrink reaches the others through its socket.
  closed_ = true;
  progressCv_.notify_all();
  if (!boot_) return;
  // And on every transport alike, through the bootstrap sockets: peers
  // blocked on others learn it at their next stall check (takeEarly).
  const agree::Link link{boot_->commKey(), boot_->commId(), rank_, nranks_};
  const std::vector<net::Address> addrs = boot_->addresses();
  const uint32_t attempt = shrinks_;
  lk.unlock();
  agree::announceRevoke(link, addrs, attempt, 0.5);
  WEFT_INFO(kColl, "rank %d revoked the communicator", rank_);
}

int Comm::takeNotices() {
  if (!boot_ || boot_->listenFd() < 0) return -1;
  const agree::Link link{boot_->commKey(), boot_->commId(), rank_, nranks_};
  std::vector<agree::Frame> stuck;
  const int r = agree::takeEarly(boot_->listenFd(), link, &early_, &stuck);
  for (const agree::Frame& f : stuck) {
    std::vector<int>& note = stuckNotes_[f.from];
    note.clear();
    for (int32_t x : f.ranks)
      if (x != f.from) note.push_back(x);
  }
  return r;
}

std::vector<int> Comm::followStuck(const std::vector<int>& from) const {
  // A rank that sent a notice was running (it timed out waiting): its chain
  // goes on through the ranks it named. One without a notice (this rank
  // among them: its own are not kept) is where a chain ends. Ranks that
  // only wait for each other (a cycle) end nothing.
  std::vector<int> ends;
  std::vector<char> seen(static_cast<size_t>(nranks_), 0);
  std::vector<int> todo(from.rbegin(), from.rend());
  while (!todo.empty()) {
    const int r = todo.back();
    todo.pop_back();
    if (r < 0 || r >= nranks_ || seen[r]) continue;
    seen[r] = 1;
    auto it = stuckNotes_.find(r);
    if (it == stuckNotes_.end()) {
      ends.push_back(r);
      continue;
    }
    for (auto x = it->second.rbegin(); x != it->second.rend(); ++x) todo.push_back(*x);
  }
  return ends;
}

Status Comm::stuckStatus(const Status* here, const std::vector<int>& waiting) {
  // This rank, when it waits too, tells the others whom for, and gives
  // their notices a moment (timingOut): ranks that give up at about the
  // same time then agree on the ends of the chains.
  const std::vector<int> blame = waiting.empty() ? std::vector<int>() : timingOut(waiting);
  std::vector<int> senders;
  for (const auto& n : stuckNotes_) senders.push_back(n.first);
  const std::vector<int> ends = followStuck(senders);
  const std::string tail = here ? "; here: " + here->message() : std::string();
  if (ends.empty())  // they wait for each other, not for this rank
    return Status(WEFT_ERR_TIMEOUT,
                  strFormat("%s wait for each other (calls that do not match, or a deadlock) and "
                            "timed out (WEFT_TIMEOUT_S)%s",
                            describeRanks(senders).c_str(), tail.c_str()));
  std::string what;
  if (std::find(ends.begin(), ends.end(), rank_) == ends.end()) {
    what = strFormat("%s made no progress: %s timed out waiting (WEFT_TIMEOUT_S)",
                     describeRanks(ends).c_str(), describeRanks(senders).c_str());
  } else if (!waiting.empty()) {
    // They waited for this rank, which waits for others in turn: for them
    // (a cycle: calls that do not match, a deadlock), or for a stuck one.
    const bool cycle = std::all_of(blame.begin(), blame.end(), [&](int b) {
      return std::find(senders.begin(), senders.end(), b) != senders.end();
    });
    if (cycle)
      return Status(WEFT_ERR_TIMEOUT,
                    strFormat("this rank (rank %d) and %s wait for each other (calls that do not "
                              "match, or a deadlock): they timed out waiting for this rank, which "
                              "is waiting for %s (WEFT_TIMEOUT_S)%s",
                              rank_, describeRanks(senders).c_str(), describeRanks(blame).c_str(),
                              tail.c_str()));
    what = strFormat("%s made no progress: %s timed out waiting (WEFT_TIMEOUT_S), and this rank "
                     "waits for it too",
                     describeRanks(blame).c_str(), describeRanks(senders).c_str());
  } else {
    what = strFormat("this rank (rank %d) is the one the others waited for: %s timed out "
                     "waiting (WEFT_TIMEOUT_S)",
                     rank_, describeRanks(senders).c_str());
  }
  if (here) what += " and left" + tail;
  return Status(WEFT_ERR_REMOTE, what);
}

std::string Comm::describeRanks(const std::vector<int>& ranks) const {
  std::string s;
  for (int r : ranks)
    s += strFormat("%srank %d (%s, pid %d)", s.empty() ? "" : ", ", r,
                   peers_[r].hostname.c_str(), peers_[r].pid);
  return s;
}

Status Comm::checkRevokedPeers(const std::vector<int>& waiting) {
  const int r = takeNotices();
  // A peer gave up waiting (and may be shrinking already): the
  // communicator is going down. Name the ranks at the end of its wait.
  if (!stuckNotes_.empty()) return stuckStatus(nullptr, waiting);
  if (r < 0) return Status::ok();
  return Status(WEFT_ERR_REVOKED,
                strFormat("rank %d (pid %d on %s) revoked the communicator or is shrinking it", r,
                          peers_[r].pid, peers_[r].hostname.c_str()));
}

std::vector<int> Comm::timingOut(const std::vector<int>& waiting) {
  if (!boot_ || boot_->listenFd() < 0) return waiting;
  const agree::Link link{boot_->commKey(), boot_->commId(), rank_, nranks_};
  const std::vector<net::Address> addrs = boot_->addresses();
  agree::announceStuck(link, addrs, waiting, 0.5);
  // The ranks waited for may be waiting for others themselves, and timing
  // out at about the same moment: a short while for their notices (all of
  // it: a chain may grow by a later notice).
  const double grace = std::min(2.0, std::max(0.2, cfg_.timeoutS / 10));
  Deadline dl(grace);
  for (;;) {
    takeNotices();
    if (dl.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<int> blame = followStuck(waiting);
  // Chains back to this rank (it waits, and is waited for) end elsewhere too.
  blame.erase(std::remove(blame.begin(), blame.end(), rank_), blame.end());
  if (blame.empty()) blame = waiting;
  if (blame != waiting) agree::announceStuck(link, addrs, blame, 0.5);
  return blame;
}

Status Comm::explainLoss(const Status& st, const std::vector<int>& waiting) {
  if (!boot_ || boot_->listenFd() < 0) return st;
  // A peer that timed out told the others before it closed its
  // connections; its notice may still be a moment behind.
  Deadline dl(0.02);
  for (;;) {
    takeNotices();
    if (!stuckNotes_.empty() || dl.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return stuckNotes_.empty() ? st : stuckStatus(&st, waiting);
}

void Comm::noteFailures() {
  failed_.resize(static_cast<size_t>(nranks_));
  if (!engine_) return;
  for (const auto& b : engine_->blamed())
    if (failed_[b.first].empty()) failed_[b.first] = b.second;
  // Only a healthy engine's transports are asked: checkPeer fails the
  // channel's posted messages, whose completions a failed engine has freed;
  // and shut transports would blame everyone.
  if (closed_ || engine_->error().isError()) return;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || !failed_[p].empty()) continue;
    Transport* t = engine_->ownerOf(p);
    if (!t) continue;
    Status st = t->checkPeer(p);
    if (st.isError()) failed_[p] = st.message();
  }
}

std::vector<std::pair<int, std::string>> Comm::failedRanks() {
  std::lock_guard<Mutex> lk(mu);
  noteFailures();
  std::vector<std::pair<int, std::string>> out;
  for (int p = 0; p < nranks_; ++p)
    if (!failed_[p].empty()) out.emplace_back(p, failed_[p]);
  return out;
}

weft_config_t Comm::childConfig() const {
  weft_config_t c = WEFT_CONFIG_INITIALIZER;
  c.timeout_s = cfg_.timeoutS;
  // A member that died after the decision never joins: bound that wait
  // by the shrink's own timeout rather than the (long) bootstrap one.
  c.bootstrap_timeout_s = std::min(cfg_.bootstrapTimeoutS, std::max(10.0, cfg_.shrinkTimeoutS));
  c.repro = repro_ == Repro::Exact     ? WEFT_REPRO_EXACT
            : repro_ == Repro::Ordered ? WEFT_REPRO_ORDERED
                                       : WEFT_REPRO_OFF;
  c.fusion_threshold = fusionThreshold_ ? fusionThreshold_ : WEFT_FUSION_OFF;
  c.wire = static_cast<int>(wire_) + WEFT_WIRE_NONE;
  return c;
}

Status Comm::shrink(const std::vector<char>& excluded, std::shared_ptr<Comm>* out) {
  std::lock_guard<std::mutex> one(shrinkMu_);
  agree::Params p;
  {
    std::lock_guard<Mutex> lk(mu);
    if (!boot_ || boot_->listenFd() < 0)
      return invalidUsage(strFormat("rank %d: weft_comm_shrink on a communicator that was aborted",
                                    rank_));
    p.rank = rank_;
    p.nranks = nranks_;
    p.key = boot_->commKey();
    p.commId = boot_->commId();
    p.attempt = shrinks_++;
    p.listenFd = boot_->listenFd();
    p.addrs = boot_->addresses();
    p.gone = excluded;
    p.early = std::move(early_);
    early_.clear();
    p.timeoutS = cfg_.shrinkTimeoutS;
    p.cfg = cfg_;
  }
  const uint64_t t0 = nowNs();
  agree::Outcome o;
  WEFT_RETURN_IF_ERROR(agree::run(p, &o));
  const int newRank =
      static_cast<int>(std::find(o.members.begin(), o.members.end(), rank_) - o.members.begin());
  const double agreedS = static_cast<double>(nowNs() - t0) * 1e-9;
  const weft_config_t cc = childConfig();
  Status st = Comm::create(o.id, static_cast<int>(o.members.size()), newRank, out, &cc);
  if (st.isError())
    return st.withContext(strFormat("rank %d: weft_comm_shrink: joining the new communicator of "
                                    "%zu survivors",
                                    rank_, o.members.size()));
  std::string kept;
  for (int m : o.members) kept += (kept.empty() ? "" : ",") + std::to_string(m);
  WEFT_INFO(kColl, "rank %d: shrink to %zu ranks (%s) in %.2f s (agreement %.2f s):%s; now rank %d",
            rank_, o.members.size(), kept.c_str(), static_cast<double>(nowNs() - t0) * 1e-9,
            agreedS, o.log.c_str(), newRank);
  return Status::ok();
}

}  // namespace weft
