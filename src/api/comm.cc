#include "api/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "api/init_blob.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/log.h"
#include "cuda/local_work_choice.h"
#include "exec/arena_op.h"
#include "kernels/cpu/reduce.h"
#include "net/socket.h"
#include "topo/nic_choice.h"
#include "transports/shm/arena.h"

namespace weft {
namespace {

// WEFT_TRANSPORTS: "" = all; "a,b" = only these; "^a,b" = all but these.
bool transportAllowed(const std::string& spec, const std::string& name) {
  if (spec.empty()) return true;
  bool exclude = spec[0] == '^';
  std::string list = exclude ? spec.substr(1) : spec;
  bool listed = false;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok == name) listed = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !listed : listed;
}

// Named in a WEFT_TRANSPORTS list (not merely allowed by an empty or "^" spec).
[[maybe_unused]] bool transportRequested(const std::string& spec, const std::string& name) {
  return !spec.empty() && spec[0] != '^' && transportAllowed(spec, name);
}

}  // namespace

Status Comm::create(const weft_unique_id_t& id, int nranks, int rank, std::shared_ptr<Comm>* out,
                    const weft_config_t* config) {
  std::shared_ptr<Comm> c(new Comm());
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->cfg_ = Config::fromEnv();
  if (config && config->timeout_s > 0) c->cfg_.timeoutS = config->timeout_s;
  if (config && config->bootstrap_timeout_s > 0)
    c->cfg_.bootstrapTimeoutS = config->bootstrap_timeout_s;
  c->reproRequest_ = reproRequest(c->cfg_.repro, config);
  c->fusionThreshold_ = fusionRequest(c->cfg_.fusionThreshold, config);
  c->wireRequest_ = wireRequest(c->cfg_.wire, config);
  Status st = c->init(id);
  if (st.isError()) {
    c->abort();
    return st;
  }
  *out = std::move(c);
  return Status();
}

void Comm::setTimeout(double timeoutS) {
  std::lock_guard<Mutex> lk(mu);
  cfg_.timeoutS = timeoutS;
  if (engine_) engine_->setTimeout(timeoutS);
}

Status Comm::init(const weft_unique_id_t& id) {
  logReconfigure();
  WEFT_RETURN_IF_ERROR(Bootstrap::create(id, rank_, nranks_, cfg_, &boot_));
  WEFT_RETURN_IF_ERROR(exchangePeerInfo());
  WEFT_RETURN_IF_ERROR(topo::setUpCommTopology(
      cfg_, peers_, rank_,
      [this](const std::string& m, std::vector<std::string>* all) {
        return boot_->allgather(m, all, cfg_.bootstrapTimeoutS);
      },
      &topo_));
  WEFT_RETURN_IF_ERROR(setUpTransports());
  std::vector<Endpoint*> eps(nranks_, nullptr);
  std::vector<Transport*> owners(nranks_, nullptr), all;
  for (int p = 0; p < nranks_; ++p) eps[p] = eps_[p].get();
  for (auto& t : transports_) {
    all.push_back(t.get());
    if (shm::Arena* a = t->arena()) arena_ = a;
    for (int p = 0; p < nranks_; ++p)
      if (transportNames_[p] == t->name()) owners[p] = t.get();
  }
  engine_.reset(new Engine(rank_, nranks_, cfg_, eps, owners, all, peers_));
  Engine::PeerHooks hooks;
  hooks.check = [this](const std::vector<int>& w) { return checkRevokedPeers(w); };
  hooks.timingOut = [this](const std::vector<int>& w) { return timingOut(w); };
  hooks.explainLoss = [this](const Status& st, const std::vector<int>& w) {
    return explainLoss(st, w);
  };
  engine_->setPeerHooks(std::move(hooks));
  // Reproducible folds run on the host (the GPU backend has none).
  cuda::setUpStreamLocalWork(repro_ != Repro::Off ? std::string() : cfg_.cudaLocalWork, rank_,
                             engine_.get());
  attachDevice();
  setUpSelection();
  setUpTelemetry();
  WEFT_RETURN_IF_ERROR(agreeOnSingleCopy());
  // Everyone connected before anyone sends.
  WEFT_RETURN_IF_ERROR(boot_->barrier(cfg_.bootstrapTimeoutS));
  tel_->unlinkBoard();
  logInit();
  return Status();
}

Status Comm::exchangePeerInfo() {
  InitBlobWriter mine;
  mine.u64(net::hostHash())
      .u64(static_cast<uint64_t>(getpid()))
      .u64(static_cast<uint64_t>(telemetry::realtimeMinusMonotonicNs()));
  mine.u64(reproRequest_);
  mine.u64(fusionThreshold_);
  mine.u64(wireRequest_);
  const std::vector<uint64_t> mask = affinityMask();
  mine.u64(mask.size());
  for (uint64_t w : mask) mine.u64(w);
  mine.rest(net::hostName());
  std::vector<std::string> all;
  WEFT_RETURN_IF_ERROR(boot_->allgather(mine.blob(), &all, cfg_.bootstrapTimeoutS));
  peers_.resize(nranks_);
  clockDelta_.resize(nranks_);
  std::vector<uint64_t> repros(nranks_), wires(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    InitBlobReader in(all[r]);
    peers_[r].rank = r;
    peers_[r].hostHash = in.u64();
    peers_[r].pid = static_cast<int>(in.u64());
    clockDelta_[r] = static_cast<int64_t>(in.u64());
    repros[r] = in.u64();
    // Fusion changes which collectives run, so every rank takes the same
    // threshold: the smallest (a rank with fusion off turns it off).
    fusionThreshold_ = std::min<size_t>(fusionThreshold_, in.u64());
    wires[r] = in.u64();
    const size_t words = std::min<uint64_t>(in.u64(), 1024);
    for (size_t w = 0; w < words; ++w) peers_[r].cpuMask.push_back(in.u64());
    peers_[r].hostname = in.rest();
    if (peers_[r].hostname.empty()) peers_[r].hostname = "?";
  }
  WEFT_RETURN_IF_ERROR(agreeOnRepro(repros));
  return agreeOnWire(wires);
}

Status Comm::setUpTransports() {
  TransportContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.key = boot_->commKey();
  ctx.commId = boot_->commId();
  ctx.config = cfg_;
  ctx.peers = peers_;
  ctx.rdmaNic = topo::rdmaNicName(topo_.view, topo_.localRank);
  WEFT_RETURN_IF_ERROR(FaultPlan::make(cfg_.testFaults, cfg_.testFaultSeed, rank_, &ctx.faults));

  // Candidates in order of preference; each peer takes the first that reaches it.
  std::vector<std::unique_ptr<Transport>> cands;
  cands.push_back(makeSelfTransport(ctx));
  if (transportAllowed(cfg_.transports, "shm")) cands.push_back(makeShmTransport(ctx));
#ifdef WEFT_HAVE_IBVERBS
  // Opt-in until it has run on RDMA hardware (transports/ibverbs/).
  if (transportRequested(cfg_.transports, "ibverbs")) cands.push_back(makeIbverbsTransport(ctx));
#endif
#ifdef WEFT_HAVE_UCX
  // UCX over TCP is no faster than weft's tcp: by default only with RDMA.
  if (transportRequested(cfg_.transports, "ucx") ||
      (transportAllowed(cfg_.transports, "ucx") && ucxHasRdma()))
    cands.push_back(makeUcxTransport(ctx));
#endif
  if (transportAllowed(cfg_.transports, "tcp")) cands.push_back(makeTcpTransport(ctx));
  transportNames_.assign(nranks_, "");
  std::vector<std::vector<int>> users(cands.size());
  for (int p = 0; p < nranks_; ++p) {
    for (size_t t : topo::transportOrder(topo_, cands, p)) {
      if (cands[t]->canReach(peers_[p])) {
        transportNames_[p] = cands[t]->name();
        users[t].push_back(p);
        break;
      }
    }
    if (transportNames_[p].empty())
      return invalidUsage(
          strFormat("no transport reaches rank %d (%s) from rank %d with "
                    "WEFT_TRANSPORTS=%s",
                    p, peers_[p].hostname.c_str(), rank_, cfg_.transports.c_str()));
  }
  // Publish every used transport's address in one allgather.
  InitBlobWriter blob;
  for (size_t t = 0; t < cands.size(); ++t) {
    std::string a;
    if (!users[t].empty()) WEFT_RETURN_IF_ERROR(cands[t]->localAddress(&a));
    blob.section(a);
  }
  // Then the device path's offer (comm_device.cc; empty when not considered).
  ipcAllowed_ = transportAllowed(cfg_.transports, "cuda_ipc");
  std::string offer;
  WEFT_RETURN_IF_ERROR(offerDevice(ctx, ipcAllowed_, &offer));
  blob.section(offer);
  std::vector<std::string> all;
  WEFT_RETURN_IF_ERROR(boot_->allgather(blob.blob(), &all, cfg_.bootstrapTimeoutS));
  eps_.resize(nranks_);
  for (size_t t = 0; t < cands.size(); ++t) {
    std::vector<std::string> blobs(nranks_);
    for (int r = 0; r < nranks_; ++r) blobs[r] = InitBlobReader(all[r]).section(t);
    if (!users[t].empty()) {
      Status st = cands[t]->connect(users[t], blobs, &eps_);
      if (st.isError())
        return st.withContext(strFormat("rank %d: %s connect", rank_, cands[t]->name()));
      transports_.push_back(std::move(cands[t]));
    }
  }
  return connectDevice(all, cands.size());
}

void Comm::logInit() const {
  if (rank_ == 0) {
    int v = WEFT_VERSION_CODE;
    WEFT_INFO(kInit, "weft %d.%d.%d, %d ranks, host reduction: %s", v / 10000, v / 100 % 100,
              v % 100, nranks_, hostReduceIsa());
    for (const std::string& e : Config::variablesInEffect()) WEFT_INFO(kInit, "env %s", e.c_str());
    // Agreed on at init (the smallest any rank asked for).
    if (fusionThreshold_)
      WEFT_INFO(kInit, "tensor fusion: a group's allreduces packed up to %zu bytes",
                fusionThreshold_);
    else
      WEFT_INFO(kInit, "tensor fusion: off");
  }
  if (logEnabled(LogLevel::Info, kInit)) {
    std::string line;
    for (int p = 0; p < nranks_; ++p)
      line += strFormat("%s%d:%s", p ? " " : "", p, transportNames_[p].c_str());
    WEFT_INFO(kInit, "rank %d/%d on %s pid %d: transports per peer %s", rank_, nranks_,
              peers_[rank_].hostname.c_str(), peers_[rank_].pid, line.c_str());
  }
}

void Comm::setUpSelection() {
  CostModel& m = model_;
  m.nranks = nranks_;
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : peers_) {
    int here = 0;
    for (const PeerInfo& q : peers_) here += q.hostHash == p.hostHash;
    m.maxRanksPerHost = std::max(m.maxRanksPerHost, here);
    auto it = std::find(hosts.begin(), hosts.end(), p.hostHash);
    hostIds_.push_back(static_cast<int>(it - hosts.begin()));
    if (it == hosts.end()) hosts.push_back(p.hostHash);
  }
  m.nhosts = static_cast<int>(hosts.size());
  m.cores = hostCpus(peers_, rank_);
  for (auto& t : transports_) {
    const TransportCaps c = t->caps();
    LinkClass l{c.latencyUs, c.bandwidthGBs, c.cpuBound};
    if (c.scope == LinkScope::IntraHost && c.hostMemory) m.intra = l;
    if (c.scope == LinkScope::InterHost) {
      m.inter = l;
      if (m.nhosts == 1) m.intra = l;  // a network transport forced within the host
    }
  }
  topo::applyToCostModel(topo_, &m);
  // A throttled engine (test builds) must see every byte: no arena.
  if (cfg_.testThrottleMBps > 0) arena_ = nullptr;
  m.shmArena = arena_ != nullptr;
  if (arena_) m.arenaChunk = arena_->chunk();
  if (!cfg_.algo.empty()) {
    Status st = parseAlgoRules(cfg_.algo, &rules_);
    if (st.isError()) {
      WEFT_WARN(kTuning, "ignoring WEFT_ALGO=%s: %s", cfg_.algo.c_str(), st.message().c_str());
      rules_ = AlgoRules();
    }
  }
  noteReproRules();
  if (rank_ == 0 && logEnabled(LogLevel::Info, kTuning))
    WEFT_INFO(kTuning, "algorithm selection (%d ranks, %d hosts, arena %s):\n%s", nranks_, m.nhosts,
              arena_ ? "on" : "off", tuningTable(m, &rules_).c_str());
}

const Choice& Comm::chooseAlgoSlow(const CollArgs& args) {
  static const Choice kNone;
  if (args.type == CollType::Send || args.type == CollType::Recv) return kNone;
  CachedChoice& c =
      choices_[(static_cast<size_t>(args.type) * 31 + args.count * 7 + args.eltSize) % 64];
  if (c.type != args.type || c.count != args.count || c.eltSize != args.eltSize ||
      c.repro != args.repro || c.wire != args.wire) {
    c.type = args.type;
    c.count = args.count;
    c.eltSize = args.eltSize;
    c.repro = args.repro;
    c.wire = args.wire;
    c.choice = choose(args, model_, &rules_);
    if (c.choice.algo == Algo::Shm && !arena_) c.choice.algo = Algo::Auto;
  }
  lastChoice_ = c;
  return c.choice;
}

Status Comm::runNow(const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                    uint64_t callNs) {
  // One lock from the choice to the first progress round: a small
  // collective took it three times.
  std::unique_lock<Mutex> lk(mu);
  if (closed_) return closedStatus();
  switch (runPathOf(args)) {
    case RunPath::Arena: {
      Status ps;
      const ArenaPlan* plan = arenaPlan(args, dt, &ps);
      if (!plan) return ps;
      ArenaOp op(arena_, *plan, args, dt, send, recv, ++collSeq_);
      telemetry::Telemetry* t = tel();
      telemetry::OpRecord* rec = t ? &openArenaRecord(args, dt, collSeq_, callNs) : nullptr;
      if (rec) op.setTelemetry(t, rec, shmTx_);
      Status st = op.run(cfg_.timeoutS, &aborting_);
      if (st.code() == WEFT_ERR_ABORTED && revoked_) st = closedStatus();
      // A peer that revoked meanwhile failed its side of this op: so does this rank.
      if (st.isOk()) {
        const int r = arena_->peerRevoked();
        if (r >= 0)
          st = Status(WEFT_ERR_REMOTE, strFormat("rank %d: %s %s", rank_, arena_->describe(r).c_str(),
                                                 arena_->whyGone(r).c_str()));
      }
      if (rec) t->end(*rec, st.code(), nowNs());
      if (st.isError()) engine_->fail(st);
      return st;
    }
    case RunPath::Alone: {
      Op& op = engine_->aloneOp();
      WEFT_RETURN_IF_ERROR(fillOp(op, args, dt, send, recv, chooseAlgo(args), false, callNs));
      Status st = engine_->runAlone(op, aborting_);
      return st.code() == WEFT_ERR_ABORTED && revoked_ ? closedStatus() : st;
    }
    case RunPath::Queued:
      break;
  }
  // The last blocking call's tracker, unless something still holds it
  // (the engine lets go when the op finishes).
  if (nowTracker_ && nowTracker_.use_count() == 1 && nowTracker_->pending.load() == 0) {
    nowTracker_->status = Status();
  } else {
    nowTracker_ = std::make_shared<OpTracker>();
  }
  std::shared_ptr<OpTracker> tracker = nowTracker_;
  WEFT_RETURN_IF_ERROR(enqueue(args, dt, send, recv, tracker, false, callNs));
  return waitFor(tracker, &lk);
}

// Schedules depend only on the call's shape, the algorithm and the chunk
// (rank, size and ring order are the comm's): a training loop that issues
// the same collectives every step copies them instead of building them
// again (a small allreduce's schedule took about a tenth of its engine
// work), and share them (Op::shared) instead of copying them (a tenth of
// the rest). So do the op's tag bits, lengths and record description,
// which also depend on the datatype. Eight entries, replaced round-robin;
// the last one found is looked at first. An op in flight keeps its
// schedule alive.
const Comm::ShapeEntry* Comm::cachedShape(const CollArgs& a, weft_datatype_t dt, Algo algo,
                                          size_t chunk) {
  auto same = [&](const ShapeEntry& e) {
    return e.dt == dt && e.algo == algo && e.chunk == chunk && sameShape(e.args, a);
  };
  if (shapeHit_ < shapes_.size() && same(shapes_[shapeHit_])) return &shapes_[shapeHit_];
  for (size_t i = 0; i < shapes_.size(); ++i)
    if (same(shapes_[i])) {
      shapeHit_ = i;
      return &shapes_[i];
    }
  return nullptr;
}

const Comm::ShapeEntry& Comm::cacheShape(ShapeEntry e) {
  constexpr size_t kEntries = 8;
  if (shapes_.size() < kEntries) {
    shapeHit_ = shapes_.size();
    shapes_.push_back(std::move(e));
  } else {
    shapeHit_ = shapeNext_;
    shapes_[shapeNext_] = std::move(e);
    shapeNext_ = (shapeNext_ + 1) % kEntries;
  }
  return shapes_[shapeHit_];
}

Status Comm::enqueue(const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                     const std::shared_ptr<OpTracker>& tracker, bool stageSend, uint64_t callNs,
                     uint32_t fusedCalls) {
  std::unique_ptr<Op> op = engine_->newOp();
  Choice choice = chooseAlgo(args);
  if (choice.algo == Algo::Shm && keepOffArena(*tracker)) choice.algo = Algo::Auto;
  WEFT_RETURN_IF_ERROR(fillOp(*op, args, dt, send, recv, choice, stageSend, callNs));
  op->rec.fusedCalls = fusedCalls;
  op->tracker = tracker;
  tracker->pending++;
  engine_->enqueue(std::move(op));
  return Status();
}

Status Comm::fillOp(Op& op, const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                    const Choice& choice, bool stageSend, uint64_t callNs) {
  op.args = args;
  op.dtype = dt;
  op.seq = args.type != CollType::Send && args.type != CollType::Recv ? ++collSeq_ : 0;
  if (choice.algo == Algo::Shm) {
    Status ps;
    std::shared_ptr<const ArenaPlan> keep;
    const ArenaPlan* plan = arenaPlan(args, dt, &ps, &keep);
    if (!plan) {
      --collSeq_;
      return ps;
    }
    ArenaOp* ao = new ArenaOp(arena_, *plan, args, dt, send, recv, op.seq);
    ao->keepPlan(std::move(keep));
    op.runner.reset(ao);
    op.sched.algorithm = "shm";
    if (tel()) ao->setTelemetry(tel(), &op.rec, shmTx_);
    op.tag = opTag(args, dt, op.seq);
    op.send = static_cast<uint8_t*>(const_cast<void*>(send));
    op.recv = static_cast<uint8_t*>(recv);
    op.sendLen = sendBytes(args, nranks_, rank_);
    op.recvLen = recvBytes(args, nranks_, rank_);
    if (tel()) startRecord(op.rec, args, dt, op.seq, algoName(Algo::Shm), callNs);
  } else {
    const size_t chunk = cfg_.chunkBytes ? cfg_.chunkBytes : choice.chunkBytes;
    const ShapeEntry* e = cachedShape(args, dt, choice.algo, chunk);
    if (!e) {
      ShapeEntry n;
      n.args = args;
      n.dt = dt;
      n.algo = choice.algo;
      n.chunk = chunk;
      BuildParams p;
      p.rank = rank_;
      p.nranks = nranks_;
      p.chunkBytes = chunk;
      p.slots = 4;
      p.algo = choice.algo;
      if (choice.algo == Algo::Hierarchical) p.hosts = hostIds_;
      Schedule built;
      Status bs = topo::buildScheduleInRingOrder(topo_, args, p, &built);
      if (bs.isError()) {
        if (op.seq) --collSeq_;
        return bs;
      }
      n.sched = std::make_shared<Schedule>(std::move(built));
      n.tag0 = opTag(args, dt, 0);
      n.sendLen = sendBytes(args, nranks_, rank_);
      n.recvLen = recvBytes(args, nranks_, rank_);
      if (tel_)
        describeRecord(n.rec, args, dt,
                       algoName(choice.algo == Algo::Auto ? defaultAlgo(args.type) : choice.algo));
      e = &cacheShape(std::move(n));
    }
    if (op.shared != e->sched) op.shared = e->sched;
    op.tag = opTagWithSeq(e->tag0, op.seq);
    op.send = static_cast<uint8_t*>(const_cast<void*>(send));
    op.recv = static_cast<uint8_t*>(recv);
    op.sendLen = e->sendLen;
    op.recvLen = e->recvLen;
    if (telemetry::Telemetry* t = tel()) {
      copyDescription(e->rec, &op.rec);
      op.rec.seq = op.seq;
      t->begin(op.rec, callNs ? callNs : nowNs());
    }
  }
  if (stageSend && op.sendLen) {
    op.staged.assign(op.send, op.send + op.sendLen);
    op.send = op.staged.data();
  }
  op.enqueueNs = callNs;
  WEFT_TRACE(kColl, "rank %d: %s algorithm %s, %zu steps", rank_, op.describe().c_str(),
             op.schedule().algorithm, op.schedule().steps.size());
  return Status();
}

size_t Comm::releaseSpareMemory() {
  std::lock_guard<Mutex> lk(mu);
  return (engine_ ? engine_->releaseSpareScratch() : 0) + fusionPool_->release();
}

size_t Comm::spareMemoryBytes(bool device) {
  std::lock_guard<Mutex> lk(mu);
  return (engine_ ? engine_->spareScratchBytes(device) : 0) +
         (device ? 0 : fusionPool_->spareBytes());
}

bool Comm::progressOnce() {
  std::lock_guard<Mutex> lk(mu);
  return engine_ && engine_->progress();
}

Status Comm::waitFor(const std::shared_ptr<OpTracker>& tracker, std::unique_lock<Mutex>* held) {
  std::unique_lock<Mutex> lk(mu, std::defer_lock);
  if (held) lk = std::move(*held);
  Engine::Drive d;
  d.done = [&tracker] { return tracker->pending == 0; };
  d.cancel = &closed_;
  d.lock = &lk;
  if (engine_->drive(d) == Engine::DriveEnd::kCancelled) return closedStatus();
  return tracker->result();
}

void Comm::kickProgressThread() {
  std::lock_guard<Mutex> lk(mu);
  if (!progressThread_.joinable() && !stopThread_)
    progressThread_ = std::thread([this] { progressLoop(); });
  progressCv_.notify_one();
}

void Comm::progressLoop() {
  std::unique_lock<Mutex> lk(mu);
  useDeviceOnThisThread();
  Engine::Drive d;
  d.done = [this] { return stopThread_ || !engine_->busy(); };
  d.maxSleepUs = 200;
  d.lock = &lk;
  while (!stopThread_) {
    if (!engine_ || !engine_->busy()) {
      progressCv_.wait_for(lk, std::chrono::milliseconds(100));
      continue;
    }
    engine_->drive(d);
  }
}

Status Comm::asyncError() {
  // The polling call of watchdog threads: it must not wait behind another
  // thread's blocking call (which holds the lock until it ends, perhaps
  // until its timeout). A lock held for more than a moment means an op is
  // running there: in progress.
  std::unique_lock<Mutex> lk(mu, std::try_to_lock);
  for (int i = 0; !lk.owns_lock(); ++i) {
    if (closed_) return closedStatus();
    if (i >= 200) return Status::inProgress();
    std::this_thread::sleep_for(std::chrono::microseconds(5));
    lk.try_lock();
  }
  if (closed_) return closedStatus();
  if (engine_) engine_->progress();
  if (!engine_) return Status();
  if (engine_->error().isError()) return engine_->error();
  if (engine_->busy()) return Status::inProgress();
  return Status();
}

Status Comm::finalize() {
  Status result;
  if (engine_) {
    const Deadline dl(cfg_.timeoutS);
    std::unique_lock<Mutex> lk(mu, std::defer_lock);
    Engine::Drive d;
    d.done = [this] { return !engine_->busy(); };
    d.deadline = &dl;
    d.lock = &lk;
    if (engine_->drive(d) == Engine::DriveEnd::kExpired)
      result = Status(WEFT_ERR_TIMEOUT, "destroy: pending operations did not finish");
  }
  abort();
  return result;
}

void Comm::abort() {
  aborting_ = true;
  {
    std::lock_guard<Mutex> lk(mu);
    stopThread_ = true;
    if (engine_ && engine_->busy())
      engine_->fail(Status(WEFT_ERR_ABORTED, "communicator was aborted"));
    for (auto& t : transports_) t->shutdown();
    if (devTransport_) devTransport_->shutdown();
    if (boot_) boot_->shutdown();
    for (agree::Early& e : early_) net::closeFd(&e.fd);
    early_.clear();
    closed_ = true;
    progressCv_.notify_all();
  }
  if (progressThread_.joinable() && progressThread_.get_id() != std::this_thread::get_id())
    progressThread_.join();
}

Comm::~Comm() {
  abort();
  engine_.reset();
  eps_.clear();
  transports_.clear();
  devEps_.clear();
  devTransport_.reset();
}

}  // namespace weft
