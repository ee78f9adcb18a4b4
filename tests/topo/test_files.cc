// Every shipped topology file: loads, has the paths and the rings and NIC
// choices the View promises (docs/topology.md).
#include <dirent.h>

#include <algorithm>
#include <map>

#include "topo/view.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;
using ttest::load;

namespace {

int id(const System& s, const char* name) {
  const int i = s.find(name);
  REQUIRE(i >= 0);
  return i;
}

PathClass cls(const System& s, const char* a, const char* b) {
  return s.path(id(s, a), id(s, b)).cls;
}
double bw(const System& s, const char* a, const char* b) {
  return s.path(id(s, a), id(s, b)).bwGBs;
}

// Bandwidth each channel set takes from each directed link.
std::map<std::pair<int, bool>, double> linkUse(const View& v) {
  std::map<std::pair<int, bool>, double> use;
  for (const Channel& c : v.channels)
    for (size_t k = 0; k < c.ring.size() && c.ring.size() > 1; ++k) {
      const Path& p =
          v.system->path(v.device[c.ring[k]], v.device[c.ring[(k + 1) % c.ring.size()]]);
      for (const Hop& h : p.hops) use[{h.link, h.forward}] += c.bwGBs * h.share;
    }
  return use;
}

void checkRingsArePermutations(const View& v) {
  for (const Channel& c : v.channels) {
    std::vector<int> r = c.ring, ch = c.chain;
    std::sort(r.begin(), r.end());
    std::sort(ch.begin(), ch.end());
    for (int i = 0; i < v.ranksPerNode; ++i) {
      REQUIRE(r[i] == i);
      REQUIRE(ch[i] == i);
    }
  }
}

}  // namespace

TEST_CASE("every file in docs/topologies is listed, loads and has symmetric paths", "[topo]") {
  std::vector<std::string> onDisk;
  DIR* d = opendir(ttest::topologyDir().c_str());
  REQUIRE(d);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 4 && n.substr(n.size() - 4) == ".xml") onDisk.push_back(n);
  }
  closedir(d);
  std::sort(onDisk.begin(), onDisk.end());
  std::vector<std::string> listed = ttest::shippedFiles();
  std::sort(listed.begin(), listed.end());
  REQUIRE(onDisk == listed);
  for (const std::string& f : listed) {
    INFO(f);
    const System s = load(f);
    for (size_t a = 0; a < s.nodes.size(); ++a)
      for (size_t b = 0; b < s.nodes.size(); ++b) {
        const Path &p = s.path(a, b), &q = s.path(b, a);
        REQUIRE(p.cls == q.cls);
        REQUIRE(p.bwGBs == Approx(q.bwGBs));
      }
    // Every rank layout up to 2x the devices builds, rings are permutations.
    const int devs = static_cast<int>(
        std::max(s.nodesOf(NodeType::Gpu).size(), s.nodesOf(NodeType::Numa).size()));
    for (int rpn = 1; rpn <= 2 * devs; ++rpn) {
      View v;
      REQUIRE(View::build(s, 2, rpn, &v).isOk());
      REQUIRE(!v.channels.empty());
      REQUIRE(v.channels.size() <= static_cast<size_t>(kMaxChannels));
      checkRingsArePermutations(v);
      // The channels never take more than a link carries.
      for (const auto& u : linkUse(v))
        REQUIRE(u.second <= s.links[u.first.first].bwGBs * (1 + 1e-9));
    }
  }
}

TEST_CASE("DGX-1: path classes and NVLink-only rings that use every NVLink", "[topo]") {
  const System s = load("dgx1-v100.xml");
  REQUIRE(cls(s, "gpu0", "gpu3") == PathClass::Nvl);
  REQUIRE(bw(s, "gpu0", "gpu3") == Approx(50));
  REQUIRE(cls(s, "gpu0", "gpu1") == PathClass::Nvl);
  REQUIRE(bw(s, "gpu0", "gpu1") == Approx(25));
  REQUIRE(cls(s, "gpu0", "gpu5") == PathClass::Sys);
  REQUIRE(cls(s, "gpu0", "nic0") == PathClass::Pix);
  REQUIRE(cls(s, "gpu0", "nic1") == PathClass::Phb);
  REQUIRE(cls(s, "gpu0", "nic2") == PathClass::Sys);
  View v;
  REQUIRE(View::build(s, 1, 8, &v).isOk());
  REQUIRE(v.channels.size() == 6);
  for (int c = 0; c < 6; ++c) {
    REQUIRE(v.nvlinkOnly(c));
    REQUIRE(v.channels[c].bwGBs == Approx(25));
  }
  REQUIRE(v.ringGBs() == Approx(150));  // 6 links of 25 GB/s per GPU
  // Every NVLink, both directions, carries exactly its bandwidth.
  const auto use = linkUse(v);
  int nvlinks = 0;
  for (size_t i = 0; i < s.links.size(); ++i) {
    if (s.links[i].type != LinkType::NvLink) continue;
    ++nvlinks;
    for (bool fwd : {true, false}) {
      auto it = use.find({static_cast<int>(i), fwd});
      REQUIRE(it != use.end());
      REQUIRE(it->second == Approx(s.links[i].bwGBs));
    }
  }
  REQUIRE(nvlinks == 16);
}

TEST_CASE("DGX A100 and H100: NVSwitch rings at the full NVLink bandwidth, several channels",
          "[topo]") {
  for (auto fb : {std::make_pair("dgx-a100.xml", 300.0), std::make_pair("dgx-h100.xml", 450.0)}) {
    INFO(fb.first);
    const System s = load(fb.first);
    REQUIRE(cls(s, "gpu0", "gpu7") == PathClass::Nvl);
    REQUIRE(bw(s, "gpu0", "gpu7") == Approx(fb.second));
    REQUIRE(cls(s, "gpu0", "nic0") == PathClass::Pix);
    REQUIRE(cls(s, "gpu0", "nic7") == PathClass::Sys);
    View v;
    REQUIRE(View::build(s, 1, 8, &v).isOk());
    REQUIRE(v.channels.size() >= 2);
    REQUIRE(v.ringGBs() == Approx(fb.second));
    for (int c = 0; c < static_cast<int>(v.channels.size()); ++c) REQUIRE(v.nvlinkOnly(c));
    REQUIRE(v.groups(Group::NvLinkIsland).size() == 1);
  }
}

TEST_CASE("PCIe box: rings cross the socket link twice, never four times", "[topo]") {
  const System s = load("pcie-2s-4gpu-2nic.xml");
  REQUIRE(cls(s, "gpu0", "gpu1") == PathClass::Pix);
  REQUIRE(cls(s, "gpu1", "gpu2") == PathClass::Sys);
  REQUIRE(cls(s, "gpu2", "nic1") == PathClass::Pix);
  View v;
  REQUIRE(View::build(s, 1, 4, &v).isOk());
  for (int c = 0; c < static_cast<int>(v.channels.size()); ++c) {
    REQUIRE(v.crossings(c) == 2);
    REQUIRE_FALSE(v.nvlinkOnly(c));
  }
  // The best total: one switch uplink per direction is the bottleneck.
  REQUIRE(v.ringGBs() == Approx(31.504));
  REQUIRE(v.groups(Group::Numa).size() == 2);
  REQUIRE(v.groups(Group::NvLinkIsland).size() == 4);
  // Two ranks per GPU: ranks on one GPU stay neighbours.
  REQUIRE(View::build(s, 1, 8, &v).isOk());
  for (int c = 0; c < static_cast<int>(v.channels.size()); ++c) REQUIRE(v.crossings(c) == 2);
}

TEST_CASE("CPU-only 2-socket: ranks in NUMA blocks, two crossings, NUMA groups", "[topo]") {
  const System s = load("cpu-2s.xml");
  REQUIRE(cls(s, "numa0", "numa1") == PathClass::Sys);
  REQUIRE(bw(s, "numa0", "numa1") == Approx(144));
  View v;
  REQUIRE(View::build(s, 1, 16, &v).isOk());
  for (int r = 0; r < 16; ++r) REQUIRE(v.device[r] == (r < 8 ? id(s, "numa0") : id(s, "numa1")));
  for (int c = 0; c < static_cast<int>(v.channels.size()); ++c) REQUIRE(v.crossings(c) == 2);
  const auto g = v.groups(Group::Numa);
  REQUIRE(g.size() == 2);
  REQUIRE(g[0].size() == 8);
}

TEST_CASE("across nodes each channel enters and leaves through a NIC closest to its GPU",
          "[topo]") {
  for (const std::string& f : ttest::shippedFiles()) {
    INFO(f);
    const System s = load(f);
    const std::vector<int> nics = s.nodesOf(NodeType::Nic);
    const int rpn = static_cast<int>(
        std::max(s.nodesOf(NodeType::Gpu).size(), s.nodesOf(NodeType::Numa).size()));
    View v;
    REQUIRE(View::build(s, 4, rpn, &v).isOk());
    std::map<int, int> used;
    for (const Channel& c : v.channels) {
      for (auto end : {std::make_pair(c.chain.front(), c.entryNic),
                       std::make_pair(c.chain.back(), c.exitNic)}) {
        REQUIRE(end.second >= 0);
        ++used[end.second];
        const PathClass got = s.path(v.device[end.first], end.second).cls;
        for (int n : nics) REQUIRE(got <= s.path(v.device[end.first], n).cls);
      }
    }
    // Enough channels that every NIC carries one.
    REQUIRE(used.size() == nics.size());
    // The global ring visits every rank once, node after node.
    std::vector<int> ring = v.globalRing(0);
    REQUIRE(ring.size() == static_cast<size_t>(4 * rpn));
    std::sort(ring.begin(), ring.end());
    for (int i = 0; i < 4 * rpn; ++i) REQUIRE(ring[i] == i);
  }
  // On the PCIe box the cut removes a socket crossing: each chain crosses once.
  const System s = load("pcie-2s-4gpu-2nic.xml");
  View v;
  REQUIRE(View::build(s, 2, 4, &v).isOk());
  for (const Channel& c : v.channels) {
    int cross = 0;
    for (size_t k = 0; k + 1 < c.chain.size(); ++k)
      cross += s.path(v.device[c.chain[k]], v.device[c.chain[k + 1]]).cls == PathClass::Sys;
    REQUIRE(cross == 1);
    REQUIRE(c.entryNic != c.exitNic);
  }
}
