// topo::System: the machine as a graph. Nodes are CPU sockets, NUMA nodes,
// PCI switches, GPUs, NICs and NVSwitches; links carry a bandwidth (GB/s,
// per direction) and a latency (us) taken from the link table (link_table.h)
// unless a file states them. The PCI tree hangs below NUMA nodes; sockets
// are joined by their SMP links; NVLink joins GPUs to each other or to
// NVSwitches.
//
// Paths. For every pair of endpoints (GPU, NIC, NUMA node) computePaths()
// finds the route data takes and classifies it as NCCL does:
//   LOC  the same endpoint
//   NVL  NVLink only: a direct link, or one hop through NVSwitches; the
//        bandwidth is the sum over parallel links and switches
//   PIX  through at most one PCI switch
//   PXB  through several PCI switches, not through a CPU
//   PHB  through the host bridge of one NUMA node
//   SYS  across NUMA nodes (the SMP interconnect)
// The route through the PCI tree and the SMP links is the one with the
// fewest hops (ties: the widest); its bandwidth is its narrowest link. GPUs
// and NICs are endpoints only: no route passes through them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace weft {
namespace topo {

enum class NodeType : uint8_t { Cpu, Numa, Pci, Gpu, Nic, NvSwitch };
const char* nodeTypeName(NodeType t);  // "cpu", "numa", "pci", "gpu", "nic", "nvswitch"

enum class LinkType : uint8_t {
  Pcie,    // gen, width
  NvLink,  // gen, count
  Smp,     // between sockets: QPI / UPI / xGMI (kind in `tech`), count
  Mem,     // a NUMA node to its socket (on the die)
};
const char* linkTypeName(LinkType t);

enum class PathClass : uint8_t { Loc, Nvl, Pix, Pxb, Phb, Sys, None };
const char* pathClassName(PathClass c);  // "LOC", "NVL", ...

struct Node {
  NodeType type = NodeType::Cpu;
  std::string id;        // unique in the system: "cpu0", "gpu3", "nic1"
  std::string name;      // model or interface: "H100 80GB HBM3", "mlx5_0", "eth0"
  std::string busId;     // PCI: "0000:18:00.0" (GPU, NIC, PCI switch); may be empty
  int parent = -1;       // the node above in the tree (NUMA -> CPU, device -> PCI/NUMA)
  int cores = 0;         // CPU, NUMA: cores
  double memGB = 0;      // NUMA: memory
  std::string nicType;   // NIC: "ib", "roce", "eth"
  double speedGbps = 0;  // NIC: port speed (0 = unknown)
  int gpuArch = 0;       // GPU: compute capability * 10 (90 = sm_90); 0 unknown
};

struct Link {
  int a = -1, b = -1;  // node indices; a is the upstream end in the PCI tree
  LinkType type = LinkType::Pcie;
  int gen = 0;       // PCIe / NVLink generation
  int width = 0;     // PCIe lanes
  int count = 1;     // NVLink links or SMP links bundled into this edge
  std::string tech;  // SMP: "qpi", "upi", "upi16", "xgmi"
  double bwGBs = 0;  // per direction, all `count` links together
  double latUs = 0;
};

// One hop of a route: a link, the direction data crosses it, and the share
// of the route's traffic it carries (1 except across NVSwitches, where a
// route spreads over the switches in proportion to their bandwidth).
struct Hop {
  int link = -1;
  bool forward = true;  // a -> b
  double share = 1;
};

struct Path {
  PathClass cls = PathClass::None;
  double bwGBs = 0;
  double latUs = 0;
  std::vector<Hop> hops;
};

class System {
 public:
  std::string name;  // "DGX H100", or the detected host name
  std::vector<Node> nodes;
  std::vector<Link> links;

  // Adds a node; returns its index.
  int addNode(const Node& n);
  // Adds a link with bandwidth and latency from the link table unless set.
  int addLink(Link l);
  int find(const std::string& id) const;  // -1 when absent
  std::vector<int> nodesOf(NodeType t) const;
  // The NUMA node above `node` (itself for a NUMA node; -1 for none).
  int numaOf(int node) const;
  int cpuOf(int node) const;

  // Checks the structure (tree parents, link ends, no GPU/NIC routing, at
  // most kMaxNodes nodes, kMaxLinks links and kMaxEndpoints GPUs + NICs +
  // NUMA nodes) and computes every endpoint pair's path. Must be called
  // after the last addNode/addLink; an inconsistent graph is
  // WEFT_ERR_INVALID_ARGUMENT.
  static constexpr size_t kMaxNodes = 4096, kMaxLinks = 16384, kMaxEndpoints = 256;
  Status finalize();
  bool finalized() const { return finalized_; }
  // The path between two endpoints (GPU, NIC, NUMA node); class None for
  // any other node. finalize() first.
  const Path& path(int from, int to) const;

 private:
  void computePaths();
  Path nvlinkPath(int a, int b) const;
  // Routes from `a` over PCI, memory and SMP links to every endpoint.
  void treePathsFrom(int a);
  std::vector<std::vector<int>> adj_;  // per node: incident links
  std::vector<int> endpoint_;          // per node: index among endpoints, or -1
  size_t endpointCount_ = 0;
  std::vector<Path> paths_;  // endpoints x endpoints
  bool finalized_ = false;
};

}  // namespace topo
}  // namespace weft
