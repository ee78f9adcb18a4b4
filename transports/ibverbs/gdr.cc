#include "transports/ibverbs/gdr.h"

#include <sys/stat.h>

namespace weft {
namespace ib {
namespace {

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

}  // namespace

const char* gdrModeName(GdrMode m) {
  switch (m) {
    case GdrMode::DmaBuf:
      return "dma-buf";
    case GdrMode::PeerMem:
      return "nvidia-peermem";
    default:
      return "off";
  }
}

Status parseGdrSetting(const std::string& text, int* out) {
  if (text.empty() || text == "auto") {
    *out = -1;
  } else if (text == "0") {
    *out = 0;
  } else if (text == "1") {
    *out = 1;
  } else {
    return invalidArgument("WEFT_NET_GDR=" + text + ": expected auto, 0 or 1");
  }
  return Status::ok();
}

GdrMode chooseGdr(bool cudaDevice, bool dmabufCapable, const std::string& sysRoot,
                  std::string* why) {
  if (!cudaDevice) {
    *why = "no CUDA driver with a device";
    return GdrMode::Off;
  }
  if (dmabufCapable) return GdrMode::DmaBuf;
  for (const char* m : {"/module/nvidia_peermem", "/module/nv_peer_mem", "/kernel/mm/memory_peers/nv_mem"})
    if (exists(sysRoot + m)) return GdrMode::PeerMem;
  *why = "the GPU does not export dma-bufs and no nvidia-peermem module is loaded";
  return GdrMode::Off;
}

}  // namespace ib
}  // namespace weft
