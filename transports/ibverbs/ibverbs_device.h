// Finding the RDMA port the ibverbs transport uses: every device
// ibv_get_device_list reports, filtered by WEFT_IB_HCA, first ACTIVE port,
// its GID (WEFT_IB_GID_INDEX or gid_select.h's choice on RoCE) and MTU.
// The topology (src/topo/, another issue) will pick, among the allowed
// ports, the one closest to each rank's CPU or GPU; until then the first
// allowed active port wins.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "core/config.h"
#include "core/status.h"

namespace weft {
namespace ib {

struct IbPort {
  ibv_context* ctx = nullptr;  // owned: ibv_close_device by closeIbPort
  std::string device;
  int port = 0;
  bool ethernet = false;  // RoCE
  uint16_t lid = 0;
  int gidIndex = 0;
  ibv_gid gid{};
  int mtu = 0;  // active MTU, bytes
};

// Opens the port to use. Without any device: an error saying
// "ibv_get_device_list found no RDMA device"; with devices but none allowed
// or active: an error listing what was seen.
Status openIbPort(const Config& cfg, IbPort* out);
void closeIbPort(IbPort* p);

// How many RDMA devices ibv_get_device_list reports (0 on machines without).
int ibDeviceCount();

}  // namespace ib
}  // namespace weft
