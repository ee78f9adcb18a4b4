#include "topo/system.h"

#include <algorithm>
#include <deque>

#include "topo/link_table.h"

namespace weft {
namespace topo {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::Cpu:
      return "cpu";
    case NodeType::Numa:
      return "numa";
    case NodeType::Pci:
      return "pci";
    case NodeType::Gpu:
      return "gpu";
    case NodeType::Nic:
      return "nic";
    case NodeType::NvSwitch:
      return "nvswitch";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::Pcie:
      return "pcie";
    case LinkType::NvLink:
      return "nvlink";
    case LinkType::Smp:
      return "smp";
    case LinkType::Mem:
      return "mem";
  }
  return "?";
}

const char* pathClassName(PathClass c) {
  switch (c) {
    case PathClass::Loc:
      return "LOC";
    case PathClass::Nvl:
      return "NVL";
    case PathClass::Pix:
      return "PIX";
    case PathClass::Pxb:
      return "PXB";
    case PathClass::Phb:
      return "PHB";
    case PathClass::Sys:
      return "SYS";
    case PathClass::None:
      return "-";
  }
  return "?";
}

int System::addNode(const Node& n) {
  finalized_ = false;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int System::addLink(Link l) {
  finalized_ = false;
  fillLinkDefaults(&l);
  links.push_back(l);
  return static_cast<int>(links.size()) - 1;
}

int System::find(const std::string& id) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

std::vector<int> System::nodesOf(NodeType t) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].type == t) out.push_back(static_cast<int>(i));
  return out;
}

int System::numaOf(int node) const {
  for (int n = node, guard = 0; n >= 0 && guard <= static_cast<int>(nodes.size()); ++guard) {
    if (nodes[n].type == NodeType::Numa) return n;
    n = nodes[n].parent;
  }
  return -1;
}

int System::cpuOf(int node) const {
  for (int n = node, guard = 0; n >= 0 && guard <= static_cast<int>(nodes.size()); ++guard) {
    if (nodes[n].type == NodeType::Cpu) return n;
    n = nodes[n].parent;
  }
  return -1;
}

const Path& System::path(int from, int to) const {
  static const Path kNone;
  const int a = endpoint_[from], b = endpoint_[to];
  if (a < 0 || b < 0) return kNone;
  return paths_[static_cast<size_t>(a) * endpointCount_ + b];
}

Status System::finalize() {
  finalized_ = false;
  const int n = static_cast<int>(nodes.size());
  if (nodesOf(NodeType::Cpu).empty()) return invalidArgument("the system has no cpu");
  size_t endpoints = 0;
  for (const Node& x : nodes)
    endpoints += x.type == NodeType::Gpu || x.type == NodeType::Nic || x.type == NodeType::Numa;
  if (nodes.size() > kMaxNodes || links.size() > kMaxLinks || endpoints > kMaxEndpoints)
    return invalidArgument(
        strFormat("%zu nodes, %zu links, %zu gpus + nics + numa nodes: more "
                  "than weft models (%zu, %zu, %zu)",
                  nodes.size(), links.size(), endpoints, kMaxNodes, kMaxLinks, kMaxEndpoints));
  for (int i = 0; i < n; ++i) {
    const Node& x = nodes[i];
    const int p = x.parent;
    if (p < -1 || p >= n || p == i)
      return invalidArgument(strFormat("%s: bad parent", x.id.c_str()));
    const bool needsParent = x.type != NodeType::Cpu && x.type != NodeType::NvSwitch;
    if (needsParent != (p >= 0))
      return invalidArgument(strFormat(
          "%s (%s) %s", x.id.c_str(), nodeTypeName(x.type),
          needsParent ? "must sit below a numa node or pci switch" : "cannot have a parent"));
    if (p >= 0) {
      const NodeType pt = nodes[p].type;
      const bool ok = x.type == NodeType::Numa ? pt == NodeType::Cpu
                                               : pt == NodeType::Numa || pt == NodeType::Pci;
      if (!ok)
        return invalidArgument(strFormat("%s (%s) cannot sit below %s (%s)", x.id.c_str(),
                                         nodeTypeName(x.type), nodes[p].id.c_str(),
                                         nodeTypeName(pt)));
    }
    if (numaOf(i) < 0 && x.type != NodeType::Cpu && x.type != NodeType::NvSwitch)
      return invalidArgument(strFormat("%s: no numa node above it", x.id.c_str()));
    if (p >= 0 && std::none_of(links.begin(), links.end(), [&](const Link& l) {
          return l.a == p && l.b == i && l.type != LinkType::NvLink;
        }))
      return invalidArgument(
          strFormat("%s: no link to its parent %s", x.id.c_str(), nodes[p].id.c_str()));
  }
  for (const Link& l : links) {
    if (l.a < 0 || l.a >= n || l.b < 0 || l.b >= n || l.a == l.b)
      return invalidArgument("a link with bad ends");
    if (!(l.bwGBs > 0) || l.bwGBs > 1e6 || l.latUs < 0 || l.latUs > 1e6)
      return invalidArgument(
          strFormat("link %s-%s: bandwidth %.3g GB/s, latency %.3g us out of "
                    "range (unknown generation?)",
                    nodes[l.a].id.c_str(), nodes[l.b].id.c_str(), l.bwGBs, l.latUs));
    const NodeType ta = nodes[l.a].type, tb = nodes[l.b].type;
    auto is = [](NodeType t, std::initializer_list<NodeType> ok) {
      return std::find(ok.begin(), ok.end(), t) != ok.end();
    };
    bool ok = true;
    switch (l.type) {
      case LinkType::NvLink:
        ok = is(ta, {NodeType::Gpu, NodeType::NvSwitch}) &&
             is(tb, {NodeType::Gpu, NodeType::NvSwitch}) &&
             !(ta == NodeType::NvSwitch && tb == NodeType::NvSwitch);
        break;
      case LinkType::Smp:
        ok = ta == NodeType::Cpu && tb == NodeType::Cpu;
        break;
      case LinkType::Mem:
        ok = ta == NodeType::Cpu && tb == NodeType::Numa;
        break;
      case LinkType::Pcie:
        ok = is(ta, {NodeType::Numa, NodeType::Pci}) && nodes[l.b].parent == l.a;
        break;
    }
    if (!ok)
      return invalidArgument(strFormat("a %s link cannot join %s (%s) and %s (%s)",
                                       linkTypeName(l.type), nodes[l.a].id.c_str(),
                                       nodeTypeName(ta), nodes[l.b].id.c_str(), nodeTypeName(tb)));
  }
  computePaths();
  finalized_ = true;
  return Status();
}

namespace {

bool isEndpoint(NodeType t) {
  return t == NodeType::Gpu || t == NodeType::Nic || t == NodeType::Numa;
}

}  // namespace

Path System::nvlinkPath(int a, int b) const {
  Path p;
  if (nodes[a].type != NodeType::Gpu || nodes[b].type != NodeType::Gpu) return p;
  // Bandwidth to each neighbour over NVLink, and the links that carry it.
  struct Via {
    int node;
    double bwA = 0, bwB = 0;
    std::vector<int> linksA, linksB;
  };
  std::vector<Via> via;
  auto slot = [&](int node) -> Via& {
    for (Via& v : via)
      if (v.node == node) return v;
    via.push_back(Via{node, 0, 0, {}, {}});
    return via.back();
  };
  double lat = 0;
  std::vector<int> incident = adj_[a];
  incident.insert(incident.end(), adj_[b].begin(), adj_[b].end());
  std::sort(incident.begin(), incident.end());
  incident.erase(std::unique(incident.begin(), incident.end()), incident.end());
  for (int li : incident) {
    const size_t i = static_cast<size_t>(li);
    const Link& l = links[i];
    if (l.type != LinkType::NvLink) continue;
    for (int end = 0; end < 2; ++end) {
      const int self = end ? l.b : l.a, other = end ? l.a : l.b;
      if (self == a && other == b) {
        Via& v = slot(b);
        v.bwA += l.bwGBs;
        v.linksA.push_back(static_cast<int>(i));
        lat = l.latUs;
      } else if ((self == a || self == b) && nodes[other].type == NodeType::NvSwitch) {
        Via& v = slot(other);
        (self == a ? v.bwA : v.bwB) += l.bwGBs;
        (self == a ? v.linksA : v.linksB).push_back(static_cast<int>(i));
        lat = std::max(lat, 2 * l.latUs);
      }
    }
  }
  for (const Via& v : via) p.bwGBs += v.node == b ? v.bwA : std::min(v.bwA, v.bwB);
  if (p.bwGBs <= 0) return p;
  p.cls = PathClass::Nvl;
  p.latUs = lat;
  // Traffic spreads over the links in proportion to what each route carries.
  for (const Via& v : via) {
    const double routeBw = v.node == b ? v.bwA : std::min(v.bwA, v.bwB);
    if (routeBw <= 0) continue;
    for (int li : v.linksA)
      p.hops.push_back(Hop{li, links[li].a == a, routeBw / p.bwGBs * links[li].bwGBs / v.bwA});
    for (int li : v.linksB)
      p.hops.push_back(Hop{li, links[li].b == b, routeBw / p.bwGBs * links[li].bwGBs / v.bwB});
  }
  return p;
}

void System::treePathsFrom(int a) {
  const int n = static_cast<int>(nodes.size());
  // Breadth first over PCI, memory and SMP links: fewest hops, then widest.
  std::vector<int> dist(n, -1), prevLink(n, -1);
  std::vector<double> bw(n, 0);
  std::deque<int> q{a};
  dist[a] = 0;
  bw[a] = 1e18;
  while (!q.empty()) {
    const int u = q.front();
    q.pop_front();
    // GPUs and NICs end routes; a NUMA node is an endpoint too, but its
    // devices' traffic to each other or to other sockets passes its host
    // bridge, so routes go through it.
    if (u != a && (nodes[u].type == NodeType::Gpu || nodes[u].type == NodeType::Nic)) continue;
    for (int li : adj_[u]) {
      const Link& l = links[li];
      if (l.type == LinkType::NvLink) continue;
      const int v = l.a == u ? l.b : l.a;
      const double w = std::min(bw[u], l.bwGBs);
      if (dist[v] < 0) {
        dist[v] = dist[u] + 1;
        bw[v] = w;
        prevLink[v] = li;
        q.push_back(v);
      } else if (dist[v] == dist[u] + 1 && w > bw[v]) {
        bw[v] = w;
        prevLink[v] = li;
      }
    }
  }
  for (int b = 0; b < n; ++b) {
    if (b == a || endpoint_[b] < 0 || dist[b] < 0) continue;
    Path& p = paths_[static_cast<size_t>(endpoint_[a]) * endpointCount_ + endpoint_[b]];
    if (p.cls != PathClass::None) continue;  // NVLink
    std::vector<int> seq{b};
    for (int v = b; v != a;) {
      const Link& l = links[prevLink[v]];
      const int u = l.a == v ? l.b : l.a;
      p.hops.push_back(Hop{prevLink[v], l.a == u, 1});
      p.latUs += l.latUs;
      seq.push_back(u);
      v = u;
    }
    std::reverse(p.hops.begin(), p.hops.end());
    p.bwGBs = bw[b];
    // Classify: PCI switches crossed, NUMA nodes touched (endpoints included).
    int switches = 0, numas = 0;
    bool cpu = false;
    for (size_t i = 0; i < seq.size(); ++i) {
      const NodeType t = nodes[seq[i]].type;
      const bool interior = i > 0 && i + 1 < seq.size();
      if (t == NodeType::Pci && interior) ++switches;
      if (t == NodeType::Numa) ++numas;
      if (t == NodeType::Cpu) cpu = true;
    }
    if (numas > 1 || cpu)
      p.cls = PathClass::Sys;
    else if (numas == 1)
      p.cls = PathClass::Phb;
    else
      p.cls = switches <= 1 ? PathClass::Pix : PathClass::Pxb;
  }
}

void System::computePaths() {
  const size_t n = nodes.size();
  adj_.assign(n, {});
  for (size_t i = 0; i < links.size(); ++i) {
    adj_[links[i].a].push_back(static_cast<int>(i));
    adj_[links[i].b].push_back(static_cast<int>(i));
  }
  endpoint_.assign(n, -1);
  endpointCount_ = 0;
  for (size_t i = 0; i < n; ++i)
    if (isEndpoint(nodes[i].type)) endpoint_[i] = static_cast<int>(endpointCount_++);
  paths_.assign(endpointCount_ * endpointCount_, Path());
  for (size_t a = 0; a < n; ++a) {
    if (endpoint_[a] < 0) continue;
    for (size_t b = 0; b < n; ++b) {
      if (endpoint_[b] < 0) continue;
      Path& p = paths_[endpoint_[a] * endpointCount_ + endpoint_[b]];
      if (a == b) {
        p.cls = PathClass::Loc;
        p.bwGBs = kMemLinkGBs;
        for (int li : adj_[a])
          if (links[li].type == LinkType::Mem) p.bwGBs = links[li].bwGBs;
      } else if (nodes[a].type == NodeType::Gpu && nodes[b].type == NodeType::Gpu) {
        p = nvlinkPath(static_cast<int>(a), static_cast<int>(b));
      }
    }
    treePathsFrom(static_cast<int>(a));
  }
}

}  // namespace topo
}  // namespace weft
