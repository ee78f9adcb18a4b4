// The shm transport: ranks of one host exchange messages through FIFOs in
// POSIX shared memory (shm_segment.h, shm_peer.h).
//
// Setup: localAddress() creates, as receiver, one FIFO from every other rank
// of this host. connect() opens, as sender, the FIFO that each peer created
// for us and raises its `attached` flag; it then waits (bounded by the
// bootstrap timeout) until every peer has attached to our FIFOs and unlinks
// each as soon as it is, so no name survives connect() (or the transport, on
// failure): the handshake of transports/base/segment_attach.h. Peer death is
// seen by checkPeer() through a pidfd.
#include <unistd.h>

#include <memory>

#include "core/log.h"
#include "transports/base/blob.h"
#include "transports/base/posted_ops.h"
#include "transports/base/segment_attach.h"
#include "transports/shm/arena.h"
#include "transports/shm/shm_peer.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_wire.h"
#include "transports/transport.h"

namespace weft {
namespace shm {
namespace {

using ShmEndpoint = ForwardingEndpoint<std::shared_ptr<ShmPeer>>;

class ShmTransport : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx)
      : ctx_(ctx),
        hostHash_(static_cast<size_t>(ctx.rank) < ctx.peers.size() ? ctx.peers[ctx.rank].hostHash
                                                                   : 0) {}
  ~ShmTransport() override { shutdown(); }

  const char* name() const override { return "shm"; }
  bool canReach(const PeerInfo& peer) const override {
    return peer.rank != ctx_.rank && peer.hostHash == hostHash_;
  }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::IntraHost;
    c.hostArena = true;
    size_t half = ctx_.config.shmSlots > 1 ? static_cast<size_t>(ctx_.config.shmSlots) / 2 : 1;
    c.preferredChunk = ctx_.config.shmSlotBytes * half;
    c.bandwidthGBs = 4.0;  // two copies per byte (into a slot, out of it)
    c.latencyUs = 0.5;
    c.doorbell = arena_ != nullptr;
    return c;
  }

  Status localAddress(std::string* blob) override {
    if (addressed_) return invalidUsage("shm transport: localAddress() called twice");
    addressed_ = true;
    if (ctx_.config.shmSlots < 1 || ctx_.config.shmSlotBytes < 1)
      return invalidArgument("shm transport: WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES must be > 0");
    incoming_.resize(ctx_.nranks);
    int local = 0;
    for (const PeerInfo& p : ctx_.peers) {
      if (p.rank < 0 || p.rank >= ctx_.nranks || !canReach(p)) continue;
      auto seg = std::make_unique<Segment>();
      WEFT_RETURN_IF_ERROR(
          seg->create(segmentName(ctx_.key, p.rank, ctx_.rank), p.rank, ctx_.rank,
                      static_cast<uint32_t>(ctx_.config.shmSlots), ctx_.config.shmSlotBytes));
      incoming_[p.rank] = std::move(seg);
      ++local;
    }
    // Every other rank on this host: this rank's block of the arena.
    if (ctx_.config.shmArenaChunk > 0 && local == ctx_.nranks - 1 && ctx_.nranks > 1) {
      myBlock_ = std::make_unique<Segment>();
      WEFT_RETURN_IF_ERROR(myBlock_->create(
          segmentName(ctx_.key, ctx_.rank, ctx_.rank), ctx_.rank, ctx_.rank,
          static_cast<uint32_t>(Arena::kBlockSlots), ctx_.config.shmArenaChunk));
    }
    BlobWriter(blob).put(Blob{kBlobMagic, static_cast<int32_t>(getpid()), hostHash_});
    return Status::ok();
  }

  Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override {
    Status st = connectImpl(peers, blobs, eps);
    if (!st.isOk()) WEFT_WARN(kTransport, "%s", st.message().c_str());
    // Whatever happened, no FIFO of ours may stay visible in /dev/shm.
    for (auto& seg : incoming_)
      if (seg) seg->close();
    incoming_.clear();
    if (myBlock_) myBlock_->unlink();
    if (!st.isOk()) {
      arena_.reset();
      blocks_.clear();
      myBlock_.reset();
    }
    return st;
  }

  Arena* arena() override { return arena_.get(); }
  void stopped(StopCause cause) override {
    const uint32_t mark = cause == StopCause::Mismatch ? kClosedMismatch : kClosedRevoked;
    if (arena_)
      arena_->markFailed(mark);
    else if (myBlock_ && myBlock_->header())
      myBlock_->header()->closed.store(mark, std::memory_order_release);
  }

  Arm armSleep(uint64_t* token) override {
    if (!arena_) return Arm::kNoDoorbell;
    uint32_t bell = 0;
    const bool armed = arena_->armSleep(
        [this] {
          for (ShmPeer* ch : active_)
            if (ch->hasNews()) return true;
          return false;
        },
        &bell);
    *token = bell;
    return armed ? Arm::kArmed : Arm::kNews;
  }
  void sleepArmed(uint64_t token, int maxUs) override {
    arena_->sleepArmed(static_cast<uint32_t>(token), maxUs);
  }

  Status progress() override {
    Status first;
    for (ShmPeer* ch : active_) {
      const uint64_t before = ch->slotsMoved();
      Status st = ch->progress();
      activity_ += ch->slotsMoved() - before;
      if (st.isError() && first.isOk()) first = st;
    }
    return first;
  }
  uint64_t activity() const override { return activity_; }

  Status checkPeer(int peer) override {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer])
      return Status::ok();
    ShmPeer& ch = *peers_[peer];
    if (!ch.failed().isOk()) return ch.failed();
    // A peer that stopped at a mismatch it found in the arena says so, even
    // once its process has exited.
    if (arena_ && arena_->stoppedEarly(peer))
      return ch.fail(Status(WEFT_ERR_REMOTE, describe(peer) + " " + arena_->whyGone(peer)));
    if (watches_[peer] && watches_[peer]->exited())
      return ch.fail(Status(WEFT_ERR_REMOTE, describe(peer) + " exited"));
    if (ch.peerLeft())
      return ch.fail(Status(WEFT_ERR_REMOTE,
                            describe(peer) + " ended its communicator (abort or destroy)"));
    return Status::ok();
  }

  // Drops pending operations and unlinks every name now; the mappings stay
  // until the transport is destroyed, since another thread of the comm may
  // still be sleeping on the arena's doorbell.
  void shutdown() override {
    // Peers waiting for this rank learn it left (checkPeer, Arena::wait),
    // whether or not its process lives on; their sleepers are woken to look.
    if (myBlock_ && myBlock_->header()) {
      // (Keeping a mismatch or revoke marker: peers should learn the cause.)
      uint32_t open = 0;
      myBlock_->header()->closed.compare_exchange_strong(open, kClosedEnded,
                                                         std::memory_order_acq_rel);
      if (arena_)
        for (int r = 0; r < ctx_.nranks; ++r)
          if (r != ctx_.rank) arena_->wakeIfSleeping(r);
    }
    for (auto& ch : peers_)
      if (ch) ch->abort();
    for (auto& seg : incoming_)
      if (seg) seg->close();
    for (auto& b : blocks_)
      if (b) b->unlink();
    if (myBlock_) myBlock_->unlink();
    if (arena_) arena_->wakeSelf();
  }

 private:
  uint64_t activity_ = 0;  // slots pushed and pulled (activity())
  std::string describe(int p) const {
    int pid = watches_.size() > static_cast<size_t>(p) && watches_[p] ? watches_[p]->pid() : 0;
    const std::string& host =
        static_cast<size_t>(p) < ctx_.peers.size() ? ctx_.peers[p].hostname : std::string();
    return describePeer(p, pid, host);
  }

  Status connectImpl(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                     std::vector<std::unique_ptr<Endpoint>>* eps);
  Status waitHandshake(const std::vector<int>& peers, std::vector<std::unique_ptr<Segment>>* out);

  TransportContext ctx_;
  uint64_t hostHash_;
  bool addressed_ = false;
  bool connected_ = false;
  std::vector<std::unique_ptr<Segment>> incoming_;     // by sender rank, until connect
  std::vector<std::shared_ptr<ShmPeer>> peers_;        // by peer rank
  std::vector<ShmPeer*> active_;                       // the connected ones
  std::vector<std::unique_ptr<PidWatch>> watches_;     // by peer rank
  std::unique_ptr<Segment> myBlock_;                   // this rank's arena block
  std::vector<std::unique_ptr<Segment>> blocks_;       // the other ranks' blocks
  std::unique_ptr<Arena> arena_;
};

Status ShmTransport::connectImpl(const std::vector<int>& peers,
                                 const std::vector<std::string>& blobs,
                                 std::vector<std::unique_ptr<Endpoint>>* eps) {
  if (!addressed_ || connected_)
    return invalidUsage("shm transport: connect() needs one localAddress() first, once");
  connected_ = true;
  watches_.resize(ctx_.nranks);
  std::vector<bool> wanted(ctx_.nranks, false);
  for (int p : peers) {
    if (p < 0 || p >= ctx_.nranks || p == ctx_.rank || !incoming_[p])
      return invalidArgument(strFormat(
          "shm transport: rank %d cannot reach rank %d (not on this host)", ctx_.rank, p));
    Blob b;
    WEFT_RETURN_IF_ERROR(decodeBlob(blobs, p, hostHash_, &b));
    int pid = static_cast<size_t>(p) < ctx_.peers.size() && ctx_.peers[p].pid > 0
                  ? ctx_.peers[p].pid
                  : b.pid;
    watches_[p] = std::make_unique<PidWatch>();
    watches_[p]->watch(pid);
    wanted[p] = true;
  }
  for (int p = 0; p < ctx_.nranks; ++p) {
    if (!incoming_[p]) continue;
    if (!wanted[p]) {
      incoming_[p].reset();  // not connected through shm: unlink now
      continue;
    }
    WEFT_RETURN_IF_ERROR(incoming_[p]->reserve());
  }
  const bool withArena = myBlock_ && peers.size() == static_cast<size_t>(ctx_.nranks - 1);
  if (withArena) {
    WEFT_RETURN_IF_ERROR(myBlock_->reserve());
    blocks_.resize(ctx_.nranks);
  } else {
    myBlock_.reset();
  }
  std::vector<std::unique_ptr<Segment>> out(ctx_.nranks);
  WEFT_RETURN_IF_ERROR(waitHandshake(peers, &out));
  peers_.resize(ctx_.nranks);
  if (eps->size() < static_cast<size_t>(ctx_.nranks)) eps->resize(ctx_.nranks);
  for (int p : peers) {
    peers_[p] = std::make_shared<ShmPeer>(ctx_.rank, p, describe(p), std::move(out[p]),
                                          std::move(incoming_[p]));
    peers_[p]->setFaults(ctx_.faults);
    (*eps)[p] = std::make_unique<ShmEndpoint>(peers_[p]);
    active_.push_back(peers_[p].get());
  }
  if (withArena) {
    std::vector<Segment*> blocks(ctx_.nranks);
    std::vector<PidWatch*> watches(ctx_.nranks, nullptr);
    std::vector<std::string> names(ctx_.nranks);
    for (int r = 0; r < ctx_.nranks; ++r) {
      blocks[r] = r == ctx_.rank ? myBlock_.get() : blocks_[r].get();
      if (r != ctx_.rank) watches[r] = watches_[r].get();
      names[r] = r == ctx_.rank ? strFormat("rank %d", r) : describe(r);
    }
    arena_ = std::make_unique<Arena>(ctx_.rank, ctx_.nranks, blocks, watches, names,
                                     ctx_.config.spinUs, hostCpus(ctx_.peers, ctx_.rank));
    for (int p : peers) peers_[p]->setWaker(arena_.get());
  }
  WEFT_INFO(kTransport,
            "shm transport: rank %d connected to %zu peers (%d slots of %zu bytes); arena %s",
            ctx_.rank, peers.size(), ctx_.config.shmSlots, ctx_.config.shmSlotBytes,
            arena_ ? strFormat("4 x %zu bytes per rank%s", arena_->chunk(),
                               arena_->oversubscribed() ? ", oversubscribed" : "")
                         .c_str()
                   : "off");
  return Status::ok();
}

// Opens each peer's FIFO to us (and its arena block) and waits until each
// peer opened ours; unlinks ours as soon as its sender is attached, and this
// rank's block once every peer mapped it.
Status ShmTransport::waitHandshake(const std::vector<int>& peers,
                                   std::vector<std::unique_ptr<Segment>>* out) {
  SegmentAttach a("shm", ctx_.rank, ctx_.config.bootstrapTimeoutS);
  for (int p : peers) {
    a.open(p, segmentName(ctx_.key, ctx_.rank, p), ctx_.rank, p, &(*out)[p],
           "its FIFO to us does not exist");
    if (myBlock_)
      a.open(p, segmentName(ctx_.key, p, p), p, p, &blocks_[p],
             "its arena block does not exist", /*count=*/true);
    a.await(p, incoming_[p].get());
  }
  if (myBlock_) a.await(-1, myBlock_.get(), static_cast<uint32_t>(peers.size()));
  return a.run([this](int p) { return watches_[p]->exited(); },
               [this](int p) { return describe(p); });
}

}  // namespace
}  // namespace shm

std::unique_ptr<Transport> makeShmTransport(const TransportContext& ctx) {
  return std::make_unique<shm::ShmTransport>(ctx);
}

}  // namespace weft
