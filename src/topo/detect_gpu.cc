// GPUs: NVML (libnvidia-ml.so.1, dlopen'ed) for bus ids, names, compute
// capability and NVLinks (state, remote bus id, remote type: GPU or
// NVSwitch); without NVML the CUDA driver (libcuda.so.1) for bus ids only.
// NVML is preferred because it needs no CUDA context: cuInit before a fork
// would leave the children without CUDA. Neither library is present on the
// machines weft is tested on, so this file is only exercised for its
// "no GPU" answer there; the declarations below are NVML's and CUDA's
// documented C API.
#include <dlfcn.h>

#include "topo/detect.h"

namespace weft {
namespace topo {
namespace {

// nvmlPciInfo_t as nvml.h declares it.
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kNvmlMaxLinks = 18;
constexpr unsigned kNvmlRemoteSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

bool fromNvml(std::vector<GpuInfo>* out, std::vector<std::string>* notes) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    notes->push_back("nvml: libnvidia-ml.so.1 not found");
    return false;
  }
  using Dev = void*;
  auto init = sym<int (*)()>(lib, "nvmlInit_v2");
  auto shutdown = sym<int (*)()>(lib, "nvmlShutdown");
  auto count = sym<int (*)(unsigned*)>(lib, "nvmlDeviceGetCount_v2");
  auto byIndex = sym<int (*)(unsigned, Dev*)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto pciInfo = sym<int (*)(Dev, NvmlPciInfo*)>(lib, "nvmlDeviceGetPciInfo_v3");
  auto name = sym<int (*)(Dev, char*, unsigned)>(lib, "nvmlDeviceGetName");
  auto cc = sym<int (*)(Dev, int*, int*)>(lib, "nvmlDeviceGetCudaComputeCapability");
  auto linkState = sym<int (*)(Dev, unsigned, int*)>(lib, "nvmlDeviceGetNvLinkState");
  auto remotePci =
      sym<int (*)(Dev, unsigned, NvmlPciInfo*)>(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  auto remoteType =
      sym<int (*)(Dev, unsigned, unsigned*)>(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
  unsigned n = 0;
  if (!init || !shutdown || !count || !byIndex || !pciInfo || init() != 0) {
    notes->push_back("nvml: present but does not initialize (no driver?)");
    dlclose(lib);
    return false;
  }
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; ++i) {
    Dev d = nullptr;
    NvmlPciInfo pci{};
    if (byIndex(i, &d) != 0 || pciInfo(d, &pci) != 0) continue;
    GpuInfo g;
    g.busId = normalizeBusId(pci.busId);
    char buf[96] = {0};
    if (name && name(d, buf, sizeof buf - 1) == 0) g.name = buf;
    int major = 0, minor = 0;
    if (cc && cc(d, &major, &minor) == 0) g.arch = major * 10 + minor;
    for (unsigned l = 0; linkState && remotePci && l < kNvmlMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo rp{};
      if (linkState(d, l, &active) != 0 || !active || remotePci(d, l, &rp) != 0) continue;
      unsigned type = 0;
      GpuInfo::NvLink link;
      link.remoteBusId = normalizeBusId(rp.busId);
      link.toSwitch = remoteType && remoteType(d, l, &type) == 0 && type == kNvmlRemoteSwitch;
      if (!link.remoteBusId.empty()) g.nvlinks.push_back(link);
    }
    if (!g.busId.empty()) out->push_back(g);
  }
  shutdown();
  dlclose(lib);
  notes->push_back(strFormat("nvml: %u GPU(s)", n));
  return true;
}

void fromCuda(std::vector<GpuInfo>* out, std::vector<std::string>* notes) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    notes->push_back("cuda: libcuda.so.1 not found: no GPU");
    return;
  }
  auto init = sym<int (*)(unsigned)>(lib, "cuInit");
  auto count = sym<int (*)(int*)>(lib, "cuDeviceGetCount");
  auto get = sym<int (*)(int*, int)>(lib, "cuDeviceGet");
  auto busId = sym<int (*)(char*, int, int)>(lib, "cuDeviceGetPCIBusId");
  int n = 0;
  if (!init || !count || !get || !busId || init(0) != 0 || count(&n) != 0) {
    notes->push_back("cuda: the driver does not initialize: no GPU");
    dlclose(lib);
    return;
  }
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    char buf[32] = {0};
    if (get(&dev, i) != 0 || busId(buf, sizeof buf - 1, dev) != 0) continue;
    GpuInfo g;
    g.busId = normalizeBusId(buf);
    if (!g.busId.empty()) out->push_back(g);
  }
  notes->push_back(strFormat("cuda: %d GPU(s), no NVLink information without NVML", n));
  dlclose(lib);
}

}  // namespace

std::vector<GpuInfo> findGpus(std::vector<std::string>* notes) {
  std::vector<GpuInfo> out;
  if (!fromNvml(&out, notes)) fromCuda(&out, notes);
  return out;
}

}  // namespace topo
}  // namespace weft
