// The progress engine: the only code that executes schedules. It keeps the
// communicator's operations in issue order and advances all of them:
//
//  * a step runs when its dependencies are done; sends to a peer (and
//    receives from a peer) are posted in schedule order across all ops, which
//    is what the transports' in-order matching needs;
//  * local steps (copy, reduce, divide) run inline on the host executor,
//    or, with a LocalWork backend (exec/local_work.h: GPU kernels, or the
//    tests' worker thread), are submitted and stay pending (kLocal) until
//    the backend says they are done;
//  * each op's transfers go to the host endpoints or, for stream-ordered
//    ops of a one-host comm with CUDA IPC, to the cuda_ipc ones, with the
//    MemType exec/placement.h decides;
//  * a receive-reduce reduces as soon as its data has arrived, while later
//    chunks are still on the wire: that is the pipeline;
//  * nothing moving for Config::timeoutS fails every op with
//    WEFT_ERR_TIMEOUT naming the peers it waits for; after a second without
//    progress the engine asks the transports whether those peers are alive.
//
// A blocking call on an idle engine skips the queue: runAlone advances its
// one op with the same steps, polls, waits and checks, on the caller's
// thread.
//
// Whoever waits for the engine (a blocking call, the comm's progress
// thread, destroy, runAlone) runs one loop, drive(): rounds until the
// caller's condition holds, idle waits between them, the lock let go for
// those waits when the caller has one to let go.
//
// A failure breaks the in-order matching with every peer, so it is sticky:
// all pending and later ops fail with the first error until the
// communicator is destroyed or aborted.
#pragma once

#include <poll.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/mutex.h"
#include "exec/local_work.h"
#include "exec/op.h"
#include "exec/placement.h"
#include "telemetry/telemetry.h"
#include "transports/transport.h"

namespace weft {

class Engine {
 public:
  // eps[peer] is the endpoint for each rank (this rank's own included);
  // owners[peer] the transport that made it.
  Engine(int rank, int nranks, const Config& cfg, std::vector<Endpoint*> eps,
         std::vector<Transport*> owners, std::vector<Transport*> transports,
         std::vector<PeerInfo> peers);
  ~Engine();

  // Takes an op whose schedule and buffers are set; it starts on the next
  // progress(). Fails it at once when the engine is in error.
  void enqueue(std::unique_ptr<Op> op);
  // An Op to fill and enqueue: a recycled one when the engine has one.
  std::unique_ptr<Op> newOp();
  // Advances transports and ops without blocking; true when anything moved.
  bool progress();
  // Waits a little when idle (idleRounds: progress() calls in a row that
  // moved nothing): spins for WEFT_SPIN_US, then sleeps on a transport's
  // doorbell or poll fd for at most `maxUs`. In two halves for a thread that
  // sleeps without the comm's lock (Comm::waitFor): prepareIdle() under the
  // lock decides (and arms a doorbell), sleepIdle() after it, without the
  // lock, touches nothing that progress(), fail() or another thread's
  // prepareIdle() change. idleWait() is both, for a caller holding the lock
  // throughout or running the engine alone.
  struct IdleWait {
    enum Kind : uint8_t { kNone, kRelax, kYield, kDoorbell, kNap, kPoll } kind = kNone;
    int us = 0;                 // kDoorbell, kNap, kPoll: at most this long
    Transport* bell = nullptr;  // kDoorbell: the transport armed
    uint64_t token = 0;         // ... and what its armSleep() left
  };
  IdleWait prepareIdle(int idleRounds, int maxUs = 1000);
  void sleepIdle(const IdleWait& w) const;
  void idleWait(int idleRounds, int maxUs = 1000) { sleepIdle(prepareIdle(idleRounds, maxUs)); }
  bool busy() const { return !ops_.empty() || alone_; }
  // What drive() runs until, and how it waits.
  struct Drive {
    // The caller's wait is over: checked under the lock before and after
    // every round.
    std::function<bool()> done;
    // Set (by a thread that does not hold the lock): the drive ends before
    // the next round.
    const std::atomic<bool>* cancel = nullptr;
    // Passed after a round: the drive ends. The engine's own stall timeout
    // (Config::timeoutS) fails the ops regardless.
    const Deadline* deadline = nullptr;
    int maxSleepUs = 1000;  // the idle wait's longest sleep (prepareIdle's maxUs)
    // The comm's lock, held or not at the start: taken before every round,
    // and after every round let go for the wait (prepareIdle under it,
    // sleepIdle without it), so that other threads get it between rounds
    // even while ops move. nullptr: the caller holds the lock throughout (or
    // runs the engine alone) and only idle rounds wait.
    std::unique_lock<Mutex>* lock = nullptr;
  };
  enum class DriveEnd { kDone, kCancelled, kExpired };
  // Rounds of progress() (of runAlone's op while it runs) until d.done(),
  // d.cancel or d.deadline; returns which, with d.lock held.
  DriveEnd drive(const Drive& d);
  // Frees the scratch kept for later ops (the spare pool and the recycled
  // ops' small buffers; a GPU backend's go back to its cache) and returns
  // the bytes let go. Nothing while ops are in flight (returns 0).
  size_t releaseSpareScratch();
  // Bytes of scratch kept for later ops: a GPU backend's (`device`) or host.
  size_t spareScratchBytes(bool device) const;
  // How long an op may go without progress from now on (Comm::setTimeout).
  void setTimeout(double timeoutS) { cfg_.timeoutS = timeoutS; }
  // A blocking call may run alone (runAlone): nothing in flight, no error,
  // and local steps run on the host.
  bool canRunAlone() const { return ops_.empty() && !alone_ && error_.isOk() && !local_; }
  // The engine's op for runAlone, cleared of the last run, its schedule and
  // small scratch kept; the caller fills it as for enqueue.
  Op& aloneOp();
  // Runs `op` (aloneOp(), filled) to its end on the calling thread, which
  // holds the communicator's lock throughout, as a blocking arena op does:
  // the same steps, polls, waits, stall checks and timeouts as progress(),
  // without the queue and its bookkeeping, a large share of a small blocking
  // call's instructions (figures: docs/performance.md, "The engine's
  // figures"). `aborting` (set before abort takes the lock) fails it.
  // Returns the op's status.
  Status runAlone(Op& op, const std::atomic<bool>& aborting);
  // The sticky error (ok while healthy).
  const Status& error() const { return error_; }
  // Fails everything with `st` (abort, or an error found outside the engine).
  // A lost peer (REMOTE) is explained by the peers' notices
  // (PeerHooks::explainLoss), unless `st` comes from them already.
  void fail(const Status& st, bool fromNotices = false);
  // The peers the stall checks blamed for a failure (a dead transport, no
  // progress for the timeout), with why: weft_comm_failed_ranks.
  const std::vector<std::pair<int, std::string>>& blamed() const { return blamed_; }
  // What the communicator knows of its peers beyond the transports: the
  // notices they send to its bootstrap socket (api/comm_elastic.cc).
  struct PeerHooks {
    // Asked once a second while ops make no progress (with checkPeer), with
    // the ranks the oldest op waits for: an error fails them (a peer
    // revoked, or reported ranks stuck).
    std::function<Status(const std::vector<int>&)> check;
    // This rank is about to fail with a timeout waiting for these ranks:
    // returns whom to blame (the ranks they wait for in turn, when a peer's
    // notice says so) after telling the others.
    std::function<std::vector<int>(const std::vector<int>&)> timingOut;
    // A peer was lost (REMOTE): the error with what the peers' notices say
    // about who is stuck, or as it is; `waiting`: the ranks the oldest op
    // waits for (empty when this rank itself had not run for a while).
    std::function<Status(const Status&, const std::vector<int>&)> explainLoss;
  };
  void setPeerHooks(PeerHooks hooks) { hooks_ = std::move(hooks); }
  // The oldest unfinished op and the peers it waits for (up to 8; nullptr
  // when none is unfinished).
  const Op* waitingFor(std::vector<int>* waiting) const;
  // Owner of rank p's host endpoint (nullptr: none, or this rank).
  Transport* ownerOf(int p) const {
    return p >= 0 && static_cast<size_t>(p) < owners_.size() ? owners_[p] : nullptr;
  }
  // Runs local steps on `lw` from the next op on (nullptr: on the host,
  // synchronously); `streamOps` for the stream-ordered ops (whose tracker
  // has a gate; their buffers are device-reachable), `lw` for the others.
  // Only while no op is in flight.
  void setLocalWork(std::unique_ptr<LocalWork> lw) { local_ = std::move(lw); }
  void setStreamLocalWork(std::unique_ptr<LocalWork> streamOps) {
    streamLocal_ = std::move(streamOps);
  }
  // The cuda_ipc transport of a one-host communicator (nullptr when none),
  // its endpoints by rank (nullptr for this rank and unreached ones), and
  // the GPU backend of direct device ops (device scratch). Progressed with
  // the others; used per op as exec/placement.h decides. Before any op.
  void setDeviceTransport(Transport* t, std::vector<Endpoint*> eps,
                          std::unique_ptr<LocalWork> deviceLocal);
  bool hasDeviceLocal() const { return deviceLocal_ != nullptr; }
  // Records ops into `tel` (nullptr: not at all); peerTransport[p] is the
  // telemetry index of the transport that serves peer p.
  void setTelemetry(telemetry::Telemetry* tel, std::vector<int> peerTransport) {
    tel_ = tel;
    peerTx_ = std::move(peerTransport);
  }

 private:
  // The queue (engine.cc).
  // Decides where `op` runs (exec/placement.h's placeOp): its endpoint set,
  // MemType and local-work backend; an error when it cannot run here.
  Status place(Op& op);
  void finishOp(Op& op, const Status& st);
  // One pass over the queued ops in order: gates, runners, and every op's
  // steps. True if anything moved; stops early on an error (error_ set).
  bool passOverOps();
  // A new pass over the steps: peers marked blocked (sendGen_, recvGen_) in
  // earlier passes are free again.
  void nextGen();
  // One poll of every transport; false after an error (error_ set).
  // *active: bytes moved without completing anything.
  bool pollTransports(bool* active);
  // The round's poll, skipped when `allDone`: the round's pass before it
  // finished everything in flight (sends the transports took at once,
  // receives their buffered bytes satisfied). A broadcast root, or a rank
  // whose data arrived with an earlier read, then makes no system call for
  // the op; the next round polls. Every 32nd such round still polls: a rank
  // that only ever sends keeps hearing of its peers (hangups, a transport's
  // own messages). False after an error.
  bool pollUnlessDone(bool allDone, bool* active);
  // Some op in ops_ moves its data through cuda_ipc, whose copies finish on
  // the GPU and ring no doorbell.
  bool deviceOpsInFlight() const;

  // One op's steps (op_steps.cc).
  // Advances `op`'s steps in schedule order within this pass (gen_), at
  // most *budget of them; true if anything moved.
  bool advanceOp(Op& op, size_t* budget);
  bool runStep(Op& op, size_t i);
  void stepDone(Op& op, size_t i);
  // A receive of `op` completed with `c` (first byte, arrival stamp).
  void noteRecv(Op& op, const Completion& c);
  // Local work of step i, timed when telemetry is on. True when done now;
  // false when handed to op.lw (or *st is an error).
  bool reduceStep(Op& op, size_t i, Status* st);
  const void* const* foldSources(Op& op, const Step& s);
  bool copyStep(Op& op, size_t i, Status* st);
  bool submitted(Op& op, size_t i, const Status& st, uint64_t ticket, Status* out);
  // A kLocal step: true when its work finished (*st: the backend's error).
  bool localDone(Op& op, size_t i, Status* st);
  uint8_t* bind(Op& op, BufRef ref) const;
  // Compressed ops (CollArgs::wire; wire_steps.cc): step i's wire bytes in
  // scratch; the send's narrowing (returns the bytes to post); a receive's
  // widening into its destination.
  uint8_t* wireAt(Op& op, size_t i) const {
    return op.scratch.get() + op.schedule().wireOff[i];
  }
  const uint8_t* narrowForSend(Op& op, size_t i);
  void widenRecv(Op& op, size_t i);

  // The end of a round: the clock for idleWait, and the stall checks
  // (stall_check.cc).
  void endRound(bool moved, bool active);
  void checkStalled(uint64_t now);
  void checkBeforeStart(const Op& op);

  // One round of runAlone's op, as progress() is one of the queue's: the
  // first posts its ready steps before any poll, the others poll first
  // (drive.cc).
  bool aloneRound();

  // Memory kept between ops (scratch_pool.cc). Scratch buffers are reused
  // across ops (no allocation, no zeroing per op).
  Status takeScratch(Op& op);
  // Hands op.scratch (allocated by `from`; nullptr: host) to the pool
  // (kSpareScratch, kSpareBytes).
  void giveBackScratch(Op& op, const LocalWork* from);
  // The same for host scratch, and op.scratch is empty after.
  void dropScratch(Op& op);
  // Gives back its scratch and keeps it (reset) for newOp, or frees it.
  void recycle(std::unique_ptr<Op>& op);

  // How many steps one round looks at, over all ops: bounds the cost of a
  // round, and the engine stops there so that sends are still posted in
  // order.
  static constexpr size_t kScanBudget = 4096;

  // This rank, its peers, and what reaches them.
  int rank_, nranks_;
  Config cfg_;
  Routes routes_;                       // the host and cuda_ipc endpoints by rank
  std::vector<Transport*> owners_;      // by rank: the transport of its host endpoint
  std::vector<Transport*> transports_;  // every one, polled each round
  std::vector<PeerInfo> peers_;

  // The ops: queued in issue order, or runAlone's; the sticky error.
  std::deque<std::unique_ptr<Op>> ops_;
  std::unique_ptr<Op> aloneOp_;  // runAlone's op, kept between calls
  Op* alone_ = nullptr;          // ... while it runs
  Status error_;
  std::vector<std::pair<int, std::string>> blamed_;  // blamed()
  PeerHooks hooks_;                                  // setPeerHooks()

  // The rounds (progress(), aloneRound()).
  // By peer: the pass (gen_) that found its next send / receive blocked.
  std::vector<uint32_t> sendGen_, recvGen_;
  uint32_t gen_ = 0;
  bool fresh_ = false;         // ops to post before the next round's poll (enqueue, runAlone)
  int unpolled_ = 0;           // rounds in a row that skipped the transports' poll
  uint64_t lastActivity_ = 0;  // the transports' activity() summed, at the last poll
  // The clock as finishOp read it in this round (0: not read).
  uint64_t roundClockNs_ = 0;
  // WEFT_TEST_THROTTLE_MBPS (test builds): sends wait until this time, which
  // each send pushes on by its bytes at that rate.
  uint64_t throttleNextNs_ = 0;
  std::vector<const void*> foldSrcs_;  // foldSources' answer

  // The round's clock and the stall checks (stall_check.cc).
  int idleCalls_ = 0;                   // rounds since the clock was last read
  std::atomic<uint64_t> lastNowNs_{0};  // the clock at the end of the last round
  uint64_t lastProgressNs_ = 0;
  uint64_t selfGapNs_ = 0;  // the longest gap between progress, since the engine last idled
  uint64_t lastLivenessNs_ = 0;  // the transports were last asked about peers

  // The idle wait (idle_wait.cc).
  SpinBudget spin_;
  uint64_t idleSinceNs_ = 0;       // the clock when this idle period began
  uint64_t lastIdleNs_ = 0;        // ... at the last prepareIdle()
  bool oversubscribed_ = false;    // more ranks on this host than cores
  bool doorbells_ = false;         // a transport can wake this rank from sleepArmed()
  std::vector<::pollfd> pollFds_;  // set at construction; sleepIdle() polls a copy

  // Memory kept between ops (scratch_pool.cc).
  struct Spare {
    size_t len;
    ScratchPtr buf;
    const LocalWork* from;  // the backend that allocated it (nullptr: host)
  };
  // The pool keeps what the ops in flight together used (a group of
  // hundreds of calls takes as many buffers; freed, their pages go back to
  // the system and the next group faults them in again), up to
  // kSpareBytes and kSpareScratch buffers; past that, the largest stay.
  static constexpr size_t kSpareScratch = 256;
  static constexpr size_t kSpareBytes = size_t{64} << 20;
  // Finished ops kept for newOp(), and the host scratch up to kKeepScratch
  // that stays with each (recycle).
  static constexpr size_t kFreeOps = 256;
  static constexpr size_t kKeepScratch = 64 << 10;
  std::vector<Spare> spare_;
  size_t spareBytes_ = 0;  // spare_'s lengths summed
  std::vector<std::unique_ptr<Op>> freeOps_;  // finished ops, for newOp()

  // Local work on a backend (nullptr: host, inline), the steps it has in
  // flight, and the transfers in flight (for the overlap count).
  std::unique_ptr<LocalWork> local_, streamLocal_, deviceLocal_;
  size_t localPending_ = 0;
  size_t xfersInFlight_ = 0;

  telemetry::Telemetry* tel_ = nullptr;
  std::vector<int> peerTx_;
};

}  // namespace weft
