// The communicator: a bootstrap, the transports chosen per peer, their
// endpoints, and the progress engine that runs operations over them.
//
// Threads: one thread drives a comm at a time through the API; the engine is
// also driven by the comm's progress thread while nonblocking requests
// (weft_group_end_async) are pending. `mu` serializes both.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/algo_rules.h"
#include "algo/arena_plan.h"
#include "algo/select.h"
#include "api/fusion.h"
#include "bootstrap/agree.h"
#include "bootstrap/bootstrap.h"
#include "core/mutex.h"
#include "cuda/device_path.h"
#include "exec/engine.h"
#include "telemetry/telemetry.h"
#include "topo/comm_topo.h"
#include "transports/transport.h"
#include "weft.h"

namespace weft {

// Whether `config` is long enough to carry `repro` (comm_repro.cc), and
// the mode a rank asks for: the config's unless DEFAULT, else WEFT_REPRO's
// (0 off, 1 ordered, 2 exact, 0xff a value that is not a mode).
bool configHasRepro(const weft_config_t* config);
// The fusion threshold a rank asks for: the config's fusion_threshold when
// the config has it and it is not 0 (WEFT_FUSION_OFF: 0), else WEFT_FUSION_THRESHOLD's.
size_t fusionRequest(size_t env, const weft_config_t* config);
uint64_t reproRequest(const std::string& env, const weft_config_t* config);
// The same for `wire` (comm_wire.cc): 0 none, 1 bf16, 2 fp16 (Wire's
// values), 0xff a WEFT_WIRE value that is not a format.
bool configHasWire(const weft_config_t* config);
uint64_t wireRequest(const std::string& env, const weft_config_t* config);
// Ops made by weft_op_create_wire (comm_wire.cc): the base op and format
// are in the value itself (base | wire << 8 | kWireOpBase), so a call needs
// no table and no lock to read them.
constexpr int kWireOpBase = 1 << 30;
inline bool isWireOp(int op) { return op >= kWireOpBase; }
// Decodes a wire op; false when `op` is not one weft_op_create_wire makes.
bool decodeWireOp(int op, weft_op_t* base, Wire* wire);

class Comm {
 public:
  // Joins the communicator of `id` (collective over all ranks).
  // `config` (may be NULL, already checked) overrides the environment's.
  static Status create(const weft_unique_id_t& id, int nranks, int rank, std::shared_ptr<Comm>* out,
                       const weft_config_t* config = nullptr);
  ~Comm();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Config& config() const { return cfg_; }
  // The timeout of later calls (weft_comm_set_timeout); takes `mu`.
  void setTimeout(double timeoutS);
  const std::vector<PeerInfo>& peers() const { return peers_; }
  // The reproducibility mode every rank agreed on (WEFT_REPRO, the config).
  Repro repro() const { return repro_; }
  // What a call of (dt, op) runs with: the mode, for an order-sensitive
  // reduction (a float SUM / AVG / PROD / MIN / MAX: kernels/cpu/fold.h);
  // Off otherwise. Only SUM and AVG have an exact form: the others ordered.
  Repro reproFor(weft_datatype_t dt, weft_op_t op) const;
  // A framework's span on this comm's timeline (weft_timeline_span; under
  // mu); nothing when the timeline is off.
  void timelineSpan(const std::string& track, const std::string& name, uint64_t beginNs,
                    uint64_t endNs, const std::vector<std::pair<std::string, std::string>>& args);
  // The wire format every rank agreed on (WEFT_WIRE, the config).
  Wire wire() const { return wire_; }
  // What a call runs with (comm_wire.cc): `asked` (the comm's format, or a
  // per-call op's) for a float32 SUM / AVG allreduce, reduce or
  // reduce_scatter; None for every other call.
  static Wire wireFor(Wire asked, CollType t, weft_datatype_t dt, weft_op_t op);
  // The transport name used for each peer ("self", "shm", "tcp").
  const std::string& transportOf(int peer) const { return transportNames_[peer]; }

  // Builds and enqueues one op (called with `mu` held). `stageSend` copies
  // the send data now, so later receives may overwrite the user's buffer.
  // `callNs`: the call's clock reading (its entry), or 0 to read it now.
  // `fusedCalls`: the op carries that many fused calls (telemetry).
  Status enqueue(const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                 const std::shared_ptr<OpTracker>& tracker, bool stageSend = false,
                 uint64_t callNs = 0, uint32_t fusedCalls = 0);
  // Tensor fusion (fusion.h): the threshold every rank agreed on (the
  // smallest asked for; 0: off), the largest call that fuses, and the comm's
  // fusion buffers.
  size_t fusionThreshold() const { return fusionThreshold_; }
  size_t fusionMaxCall() const {
    // A call is worth fusing while running it alone costs more than copying
    // it in and out of a fusion buffer. The shm arena runs an allreduce of
    // 8 KiB in about that copy's time, sockets within one host (loopback)
    // one of 16 KiB: larger calls ran slower fused than grouped
    // (docs/performance.md, "Tensor fusion"). Across hosts a call's latency
    // (tens of microseconds) outweighs the copies of any call up to the
    // threshold. Every rank sees the same hosts and arena, so the plans
    // stay equal.
    if (arena_ && cfg_.shmArenaChunk) return std::min(fusionThreshold_, kArenaFusionMaxCall);
    if (model_.nhosts <= 1) return std::min(fusionThreshold_, kHostFusionMaxCall);
    return fusionThreshold_;
  }
  static constexpr size_t kArenaFusionMaxCall = 8 << 10;
  static constexpr size_t kHostFusionMaxCall = 16 << 10;
  const std::shared_ptr<FusionPool>& fusionPool() const { return fusionPool_; }
  // Runs one collective outside a group and waits for it, on the path
  // runPathOf chooses.
  Status runNow(const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                uint64_t callNs = 0);
  // One engine step under the lock; true when anything moved.
  bool progressOnce();
  // The engine's spare scratch (Engine::releaseSpareScratch), under the
  // lock: what the NCCL shim's ncclCommSuspend lets go, and its size.
  size_t releaseSpareMemory();
  size_t spareMemoryBytes(bool device);
  // Drives the engine (Engine::drive) until `tracker` has no pending ops,
  // bounded by the engine's own timeout, which fails them. `held`: this
  // thread's lock of mu, taken over (the first round runs without unlocking).
  Status waitFor(const std::shared_ptr<OpTracker>& tracker,
                 std::unique_lock<Mutex>* held = nullptr);
  // Wakes (starting if needed) the background progress thread.
  void kickProgressThread();
  // Finishes pending work (bounded), then closes everything.
  Status finalize();
  // Fails everything with WEFT_ERR_ABORTED and closes sockets and memory now.
  void abort();

  // Fault tolerance (comm_elastic.cc; docs/elastic.md).
  // Fails pending and later calls with WEFT_ERR_REVOKED and tells the peers
  // (Transport::stopped); keeps the bootstrap's socket for shrink.
  void revoke();
  bool revoked() const { return revoked_; }
  // The ranks this rank knows have failed, ascending, with why.
  std::vector<std::pair<int, std::string>> failedRanks();
  // weft_comm_shrink: agrees with the survivors (bootstrap/agree.h) and
  // joins their new comm. `excluded`: by rank, left out by the caller.
  Status shrink(const std::vector<char>& excluded, std::shared_ptr<Comm>* out);
  // The settings a comm made from this one takes (shrink, grow): this
  // comm's timeout and the modes its ranks agreed on.
  weft_config_t childConfig() const;
  // What a call on a closed comm gets: REVOKED after revoke(), else ABORTED.
  Status closedStatus() const;
  // The sticky error, "in progress" while ops run; progresses them once.
  // Never waits long for the lock (weft_comm_get_async_error polls it).
  Status asyncError();
  // The largest block (count x element size) a blocking call runs alone
  // (Engine::runAlone); larger ones go through the queue.
  static constexpr size_t kAloneMaxBytes = 256 << 10;
  // The device path (comm_device.cc): the facts src/cuda/device_path.h
  // decides on, and whether an op must not run on the shm arena.
  void devicePathFacts(cuda::DevicePathFacts* f) const;
  bool keepOffArena(const OpTracker& t) const;
  std::string lastDevicePath;  // the last decision logged (stream_calls.cc), under `mu`

  Mutex mu;
  // The last error of the API calls on this comm, written by whichever
  // thread's call failed (a watchdog's weft_comm_get_async_error beside a
  // blocking call's): under lastErrorMu; weft_get_last_error hands out a
  // per-thread copy.
  std::string lastError;
  std::mutex lastErrorMu;

  // Ops made by weft_op_create_premul_sum (api_premul.cc): op value
  // WEFT_NUM_OPS + index. Under `mu`.
  struct PremulOp {
    bool live = false;
    weft_datatype_t dtype = WEFT_FLOAT32;
    const void* pointer = nullptr;  // WEFT_SCALAR_DEVICE: read at each call
    unsigned char value[8] = {};    // WEFT_SCALAR_HOST_IMMEDIATE: read at creation
  };
  std::vector<PremulOp> premulOps;

 private:
  std::shared_ptr<OpTracker> nowTracker_;  // reused by runNow (under mu)
  Comm() = default;
  Status init(const weft_unique_id_t& id);
  // How runNow runs a call (under mu): Arena, inline on the shm arena on
  // this thread (the chosen algorithm, nothing else pending); Alone,
  // straight through on this thread (Engine::runAlone: nothing pending, a
  // small collective); Queued, through the engine's queue, waited for.
  enum class RunPath { Arena, Alone, Queued };
  RunPath runPathOf(const CollArgs& args) {
    // Anything in flight (or a sticky error): behind it, in issue order.
    if (engine_->busy() || engine_->error().isError()) return RunPath::Queued;
    // chooseAlgo answers Shm only where the arena is up.
    if (chooseAlgo(args).algo == Algo::Shm) return RunPath::Arena;
    // Small ones only, since the lock is held throughout (a watchdog's
    // asyncError() answers "in progress" meanwhile). Not a send or receive:
    // threads may block on those in either order, and one waiting must not
    // keep the other from posting.
    if (engine_->canRunAlone() && args.type != CollType::Send && args.type != CollType::Recv &&
        args.count * args.eltSize <= kAloneMaxBytes)
      return RunPath::Alone;
    return RunPath::Queued;
  }
  Status exchangePeerInfo();
  // Every rank's reproRequest_ equal (comm_repro.cc), else an error naming both.
  Status agreeOnRepro(const std::vector<uint64_t>& requests);
  // Every rank's wireRequest_ equal (comm_wire.cc), else an error naming both.
  Status agreeOnWire(const std::vector<uint64_t>& requests);
  // Rank 0 warns once when WEFT_ALGO names, for a reduction, an algorithm
  // that reproducible calls pass over (comm_repro.cc).
  void noteReproRules() const;
  Status setUpTransports();
  void logInit() const;
  // The algorithm and chunk size for `args` (WEFT_ALGO, else the cost
  // model); remembered per (collective, count, element size).
  const Choice& chooseAlgo(const CollArgs& args) {
    // The last answer first: a loop of one collective then skips the hash.
    if (lastChoice_.type == args.type && lastChoice_.count == args.count &&
        lastChoice_.eltSize == args.eltSize && lastChoice_.repro == args.repro &&
        lastChoice_.wire == args.wire)
      return lastChoice_.choice;
    return chooseAlgoSlow(args);
  }
  const Choice& chooseAlgoSlow(const CollArgs& args);
  // Fills `op` for a call (schedule or arena runner, tag, buffers, record);
  // the caller places it (enqueue, runNow).
  Status fillOp(Op& op, const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
                const Choice& choice, bool stageSend, uint64_t callNs);
  void setUpSelection();
  void progressLoop();
  // Telemetry (comm_telemetry.cc): created after the transports; the board
  // is opened before the init barrier and unlinked after it.
  void setUpTelemetry();
  // The arena's single-copy mode: on only if every rank may read every
  // other's memory and wants it (collective over the bootstrap; comm_arena.cc).
  Status agreeOnSingleCopy();
  // This rank's arena plan for `args` (algo Shm), from the shape cache, or
  // nullptr with *st set when it cannot be built.
  // The last plan first: a loop of one collective then skips the cache.
  const ArenaPlan* arenaPlan(const CollArgs& args, weft_datatype_t dt, Status* st,
                             std::shared_ptr<const ArenaPlan>* keep = nullptr) {
    if (!lastPlan_ || lastPlanDt_ != dt || !sameShape(lastPlanArgs_, args))
      return arenaPlanSlow(args, dt, st, keep);
    if (keep) *keep = lastPlan_;
    return lastPlan_.get();
  }
  const ArenaPlan* arenaPlanSlow(const CollArgs& args, weft_datatype_t dt, Status* st,
                                 std::shared_ptr<const ArenaPlan>* keep);
  std::shared_ptr<const ArenaPlan> lastPlan_;
  CollArgs lastPlanArgs_;
  weft_datatype_t lastPlanDt_ = WEFT_NUM_DATATYPES;
  // The device path at init (comm_device.cc): this rank's offer, published
  // with the transports' addresses; the connection when all offered; the
  // hand-over to the engine.
  Status offerDevice(const TransportContext& ctx, bool ipcAllowed, std::string* offer);
  Status connectDevice(const std::vector<std::string>& blobs, size_t section);
  void attachDevice();
  // The progress thread's CUDA calls go to the comm's device (device path only).
  void useDeviceOnThisThread() const;
  // Fills `r` for a new op and starts its clock (entry).
  void startRecord(telemetry::OpRecord& r, const CollArgs& args, weft_datatype_t dt, uint64_t seq,
                   const char* algo, uint64_t callNs = 0);
  // The same for a blocking arena op: its record opens in the flight
  // recorder's ring (Telemetry::openInRing), what it is copied from the
  // last op of its shape.
  telemetry::OpRecord& openArenaRecord(const CollArgs& args, weft_datatype_t dt, uint64_t seq,
                                       uint64_t callNs);
  // What the op is: type, datatype, op, root, count, bytes, algorithm.
  void describeRecord(telemetry::OpRecord& r, const CollArgs& args, weft_datatype_t dt,
                      const char* algo) const;
  // Copies what describeRecord wrote.
  static void copyDescription(const telemetry::OpRecord& from, telemetry::OpRecord* to);
  telemetry::Telemetry* tel() const { return tel_ && tel_->on() ? tel_.get() : nullptr; }
  // openArenaRecord's last shape.
  CollArgs shapeArgs_;
  weft_datatype_t shapeDt_ = WEFT_NUM_DATATYPES;
  telemetry::OpRecord shapeRec_;

  int rank_ = 0, nranks_ = 1;
  Config cfg_;
  // WEFT_REPRO as this rank read it (reproRequest_: 0 off, 1 ordered, 2
  // exact, 0xff not a mode), then the mode all ranks agreed on.
  uint64_t reproRequest_ = 0;
  Repro repro_ = Repro::Off;
  // WEFT_FUSION_THRESHOLD or the config's, then the smallest of all ranks'.
  size_t fusionThreshold_ = 0;
  std::shared_ptr<FusionPool> fusionPool_ = std::make_shared<FusionPool>();
  // WEFT_WIRE as this rank read it (wireRequest_), then the agreed format.
  uint64_t wireRequest_ = 0;
  Wire wire_ = Wire::None;
  std::unique_ptr<Bootstrap> boot_;
  std::vector<PeerInfo> peers_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<std::string> transportNames_;
  std::unique_ptr<Engine> engine_;
  // The device path: cuda_ipc (a one-host comm whose ranks all offered it),
  // its endpoints by rank, the GPU backend until the engine takes it.
  std::unique_ptr<Transport> devTransport_;
  std::vector<std::unique_ptr<Endpoint>> devEps_;
  std::unique_ptr<LocalWork> devLocal_;
  std::string devWhy_;  // the decision, for the INIT log ("" = never considered)
  bool ipcAllowed_ = false;
  int devDevice_ = -1;           // the device current when the device path was set up
  shm::Arena* arena_ = nullptr;  // all ranks on this host: the shm arena
  std::unique_ptr<telemetry::Telemetry> tel_;
  int shmTx_ = 0;                    // telemetry's index of the shm transport
  std::vector<int64_t> clockDelta_;  // by rank: its realtime - monotonic clock, ns
  CostModel model_;
  topo::CommTopology topo_;   // the View: ring order, path class per peer
  std::vector<int> hostIds_;  // host index of each rank (BuildParams::hosts)
  // What a call's shape (CollArgs, datatype, algorithm, chunk) decides,
  // kept for the next call of that shape (Comm::fillOp), under mu.
  struct ShapeEntry {
    CollArgs args;
    weft_datatype_t dt = WEFT_NUM_DATATYPES;
    Algo algo = Algo::Auto;
    size_t chunk = 0;
    std::shared_ptr<const Schedule> sched;
    std::shared_ptr<const ArenaPlan> plan;  // algo Shm: the arena plan instead
    uint64_t tag0 = 0;                      // opTag with sequence number 0
    size_t sendLen = 0, recvLen = 0;
    telemetry::OpRecord rec;  // what the op is (describeRecord), with telemetry
  };
  std::vector<ShapeEntry> shapes_;
  size_t shapeNext_ = 0;  // replaced next, once full
  size_t shapeHit_ = 0;   // found last
  const ShapeEntry* cachedShape(const CollArgs& a, weft_datatype_t dt, Algo algo, size_t chunk);
  const ShapeEntry& cacheShape(ShapeEntry e);
  AlgoRules rules_;  // WEFT_ALGO
  struct CachedChoice {
    CollType type = CollType::Send;
    size_t count = 0, eltSize = 0;
    Repro repro = Repro::Off;
    Wire wire = Wire::None;
    Choice choice;
  };
  CachedChoice choices_[64];
  CachedChoice lastChoice_;  // the last one chooseAlgo returned
  uint64_t collSeq_ = 0;
  std::atomic<bool> closed_{false};
  std::atomic<bool> aborting_{false};  // set by abort() before it takes `mu`
  std::atomic<bool> revoked_{false};   // set by revoke() before it takes `mu`
  // Fault tolerance: why each rank failed, as this rank learnt it ("" =
  // not known to have failed), under mu; shrinks of this comm so far and
  // the lock that keeps two from running at once.
  std::vector<std::string> failed_;
  void noteFailures();  // under mu: asks the transports and the engine
  // Peers' revoke notices and shrink proposals on the bootstrap socket
  // (agree::takeEarly), kept for the shrink; under mu.
  Status checkRevokedPeers(const std::vector<int>& waiting);
  std::vector<agree::Early> early_;
  // Peers' stuck notices (agree::announceStuck): by sender, the ranks it
  // timed out waiting for; under mu. So that every rank names the rank that
  // is stuck, not one that timed out on it and left (docs/troubleshooting.md).
  std::map<int, std::vector<int>> stuckNotes_;
  int takeNotices();  // agree::takeEarly into early_ and stuckNotes_
  // The ranks at the ends of the notes' chains from `from` (a rank with no
  // note of its own is where a chain ends).
  std::vector<int> followStuck(const std::vector<int>& from) const;
  // The error the notes give (naming the stuck ranks), after `here` if
  // given. Where the chains end at this rank and it waits for `waiting`,
  // they go on from there (timingOut: this rank tells the others).
  Status stuckStatus(const Status* here, const std::vector<int>& waiting);
  std::vector<int> timingOut(const std::vector<int>& waiting);  // Engine::PeerHooks
  Status explainLoss(const Status& st, const std::vector<int>& waiting);  // Engine::PeerHooks
  std::string describeRanks(const std::vector<int>& ranks) const;  // "rank 2 (host, pid 7), ..." 
  uint32_t shrinks_ = 0;
  std::mutex shrinkMu_;

  std::thread progressThread_;
  std::condition_variable_any progressCv_;
  bool stopThread_ = false;
  int asyncPending_ = 0;
};

}  // namespace weft

// The C handle.
struct weft_comm {
  uint64_t magic;
  std::shared_ptr<weft::Comm> impl;
};
