#include "cuda/device_path.h"

#include "core/status.h"

namespace weft {
namespace cuda {

DevicePath chooseDevicePath(const DevicePathFacts& f, std::string* why) {
  // Direct needs every byte on a GPU: managed or pinned host memory would
  // make cuda_ipc's copies and the kernels fault in pages or cross PCIe.
  for (int i = 0; i < f.nbufs; ++i) {
    const BufferDesc& b = f.bufs[i];
    if (b.ptr && b.kind != MemKind::Device) {
      *why = strFormat("staged: %s is %s memory, not device memory", b.role, memKindName(b.kind));
      return DevicePath::Staged;
    }
  }
  if (!f.ipcBuilt) {
    *why = "staged: this weft was built without CUDA";
    return DevicePath::Staged;
  }
  if (!f.gpuBackend) {
    *why = "staged: this rank has no GPU backend for direct ops (see the INIT log)";
    return DevicePath::Staged;
  }
  for (int i = 0; i < f.nbufs; ++i) {
    const BufferDesc& b = f.bufs[i];
    if (b.ptr && f.device >= 0 && b.device != f.device) {
      *why = strFormat("staged: %s is on device %d, the communicator's device path on device %d",
                       b.role, b.device, f.device);
      return DevicePath::Staged;
    }
  }
  if (f.repro) {
    *why = "staged: WEFT_REPRO's reproducible folds run on the host";
    return DevicePath::Staged;
  }
  if (f.selfTransfer) {
    *why = "staged: a send or receive to this rank itself";
    return DevicePath::Staged;
  }
  if (f.crossOverlap) {
    *why = "staged: a send of the group reads a buffer another call receives into";
    return DevicePath::Staged;
  }
  if (f.nranks == 1) {
    *why = "direct: one rank, device buffers";
    return DevicePath::Direct;
  }
  if (f.hosts > 1) {
    *why = strFormat("staged: the %d ranks are on %d hosts", f.nranks, f.hosts);
    return DevicePath::Staged;
  }
  if (!f.ipcAllowed) {
    *why = "staged: WEFT_TRANSPORTS leaves cuda_ipc out";
    return DevicePath::Staged;
  }
  for (int p = 0; p < f.nranks; ++p) {
    if (p >= static_cast<int>(f.ipcReach.size()) || !f.ipcReach[p]) {
      *why = strFormat("staged: CUDA IPC does not reach rank %d", p);
      return DevicePath::Staged;
    }
  }
  *why = strFormat("direct: all %d ranks on this host reach each other by CUDA IPC", f.nranks);
  return DevicePath::Direct;
}

}  // namespace cuda
}  // namespace weft
