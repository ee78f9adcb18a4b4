// Detection of this machine: hwloc for sockets, NUMA nodes, cores and the
// PCI tree; NICs from ibverbs (RDMA devices) and sysfs (Ethernet
// interfaces); GPUs from NVML or the CUDA driver, both loaded with dlopen
// so that weft runs without them. What is missing is a note, not an error:
// a machine without GPUs or RDMA NICs is a correct answer.
#pragma once

#include <string>
#include <vector>

#include "topo/system.h"

namespace weft {
namespace topo {

// A device found outside hwloc, placed in the PCI tree by its bus id.
struct NicInfo {
  std::string name;   // "mlx5_0", "eth0"
  std::string busId;  // "0000:3b:00.0"; empty for a virtual interface
  std::string type;   // "ib", "roce", "eth"
  double speedGbps = 0;
  std::string gid;  // RDMA: GID 0 of port 1, when readable
};

struct GpuInfo {
  std::string busId;
  std::string name;
  int arch = 0;  // compute capability * 10
  struct NvLink {
    std::string remoteBusId;
    bool toSwitch = false;
  };
  std::vector<NvLink> nvlinks;  // one per active link
};

// PCI bus ids in one form: "dddd:bb:dd.f", lower case; "" when not one.
std::string normalizeBusId(const std::string& s);

// RDMA devices through libibverbs, then Ethernet interfaces with a PCI
// device from /sys/class/net (an interface that is also an RDMA device is
// listed once). `notes` gains a line per source.
std::vector<NicInfo> findNics(std::vector<std::string>* notes);
// GPUs through NVML (libnvidia-ml.so.1), else the CUDA driver
// (libcuda.so.1, bus ids only); none when neither loads.
std::vector<GpuInfo> findGpus(std::vector<std::string>* notes);

// The whole machine as a finalized System. Fails only when hwloc fails to
// load a topology; `notes` (may be null) says what was found and skipped.
Status detectSystem(System* out, std::vector<std::string>* notes);

}  // namespace topo
}  // namespace weft
