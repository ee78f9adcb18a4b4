// topo::View: what the algorithms use of a System for `nodes` identical
// hosts with `ranksPerNode` ranks each: where each local rank sits, the
// rings (channels), the trees across nodes, and the hierarchy groups.
//
// Placement. Local rank i uses GPU i (mod the GPU count); on a host without
// GPUs, ranks are spread over the NUMA nodes in contiguous blocks.
//
// Rings. The ring search runs over the distinct devices (ranks sharing a
// device sit next to each other in every ring). Every directed link has its
// bandwidth as capacity; a ring at speed s takes s (times the hop's share)
// from every link its hops cross. For each candidate speed (every pair
// bandwidth divided by 1..kMaxChannels) rings are searched depth-first,
// next device by path class, then residual bandwidth, then index, each ring
// followed by its reverse when that still fits, until no ring fits. The
// speed with the largest total (channels x speed) wins; on a tie, the
// highest speed that gives at least two channels. So on a DGX-1 the rings
// use NVLink hops only and together every NVLink; on a PCIe box the ring
// that crosses the socket link twice beats the one that crosses it four
// times (the uplinks would carry two hops). The search is bounded (500000
// steps; none beyond 64 devices): without a result, one ring over the
// devices grouped by NUMA node and PCI parent.
//
// Across nodes each channel's ring is cut into a chain: the chain enters a
// node at one rank and leaves at another, through the NIC closest to each
// (best path class, then bandwidth, then the NIC fewest channels use yet).
// The cut maximizes the narrower of the two NIC paths, then removes the
// ring's narrowest hop. Trees across nodes are the double binary tree of
// algo/binary_tree.h over node indices (each node interior in at most one);
// within a node the tree is the channel's chain.
#pragma once

#include <string>
#include <vector>

#include "algo/binary_tree.h"
#include "topo/system.h"

namespace weft {
namespace topo {

constexpr int kMaxChannels = 16;

struct Channel {
  double bwGBs = 0;       // this ring's speed
  std::vector<int> ring;  // local ranks in ring order (a cycle within a node)
  // Across nodes: ring rotated so that chain.front() enters the node and
  // chain.back() leaves it, and the NICs they use (System node indices, -1
  // without a NIC).
  std::vector<int> chain;
  int entryNic = -1, exitNic = -1;
};

enum class Group : uint8_t { Host, Numa, NvLinkIsland };

class View {
 public:
  // nodes in [1, 65536], ranksPerNode in [1, 1024]; `sys` finalized, and
  // kept by pointer (it must outlive the View).
  static Status build(const System& sys, int nodes, int ranksPerNode, View* out);

  const System* system = nullptr;
  int nodes = 1, ranksPerNode = 1;
  std::vector<int> device;  // per local rank: its GPU, else its NUMA node
  std::vector<Channel> channels;

  int nranks() const { return nodes * ranksPerNode; }
  // Sum of the channels' speeds: what one rank moves per direction in a ring.
  double ringGBs() const;
  // The network bandwidth of one node that the channels use (each distinct
  // NIC counted once, at the narrower of its port and its path); 0 without.
  double netGBs() const;
  // The global ring of channel c: every node's chain, node after node
  // (ranks numbered node * ranksPerNode + local).
  std::vector<int> globalRing(int c) const;
  // Tree t (0, 1) across nodes, for node `node`.
  TreeLinks nodeTree(int t, int node) const { return binaryTreeLinks(nodes, t, node); }
  // The local rank that tree t enters a node through (the head of the chain
  // of channel t mod the channel count).
  int treeHead(int t) const;
  // Hops of channel c's ring whose path crosses NUMA nodes (class SYS).
  int crossings(int c) const;
  // Whether every hop of channel c's ring is LOC or NVL.
  bool nvlinkOnly(int c) const;
  // Groups of global ranks for hierarchical algorithms, each sorted.
  std::vector<std::vector<int>> groups(Group g) const;
  // The narrowest hop of channel c's ring (for the log).
  double hopGBs(int from, int to) const;
  // One line per channel and the trees, for WEFT_DEBUG=INFO and weft-topo.
  std::string describe() const;
};

}  // namespace topo
}  // namespace weft
