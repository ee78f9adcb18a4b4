// The link table: bandwidth (GB/s per direction, 1 GB = 1e9 bytes) and
// latency (us) per link type and generation, used for every link whose
// file or detector does not state them. docs/topology.md prints the same
// table. Figures are the signalling rates after line encoding (what a link
// can carry at best), not measured throughput: PCIe and NVLink protocols
// deliver about 80-90% of them to applications.
#pragma once

#include <string>

#include "topo/system.h"

namespace weft {
namespace topo {

// Per lane: gen1 0.25, gen2 0.5, gen3 0.985, gen4 1.969, gen5 3.938,
// gen6 7.877 GB/s; 0 for an unknown generation.
double pcieLaneGBs(int gen);
// Per link: NVLink1 (P100) 20, 2 (V100) 25, 3 (A100) 25, 4 (H100) 25,
// 5 (B200) 50 GB/s; 0 for an unknown generation.
double nvlinkGBs(int gen);
// Per socket link: "qpi" 19.2, "upi" (10.4 GT/s) 20.8, "upi16" (16 GT/s)
// 32, "xgmi" 36 GB/s; 0 for an unknown kind.
double smpLinkGBs(const std::string& tech);
// A NUMA node's memory seen from its socket (the on-die link): 100 GB/s.
constexpr double kMemLinkGBs = 100;

// One hop's latency: PCIe 0.3 us (a switch or root port), NVLink 0.5 us
// (GPU to GPU, through a switch or not), SMP 0.2 us, memory 0.1 us.
double linkLatencyUs(LinkType t);

// One message across the network between hosts, NIC to NIC: "ib" 2 us,
// "roce" 3 us, "eth" (kernel TCP) 20 us.
double nicLatencyUs(const std::string& nicType);

// Fills l->bwGBs and l->latUs from the table when they are 0. False when the
// table does not know the link (generation or kind missing) and no bandwidth
// was given.
bool fillLinkDefaults(Link* l);

}  // namespace topo
}  // namespace weft
