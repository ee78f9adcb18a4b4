#include "topo/simulate.h"

#include <algorithm>

#include "topo/link_table.h"

namespace weft {
namespace topo {

CostModel costModelFor(const View& v) {
  const System& s = *v.system;
  CostModel m;
  m.nranks = v.nranks();
  m.nhosts = v.nodes;
  m.maxRanksPerHost = v.ranksPerNode;
  m.cores = 0;
  double lat = 0;
  const Channel& c0 = v.channels[0];
  for (size_t k = 0; k < c0.ring.size() && c0.ring.size() > 1; ++k)
    lat = std::max(lat,
                   s.path(v.device[c0.ring[k]], v.device[c0.ring[(k + 1) % c0.ring.size()]]).latUs);
  m.intra = LinkClass{std::max(lat, 0.1), v.ringGBs()};
  double netLat = 0;
  for (const Channel& c : v.channels)
    for (int nic : {c.entryNic, c.exitNic})
      if (nic >= 0) netLat = std::max(netLat, nicLatencyUs(s.nodes[nic].nicType));
  const double net = v.netGBs();
  m.inter = LinkClass{netLat > 0 ? netLat : 20, net > 0 ? net : m.inter.bandwidthGBs};
  if (s.nodes[v.device[0]].type == NodeType::Gpu) m.reduceGBs = kGpuReduceGBs;
  m.shmArena = false;
  return m;
}

std::vector<SimRow> simulateAllReduce(const View& v, const std::vector<size_t>& sizes) {
  const CostModel m = costModelFor(v);
  const int n = v.nranks();
  std::vector<SimRow> out;
  for (size_t bytes : sizes) {
    for (Algo a : {Algo::Ring, Algo::DoubleBinaryTree, Algo::RecursiveDoubling,
                   Algo::HalvingDoubling, Algo::Direct}) {
      CollArgs args;
      args.type = CollType::AllReduce;
      args.eltSize = 4;
      args.count = bytes / 4;
      const Choice c = evaluate(a, args, m);
      SimRow r;
      r.algo = a;
      r.bytes = bytes;
      r.chunkBytes = c.chunkBytes;
      r.us = c.estUs;
      const double algbw = c.estUs > 0 ? bytes / c.estUs / 1e3 : 0;
      r.busGBs = n > 1 ? algbw * 2.0 * (n - 1) / n : algbw;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace topo
}  // namespace weft
