#include "topo/nic_choice.h"

#include <algorithm>
#include <cmath>

namespace weft {
namespace topo {
namespace {

bool isRdma(const Node& n) { return n.type == NodeType::Nic && (n.nicType == "ib" || n.nicType == "roce"); }

// What a rank at `dev` gets through `nic`: the path, capped by the port.
double reachGBs(const System& s, int dev, int nic) {
  const double port = s.nodes[nic].speedGbps > 0 ? s.nodes[nic].speedGbps / 8 : 1e18;
  return std::min(s.path(dev, nic).bwGBs, port);
}

}  // namespace

std::vector<int> rdmaNicPerLocalRank(const View& v) {
  std::vector<int> out(v.device.size(), -1);
  if (!v.system) return out;
  const System& s = *v.system;
  std::vector<int> nics;
  for (int n : s.nodesOf(NodeType::Nic))
    if (isRdma(s.nodes[n])) nics.push_back(n);
  if (nics.empty()) return out;
  std::vector<int> uses(s.nodes.size(), 0);
  for (size_t r = 0; r < v.device.size(); ++r) {
    const int dev = v.device[r];
    int best = -1;
    for (int n : nics) {
      if (best < 0) {
        best = n;
        continue;
      }
      const PathClass pc = s.path(dev, n).cls, bc = s.path(dev, best).cls;
      if (pc != bc) {
        if (pc < bc) best = n;
        continue;
      }
      const double pg = reachGBs(s, dev, n), bg = reachGBs(s, dev, best);
      if (std::fabs(pg - bg) > 1e-9) {
        if (pg > bg) best = n;
        continue;
      }
      if (uses[n] < uses[best]) best = n;
    }
    ++uses[best];
    out[r] = best;
  }
  return out;
}

std::string rdmaNicName(const View& v, int local) {
  const std::vector<int> nics = rdmaNicPerLocalRank(v);
  if (local < 0 || static_cast<size_t>(local) >= nics.size() || nics[local] < 0) return "";
  return v.system->nodes[nics[local]].name;
}

}  // namespace topo
}  // namespace weft
