// Ranks that share a core sit next to each other in a host's ring.
//
// With more ranks than cores (4 ranks bound round-robin to 2 cores: ranks
// 0 and 2 on one, 1 and 3 on the other), a ring or chain in rank order
// crosses cores at every hop. Grouped by core (0 2 1 3), half the hops stay
// on a core, where a message is handed to a rank that runs when the sender
// waits, without a cross-core wake-up. Broadcasts of 64 B-1 KiB by a chain
// of 4 ranks on 2 cores took 11.9-12.5 us over tcp in rank order and
// 6.4-7.8 in core order (Open MPI 6.9-8.3), 12.5-14.6 and 5.9-8.4 over ucx
// (Open MPI's UCX PML 8.0-9.4), in interleaved runs.
#pragma once

#include <cstdint>
#include <vector>

namespace weft {
namespace topo {

// Reorders `order` (a host's local ranks, as its View chains them) so that
// within each run of ranks on the same device (device[local]) the ranks go
// by the lowest CPU they may run on, ties and unknown masks (empty) in
// their given order. masks[local]: that rank's affinity (core/cpu.h), 64
// CPUs per word. Ranks that may all run anywhere keep their order.
void groupByCore(std::vector<int>* order, const std::vector<int>& device,
                 const std::vector<const std::vector<uint64_t>*>& masks);

}  // namespace topo
}  // namespace weft
