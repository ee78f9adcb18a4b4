// The cuda_ipc transport: ranks of one host exchange device-memory messages
// through FIFOs whose slots are device memory of the receiver, written and
// read by the copy engines (cuda_ipc_peer.h). Several ranks may share one
// GPU (each its own process or thread), which NCCL refuses.
//
// Setup: localAddress() allocates, as receiver, one device FIFO per peer of
// this host and its control segment in /dev/shm, and publishes the FIFOs'
// CUDA IPC handles (and raw addresses, for peers in this very process, which
// cannot open their own process's handles). connect() maps each peer's FIFO
// to us (cudaIpcOpenMemHandle), opens its control segment and raises its
// `attached` flag, then waits (bounded by the bootstrap timeout) until every
// peer attached to ours and unlinks their names (the handshake of
// transports/base/segment_attach.h, as shm's).
//
// Communicators of one host make it next to their host transports when
// every rank offers it (src/api/comm_device.cc); the engine posts their
// stream-ordered ops on it (src/exec/placement.h). Tested on its own in
// tests/transport/cuda_ipc_test.cc.
#include <unistd.h>

#include <cstring>
#include <memory>

#include "core/log.h"
#include "cuda/runtime.h"
#include "transports/base/blob.h"
#include "transports/base/posted_ops.h"
#include "transports/base/segment_attach.h"
#include "transports/cuda_ipc/cuda_ipc_peer.h"
#include "transports/cuda_ipc/cuda_ipc_wire.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace weft {
namespace cuda_ipc {
namespace {

using CudaIpcEndpoint = ForwardingEndpoint<std::shared_ptr<CudaIpcPeer>>;

class CudaIpcTransport : public Transport {
 public:
  explicit CudaIpcTransport(const TransportContext& ctx)
      : ctx_(ctx),
        hostHash_(static_cast<size_t>(ctx.rank) < ctx.peers.size() ? ctx.peers[ctx.rank].hostHash
                                                                   : 0) {}
  ~CudaIpcTransport() override {
    shutdown();
    peers_.clear();
    for (void* p : opened_) cuda::ipcClose(p);
    for (void* p : fifos_) cuda::deviceFree(p);
    cuda::streamDestroy(stream_);
  }

  const char* name() const override { return "cuda_ipc"; }
  bool canReach(const PeerInfo& peer) const override {
    return peer.rank != ctx_.rank && peer.hostHash == hostHash_ && cuda::cudaState().usable;
  }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::IntraHost;
    c.hostMemory = false;
    c.cudaMemory = true;
    c.preferredChunk = slotBytes() * (slots() > 1 ? slots() / 2 : 1);
    c.bandwidthGBs = 100.0;  // two copy-engine copies per byte; a placeholder until measured
    c.latencyUs = 10.0;      // event polling and a copy launch per slot
    c.cpuBound = false;      // the copy engines move the bytes
    return c;
  }

  Status localAddress(std::string* blob) override {
    if (addressed_) return invalidUsage("cuda_ipc transport: localAddress() called twice");
    addressed_ = true;
    const cuda::CudaState cs = cuda::cudaState();
    if (!cs.usable) return Status(WEFT_ERR_CUDA, "cuda_ipc transport: " + cs.why);
    WEFT_RETURN_IF_ERROR(cuda::streamCreate(&stream_));
    BlobHeader h{kBlobMagic, static_cast<int32_t>(getpid()), hostHash_, ctx_.nranks, cs.device};
    std::vector<BlobEntry> entries(static_cast<size_t>(ctx_.nranks));
    memset(entries.data(), 0, entries.size() * sizeof(BlobEntry));
    incoming_.resize(ctx_.nranks);
    inFifo_.assign(ctx_.nranks, nullptr);
    for (const PeerInfo& p : ctx_.peers) {
      if (p.rank < 0 || p.rank >= ctx_.nranks || !canReach(p)) continue;
      void* fifo = nullptr;
      WEFT_RETURN_IF_ERROR(cuda::deviceAlloc(slots() * slotBytes(), &fifo));
      fifos_.push_back(fifo);
      inFifo_[p.rank] = static_cast<char*>(fifo);
      std::string handle;
      WEFT_RETURN_IF_ERROR(cuda::ipcHandle(fifo, &handle));
      memcpy(entries[p.rank].handle, handle.data(), cuda::kIpcHandleBytes);
      entries[p.rank].addr = reinterpret_cast<uint64_t>(fifo);
      auto seg = std::make_unique<shm::Segment>();
      // The control FIFO: headers only (one byte of host payload per slot).
      WEFT_RETURN_IF_ERROR(seg->create(segName(p.rank, ctx_.rank), p.rank, ctx_.rank, slots(), 1));
      incoming_[p.rank] = std::move(seg);
    }
    BlobWriter(blob).put(h).putArray(entries);
    return Status();
  }

  Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override {
    Status st = connectImpl(peers, blobs, eps);
    if (!st.isOk()) WEFT_WARN(kTransport, "%s", st.message().c_str());
    for (auto& seg : incoming_)
      if (seg) seg->close();  // no name of ours stays in /dev/shm
    incoming_.clear();
    return st;
  }

  Status progress() override {
    Status first;
    for (auto& ch : peers_) {
      if (!ch) continue;
      Status st = ch->progress();
      if (st.isError() && first.isOk()) first = st;
    }
    return first;
  }

  Status checkPeer(int peer) override {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer]) return Status();
    CudaIpcPeer& ch = *peers_[peer];
    if (!ch.failed().isOk()) return ch.failed();
    if (watches_[peer] && watches_[peer]->exited())
      return ch.fail(Status(WEFT_ERR_REMOTE, describe(peer) + " exited"));
    return Status();
  }

  void shutdown() override {
    for (auto& ch : peers_)
      if (ch) ch->abort();
    for (auto& seg : incoming_)
      if (seg) seg->close();
  }

 private:
  uint32_t slots() const {
    return ctx_.config.shmSlots > 0 ? static_cast<uint32_t>(ctx_.config.shmSlots) : 8;
  }
  size_t slotBytes() const { return ctx_.config.shmSlotBytes ? ctx_.config.shmSlotBytes : 1 << 20; }
  std::string segName(int src, int dst) const {
    // Control segments are named apart from the shm transport's (same comm).
    return shm::segmentName(ctx_.key, src, dst, "weft cuda_ipc names");
  }
  std::string describe(int p) const {
    const std::string& host =
        static_cast<size_t>(p) < ctx_.peers.size() ? ctx_.peers[p].hostname : std::string();
    int pid = static_cast<size_t>(p) < watches_.size() && watches_[p] ? watches_[p]->pid() : 0;
    return describePeer(p, pid, host);
  }
  Status connectImpl(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                     std::vector<std::unique_ptr<Endpoint>>* eps);

  TransportContext ctx_;
  uint64_t hostHash_;
  bool addressed_ = false, connected_ = false;
  void* stream_ = nullptr;
  std::vector<void*> fifos_;                             // ours, cudaMalloc'ed
  std::vector<void*> opened_;                            // peers', IPC-mapped
  std::vector<char*> inFifo_;                            // by sender rank
  std::vector<std::unique_ptr<shm::Segment>> incoming_;  // control, by sender, until connect
  std::vector<std::shared_ptr<CudaIpcPeer>> peers_;
  std::vector<std::unique_ptr<shm::PidWatch>> watches_;
};

Status CudaIpcTransport::connectImpl(const std::vector<int>& peers,
                                     const std::vector<std::string>& blobs,
                                     std::vector<std::unique_ptr<Endpoint>>* eps) {
  if (!addressed_ || connected_)
    return invalidUsage("cuda_ipc transport: connect() needs one localAddress() first, once");
  connected_ = true;
  watches_.resize(ctx_.nranks);
  std::vector<char*> outFifo(ctx_.nranks, nullptr);
  for (int p : peers) {
    if (p < 0 || p >= ctx_.nranks || p == ctx_.rank || !incoming_[p])
      return invalidArgument(strFormat(
          "cuda_ipc transport: rank %d cannot reach rank %d (not on this host)", ctx_.rank, p));
    BlobHeader h;
    BlobEntry e;  // the FIFO rank p receives from this rank on
    WEFT_RETURN_IF_ERROR(decodeBlob(blobs, p, ctx_.rank, ctx_.nranks, hostHash_,
                                    static_cast<int>(getpid()), &h, &e));
    watches_[p] = std::make_unique<shm::PidWatch>();
    watches_[p]->watch(h.pid);
    if (h.pid == getpid()) {
      outFifo[p] = reinterpret_cast<char*>(e.addr);  // same process: the address itself
    } else {
      void* mapped = nullptr;
      Status st = cuda::ipcOpen(std::string(e.handle, sizeof e.handle), &mapped);
      if (st.isError())
        return st.withContext(strFormat("cuda_ipc transport: rank %d mapping the FIFO of %s",
                                        ctx_.rank, describe(p).c_str()));
      opened_.push_back(mapped);
      outFifo[p] = static_cast<char*>(mapped);
    }
  }
  // Open each peer's control FIFO to us; wait until each peer opened ours.
  std::vector<std::unique_ptr<shm::Segment>> out(ctx_.nranks);
  SegmentAttach a("cuda_ipc", ctx_.rank, ctx_.config.bootstrapTimeoutS);
  for (int p : peers) {
    a.open(p, segName(ctx_.rank, p), ctx_.rank, p, &out[p],
           "its control FIFO to us does not exist");
    a.await(p, incoming_[p].get());
  }
  WEFT_RETURN_IF_ERROR(a.run([this](int p) { return watches_[p]->exited(); },
                             [this](int p) { return describe(p); }));
  peers_.resize(ctx_.nranks);
  if (eps->size() < static_cast<size_t>(ctx_.nranks)) eps->resize(ctx_.nranks);
  for (int p : peers) {
    auto ch = std::make_shared<CudaIpcPeer>(ctx_.rank, p, describe(p), std::move(out[p]),
                                            std::move(incoming_[p]), outFifo[p], inFifo_[p],
                                            slotBytes(), stream_);
    WEFT_RETURN_IF_ERROR(ch->init());
    peers_[p] = ch;
    (*eps)[p] = std::make_unique<CudaIpcEndpoint>(ch);
  }
  WEFT_INFO(kTransport,
            "cuda_ipc transport: rank %d connected to %zu peers (%u slots of %zu bytes)", ctx_.rank,
            peers.size(), slots(), slotBytes());
  return Status();
}

}  // namespace
}  // namespace cuda_ipc

std::unique_ptr<Transport> makeCudaIpcTransport(const TransportContext& ctx) {
  return std::make_unique<cuda_ipc::CudaIpcTransport>(ctx);
}

}  // namespace weft
