// The communicator's device path (docs/cuda.md): at init, when every rank
// of a one-host communicator offers it (src/cuda/device_setup.h), a cuda_ipc
// endpoint per other rank next to the host endpoints, and a GPU backend
// with device scratch for direct ops. The offers travel in the transports'
// address allgather (Comm::setUpTransports), so a communicator that does
// not consider it (several hosts, no CUDA, a CPU-only process) pays
// nothing: no CUDA call, no allocation, an empty section in one message.
#include <algorithm>
#include <cstring>

#include "api/comm.h"
#include "api/init_blob.h"
#include "core/log.h"
#include "cuda/device_local_work.h"
#include "cuda/device_setup.h"
#include "cuda/runtime.h"

namespace weft {

Status Comm::offerDevice(const TransportContext& ctx, bool ipcAllowed, std::string* offer) {
  offer->clear();
  cuda::DeviceOfferFacts f;
  f.setting = cfg_.cudaIpc;
  f.nranks = nranks_;
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : peers_)
    if (std::find(hosts.begin(), hosts.end(), p.hostHash) == hosts.end())
      hosts.push_back(p.hostHash);
  f.hosts = static_cast<int>(hosts.size());
  f.ipcAllowed = ipcAllowed;
  f.built = cuda::cudaBuilt();
  // Asked only when it is cheap (a /proc read at most): see device_setup.h.
  f.driverLoaded = f.built && f.hosts == 1 && cuda::driverLoaded();
  cuda::DeviceOffer what = cuda::DeviceOffer::Skip;
  Status st = cuda::offerDevicePath(f, &what, &devWhy_);
  if (st.isError()) {
    WEFT_WARN(kInit, "%s; the device path stays off", st.message().c_str());
    devWhy_ = "off: " + st.message();
    return Status();
  }
  if (what == cuda::DeviceOffer::Skip) return Status();
  const cuda::CudaState cs = cuda::cudaState();
  if (!cs.usable) {
    *offer = "0" + cs.why;
    return Status();
  }
  devDevice_ = cs.device;
  if (nranks_ > 1) {
    devTransport_ = makeCudaIpcTransport(ctx);
    std::string addr;
    Status as = devTransport_->localAddress(&addr);
    if (as.isError()) {
      devTransport_.reset();
      *offer = "0" + as.message();
      return Status();
    }
    *offer = "1" + addr;
  } else {
    *offer = "1";
  }
  return Status();
}

Status Comm::connectDevice(const std::vector<std::string>& blobs, size_t section) {
  if (devWhy_.empty() || blobs.size() != static_cast<size_t>(nranks_)) return Status();
  std::vector<std::string> offers(nranks_);
  for (int r = 0; r < nranks_; ++r) offers[r] = InitBlobReader(blobs[r]).section(section);
  // Skipped everywhere (the usual case off a GPU machine): nothing to agree on.
  if (std::all_of(offers.begin(), offers.end(), [](const std::string& o) { return o.empty(); })) {
    if (rank_ == 0)
      WEFT_INFO(kInit, "device path (cuda_ipc, direct device ops): %s", devWhy_.c_str());
    return Status();
  }
  if (!cuda::agreeOnDevicePath(offers, &devWhy_)) {
    devTransport_.reset();  // frees the FIFOs this rank had made
    if (rank_ == 0)
      WEFT_INFO(kInit, "device path (cuda_ipc, direct device ops): %s", devWhy_.c_str());
    return Status();
  }
  if (devTransport_) {
    std::vector<int> peers;
    std::vector<std::string> addrs(nranks_);
    for (int r = 0; r < nranks_; ++r) {
      addrs[r] = offers[r].substr(1);
      if (r != rank_) peers.push_back(r);
    }
    // Collective among the ranks, bounded by the bootstrap timeout.
    Status st = devTransport_->connect(peers, addrs, &devEps_);
    if (st.isError())
      return st.withContext(
          strFormat("rank %d: cuda_ipc connect (WEFT_CUDA_IPC=off avoids it)", rank_));
  }
  Status bs = cuda::makeDeviceLocalWork(&devLocal_, cuda::ScratchMem::Device);
  if (bs.isError()) {
    // The endpoints stay (every rank's stream ops use them); this rank's
    // calls are staged.
    WEFT_WARN(kInit, "rank %d: %s; this rank's stream calls are staged", rank_,
              bs.message().c_str());
    devLocal_.reset();
  }
  if (rank_ == 0)
    WEFT_INFO(kInit, "device path (cuda_ipc, direct device ops): %s", devWhy_.c_str());
  return Status();
}

void Comm::attachDevice() {
  if (!devTransport_ && !devLocal_) return;
  std::vector<Endpoint*> eps(nranks_, nullptr);
  for (int p = 0; p < nranks_ && static_cast<size_t>(p) < devEps_.size(); ++p)
    eps[p] = devEps_[p].get();
  engine_->setDeviceTransport(devTransport_.get(), std::move(eps), std::move(devLocal_));
}

void Comm::useDeviceOnThisThread() const {
  // Only with the device path: a CPU-only comm makes no CUDA call here.
  if (devDevice_ < 0 || (!devTransport_ && !(engine_ && engine_->hasDeviceLocal()))) return;
  Status st = cuda::setCurrentDevice(devDevice_);
  if (st.isError()) WEFT_WARN(kInit, "rank %d: progress thread: %s", rank_, st.message().c_str());
}

bool Comm::keepOffArena(const OpTracker& t) const {
  // The arena memcpys host memory, and ranks must agree on it: a direct op
  // (device memory) never takes it, nor does any stream op of a comm whose
  // stream ops travel by cuda_ipc.
  return t.direct || (t.gate && devTransport_ != nullptr);
}

void Comm::devicePathFacts(cuda::DevicePathFacts* f) const {
  f->nranks = nranks_;
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : peers_)
    if (std::find(hosts.begin(), hosts.end(), p.hostHash) == hosts.end())
      hosts.push_back(p.hostHash);
  f->hosts = static_cast<int>(hosts.size());
  f->ipcAllowed = ipcAllowed_;
  f->ipcBuilt = cuda::cudaBuilt();
  f->gpuBackend = engine_ && engine_->hasDeviceLocal();
  f->device = devDevice_;
  f->ipcReach.assign(nranks_, false);
  for (int p = 0; p < nranks_; ++p)
    f->ipcReach[p] = p == rank_ || (static_cast<size_t>(p) < devEps_.size() && devEps_[p]);
}

}  // namespace weft
