// Fault tolerance on a communicator: revoke, what failed, shrink
// (docs/elastic.md). The agreement itself is bootstrap/agree.h.
#include <algorithm>

#include "api/comm.h"
#include "bootstrap/agree.h"
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

Status Comm::checkRevokedPeers() {
  if (!boot_ || boot_->listenFd() < 0) return Status::ok();
  const agree::Link link{boot_->commKey(), boot_->commId(), rank_, nranks_};
  const int r = agree::takeEarly(boot_->listenFd(), link, &early_);
  if (r < 0) return Status::ok();
  return Status(WEFT_ERR_REVOKED,
                strFormat("rank %d (pid %d on %s) revoked the communicator or is shrinking it", r,
                          peers_[r].pid, peers_[r].hostname.c_str()));
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
