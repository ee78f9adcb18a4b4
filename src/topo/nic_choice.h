// Which NIC each rank of a host sends through: the network transports that
// choose a device themselves (ibverbs, UCX) are handed this rank's choice,
// so that, as NCCL does, every GPU (or NUMA node) talks through the NIC
// nearest to it instead of all ranks sharing the first one found.
#pragma once

#include <string>
#include <vector>

#include "topo/view.h"

namespace weft {
namespace topo {

// Per local rank of `v`: the RDMA NIC (type "ib" or "roce") it should use,
// as a System node index, or -1 when the host has none. Nearest first (path
// class from the rank's device, then path bandwidth capped by the port);
// among equally near NICs, the one fewest earlier local ranks took, so that
// ranks sharing a PCIe switch with two NICs spread over both.
std::vector<int> rdmaNicPerLocalRank(const View& v);

// The device name of rdmaNicPerLocalRank(v)[local] ("mlx5_3"), or "" when
// there is none (or `v` has no system).
std::string rdmaNicName(const View& v, int local);

}  // namespace topo
}  // namespace weft
