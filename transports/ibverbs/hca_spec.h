// WEFT_IB_HCA: which InfiniBand / RoCE devices and ports the ibverbs
// transport may use, in NCCL_IB_HCA's syntax:
//
//   mlx5_0:1,mlx5_1     devices by name prefix ("mlx5_1" also takes
//                       "mlx5_10"), optionally one port each
//   =mlx5_0:1           exact names only
//   ^mlx5_2             every device but these ("^=" for exact exclusion)
//
// Pure code (no verbs header), so it is unit-tested everywhere. The
// topology (src/topo/) will later pick the NIC closest to each rank among
// those this spec allows.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace weft {
namespace ib {

struct HcaEntry {
  std::string name;
  int port = -1;  // -1: any port
};

struct HcaSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<HcaEntry> entries;  // empty: every device
};

// Parses a WEFT_IB_HCA value; an empty string allows every device. Errors
// (an empty name, a bad port) name the offending entry.
Status parseHcaSpec(const std::string& text, HcaSpec* out);

// Whether device `name`, port `port` (1-based) is allowed by `spec`.
bool hcaAllowed(const HcaSpec& spec, const std::string& name, int port);

}  // namespace ib
}  // namespace weft
