#include "topo/view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace weft {
namespace topo {
namespace {

constexpr size_t kMaxSearchDevices = 64;

// Directed link capacities and a depth-first ring search over devices.
class RingSearch {
 public:
  RingSearch(const System& s, const std::vector<int>& devs) : s_(s), devs_(devs) {
    base_.resize(s.links.size() * 2);
    for (size_t i = 0; i < s.links.size(); ++i) base_[2 * i] = base_[2 * i + 1] = s.links[i].bwGBs;
  }

  // Rings at speed `speed` until none fits or kMaxChannels; each a list of
  // indices into devs.
  std::vector<std::vector<int>> ringsAt(double speed, long* budget) {
    cap_ = base_;
    speed_ = speed;
    std::vector<std::vector<int>> out;
    while (static_cast<int>(out.size()) < kMaxChannels) {
      std::vector<int> ring{0};
      std::vector<bool> used(devs_.size(), false);
      used[0] = true;
      if (!dfs(&ring, &used, budget)) break;
      out.push_back(ring);  // dfs leaves its capacities taken
      std::vector<int> rev(ring.rbegin(), ring.rend());
      if (static_cast<int>(out.size()) < kMaxChannels && devs_.size() > 2 && fits(rev)) {
        take(rev, -1);
        out.push_back(rev);
      }
    }
    return out;
  }

 private:
  const Path& path(int i, int j) const { return s_.path(devs_[i], devs_[j]); }
  bool hopFits(int i, int j) const {
    const Path& p = path(i, j);
    if (p.cls == PathClass::None || p.bwGBs + 1e-9 < speed_) return false;
    for (const Hop& h : p.hops)
      if (cap_[2 * h.link + !h.forward] + 1e-9 < speed_ * h.share) return false;
    return true;
  }
  // sign -1 takes the hop's bandwidth, +1 gives it back.
  void hop(int i, int j, int sign) {
    for (const Hop& h : path(i, j).hops) cap_[2 * h.link + !h.forward] += sign * speed_ * h.share;
  }
  bool fits(const std::vector<int>& ring) {
    std::vector<double> keep = cap_;
    bool ok = true;
    for (size_t k = 0; ok && k < ring.size(); ++k) {
      const int i = ring[k], j = ring[(k + 1) % ring.size()];
      ok = hopFits(i, j);
      if (ok) hop(i, j, -1);
    }
    cap_ = keep;
    return ok;
  }
  void take(const std::vector<int>& ring, int sign) {
    for (size_t k = 0; k < ring.size(); ++k) hop(ring[k], ring[(k + 1) % ring.size()], sign);
  }
  // The least residual bandwidth a hop would leave, per unit of share.
  double residual(int i, int j) const {
    double r = 1e18;
    for (const Hop& h : path(i, j).hops) r = std::min(r, cap_[2 * h.link + !h.forward] / h.share);
    return r;
  }
  bool dfs(std::vector<int>* ring, std::vector<bool>* used, long* budget) {
    if (--*budget < 0) return false;
    const int last = ring->back(), m = static_cast<int>(devs_.size());
    if (static_cast<int>(ring->size()) == m) {
      if (!hopFits(last, (*ring)[0])) return false;
      hop(last, (*ring)[0], -1);
      return true;
    }
    std::vector<int> next;
    for (int j = 0; j < m; ++j)
      if (!(*used)[j] && hopFits(last, j)) next.push_back(j);
    std::stable_sort(next.begin(), next.end(), [&](int x, int y) {
      const PathClass cx = path(last, x).cls, cy = path(last, y).cls;
      if (cx != cy) return cx < cy;
      return residual(last, x) > residual(last, y) + 1e-9;
    });
    for (int j : next) {
      hop(last, j, -1);
      ring->push_back(j);
      (*used)[j] = true;
      if (dfs(ring, used, budget)) return true;
      (*used)[j] = false;
      ring->pop_back();
      hop(last, j, +1);
    }
    return false;
  }

  const System& s_;
  const std::vector<int>& devs_;
  std::vector<double> base_, cap_;
  double speed_ = 0;
};

// The NIC closest to `dev`: best class, then bandwidth, then least used.
int closestNic(const System& s, int dev, const std::vector<int>& nics,
               const std::map<int, int>& uses) {
  int best = -1;
  for (int n : nics) {
    if (best < 0) {
      best = n;
      continue;
    }
    const Path &p = s.path(dev, n), &q = s.path(dev, best);
    if (p.cls != q.cls) {
      if (p.cls < q.cls) best = n;
      continue;
    }
    if (std::fabs(p.bwGBs - q.bwGBs) > 1e-9) {
      if (p.bwGBs > q.bwGBs) best = n;
      continue;
    }
    const int un = uses.count(n) ? uses.at(n) : 0, ub = uses.count(best) ? uses.at(best) : 0;
    if (un < ub) best = n;
  }
  return best;
}

double nicGBs(const System& s, int dev, int nic) {
  const double port = s.nodes[nic].speedGbps > 0 ? s.nodes[nic].speedGbps / 8 : 1e18;
  return std::min(port, s.path(dev, nic).bwGBs);
}

}  // namespace

Status View::build(const System& sys, int nodes, int ranksPerNode, View* out) {
  if (!sys.finalized()) return invalidArgument("topology: the system is not finalized");
  if (nodes < 1 || nodes > 65536) return invalidArgument(strFormat("topology: %d nodes", nodes));
  if (ranksPerNode < 1 || ranksPerNode > 1024)
    return invalidArgument(strFormat("topology: %d ranks per node", ranksPerNode));
  View v;
  v.system = &sys;
  v.nodes = nodes;
  v.ranksPerNode = ranksPerNode;
  const std::vector<int> gpus = sys.nodesOf(NodeType::Gpu), numas = sys.nodesOf(NodeType::Numa);
  if (numas.empty()) return invalidArgument("topology: no numa node");
  for (int r = 0; r < ranksPerNode; ++r)
    v.device.push_back(gpus.empty() ? numas[static_cast<size_t>(r) * numas.size() / ranksPerNode]
                                    : gpus[r % gpus.size()]);

  // Distinct devices in rank order, and the ranks on each.
  std::vector<int> devs;
  std::vector<std::vector<int>> ranksOn;
  for (int r = 0; r < ranksPerNode; ++r) {
    auto it = std::find(devs.begin(), devs.end(), v.device[r]);
    if (it == devs.end()) {
      devs.push_back(v.device[r]);
      ranksOn.emplace_back();
      it = devs.end() - 1;
    }
    ranksOn[it - devs.begin()].push_back(r);
  }
  auto expand = [&](const std::vector<int>& devRing) {
    std::vector<int> ring;
    for (int d : devRing) ring.insert(ring.end(), ranksOn[d].begin(), ranksOn[d].end());
    return ring;
  };

  if (devs.size() == 1) {
    Channel c;
    c.bwGBs = sys.path(devs[0], devs[0]).bwGBs;
    c.ring = expand({0});
    v.channels.push_back(c);
  } else {
    std::vector<double> speeds;
    for (size_t i = 0; i < devs.size() && devs.size() <= kMaxSearchDevices; ++i)
      for (size_t j = 0; j < devs.size(); ++j) {
        const Path& p = sys.path(devs[i], devs[j]);
        if (i == j || p.cls == PathClass::None) continue;
        for (int k = 1; k <= kMaxChannels; ++k) speeds.push_back(p.bwGBs / k);
      }
    std::sort(speeds.begin(), speeds.end(), std::greater<double>());
    speeds.erase(std::unique(speeds.begin(), speeds.end(),
                             [](double a, double b) { return std::fabs(a - b) < 1e-9 * a; }),
                 speeds.end());
    RingSearch search(sys, devs);
    // Depth-first steps over all speeds: bounds init time. Beyond
    // kMaxSearchDevices devices no search runs (the fallback below).
    long budget = devs.size() <= kMaxSearchDevices ? 500000 : 0;
    std::vector<std::vector<int>> best;
    double bestSpeed = 0, bestTotal = 0;
    for (double s : speeds) {
      if (s * kMaxChannels < bestTotal * (1 - 1e-9)) break;
      const long start = std::min<long>(budget, 50000);
      long b = start;
      std::vector<std::vector<int>> rings = search.ringsAt(s, &b);
      budget -= start - std::max(b, 0L);
      const double total = s * rings.size();
      const bool better = total > bestTotal * (1 + 1e-9);
      const bool tie = !better && total >= bestTotal * (1 - 1e-9);
      if (better || (tie && best.size() < 2 && rings.size() >= 2)) {
        best = rings;
        bestSpeed = s;
        bestTotal = total;
      }
      if (budget <= 0) break;
    }
    if (best.empty()) {
      // Nothing found (too many devices, or nothing fits): one ring over the
      // devices grouped by NUMA node and PCI parent, at its narrowest hop.
      std::vector<int> order(devs.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        const int nx = sys.numaOf(devs[x]), ny = sys.numaOf(devs[y]);
        if (nx != ny) return nx < ny;
        return sys.nodes[devs[x]].parent < sys.nodes[devs[y]].parent;
      });
      best.push_back(order);
      bestSpeed = 1e18;
      for (size_t k = 0; k < order.size(); ++k)
        bestSpeed = std::min(bestSpeed,
                             sys.path(devs[order[k]], devs[order[(k + 1) % order.size()]]).bwGBs);
    }
    for (auto& r : best) {
      Channel c;
      c.bwGBs = bestSpeed;
      std::vector<int> d;
      for (int i : r) d.push_back(i);
      c.ring = expand(d);
      v.channels.push_back(c);
    }
  }

  // Entry and exit of each channel across nodes. With more NICs than
  // channels, each ring is split into k channels of 1/k of its speed, so
  // that every NIC can carry one.
  const std::vector<int> nics = sys.nodesOf(NodeType::Nic);
  const int nch = static_cast<int>(v.channels.size());
  const int k = std::min((static_cast<int>(nics.size()) + nch - 1) / nch, kMaxChannels / nch);
  if (nodes > 1 && k > 1) {
    std::vector<Channel> split;
    for (int i = 0; i < k; ++i)
      for (Channel c : v.channels) {
        c.bwGBs /= k;
        split.push_back(c);
      }
    v.channels = split;
  }
  std::map<int, int> uses;
  auto usesOf = [&](int nic) { return nic >= 0 && uses.count(nic) ? uses[nic] : 0; };
  for (Channel& c : v.channels) {
    const int n = static_cast<int>(c.ring.size());
    int bestCut = 0, bestIn = -1, bestOut = -1;
    double bestScore = -1, bestHop = 1e18;
    PathClass bestCls = PathClass::Loc;
    int bestSpread = 1 << 30;
    for (int k = 0; k < n; ++k) {
      const int out = c.ring[k], in = c.ring[(k + 1) % n];
      const int nin = nics.empty() ? -1 : closestNic(sys, v.device[in], nics, uses);
      const int nout = nics.empty() ? -1 : closestNic(sys, v.device[out], nics, uses);
      const double score =
          nics.empty() ? 0
                       : std::min(nicGBs(sys, v.device[in], nin), nicGBs(sys, v.device[out], nout));
      // The hop the cut removes: the worst class, then the narrowest.
      const Path& h = sys.path(v.device[out], v.device[in]);
      const bool sameScore = std::fabs(score - bestScore) <= 1e-9;
      const int spread = std::max(usesOf(nin), usesOf(nout));
      const bool worseHop = h.cls > bestCls || (h.cls == bestCls && h.bwGBs < bestHop - 1e-9);
      if (score > bestScore + 1e-9 || (sameScore && spread < bestSpread) ||
          (sameScore && spread == bestSpread && worseHop)) {
        bestSpread = spread;
        bestScore = score;
        bestHop = h.bwGBs;
        bestCls = h.cls;
        bestCut = k;
        bestIn = nin;
        bestOut = nout;
      }
    }
    for (int k = 0; k < n; ++k) c.chain.push_back(c.ring[(bestCut + 1 + k) % n]);
    c.entryNic = bestIn;
    c.exitNic = bestOut;
    if (bestIn >= 0) ++uses[bestIn];
    if (bestOut >= 0 && bestOut != bestIn) ++uses[bestOut];
  }
  *out = std::move(v);
  return Status();
}

double View::ringGBs() const {
  double s = 0;
  for (const Channel& c : channels) s += c.bwGBs;
  return s;
}

double View::netGBs() const {
  std::map<int, double> nic;
  for (const Channel& c : channels) {
    if (c.entryNic >= 0) nic[c.entryNic] = nicGBs(*system, device[c.chain.front()], c.entryNic);
    if (c.exitNic >= 0)
      nic[c.exitNic] = std::max(nic[c.exitNic], nicGBs(*system, device[c.chain.back()], c.exitNic));
  }
  double s = 0;
  for (const auto& kv : nic) s += kv.second;
  return s;
}

std::vector<int> View::globalRing(int c) const {
  std::vector<int> out;
  const std::vector<int>& local = nodes > 1 ? channels[c].chain : channels[c].ring;
  for (int n = 0; n < nodes; ++n)
    for (int r : local) out.push_back(n * ranksPerNode + r);
  return out;
}

int View::treeHead(int t) const { return channels[t % channels.size()].chain.front(); }

double View::hopGBs(int from, int to) const { return system->path(device[from], device[to]).bwGBs; }

int View::crossings(int c) const {
  const std::vector<int>& r = channels[c].ring;
  int n = 0;
  for (size_t k = 0; k < r.size() && r.size() > 1; ++k)
    n += system->path(device[r[k]], device[r[(k + 1) % r.size()]]).cls == PathClass::Sys;
  return n;
}

bool View::nvlinkOnly(int c) const {
  const std::vector<int>& r = channels[c].ring;
  for (size_t k = 0; k < r.size(); ++k) {
    const PathClass cl = system->path(device[r[k]], device[r[(k + 1) % r.size()]]).cls;
    if (cl != PathClass::Nvl && cl != PathClass::Loc) return false;
  }
  return true;
}

std::vector<std::vector<int>> View::groups(Group g) const {
  // A key per local rank; ranks with equal keys on one node form a group.
  std::vector<int> key(ranksPerNode, 0);
  for (int r = 0; r < ranksPerNode; ++r) {
    if (g == Group::Numa) key[r] = system->numaOf(device[r]);
    if (g == Group::NvLinkIsland) {
      // The smallest local rank reachable over LOC / NVL paths.
      key[r] = r;
      for (int q = 0; q < r; ++q) {
        const PathClass cl = system->path(device[q], device[r]).cls;
        if (cl == PathClass::Nvl || cl == PathClass::Loc) {
          key[r] = key[q];
          break;
        }
      }
    }
  }
  std::vector<std::vector<int>> out;
  for (int n = 0; n < nodes; ++n) {
    std::map<int, std::vector<int>> byKey;
    for (int r = 0; r < ranksPerNode; ++r) byKey[key[r]].push_back(n * ranksPerNode + r);
    for (auto& kv : byKey) out.push_back(kv.second);
  }
  return out;
}

std::string View::describe() const {
  std::string s = strFormat("%d node(s) x %d rank(s), %zu channel(s), ring %.1f GB/s", nodes,
                            ranksPerNode, channels.size(), ringGBs());
  if (nodes > 1) s += strFormat(", network %.1f GB/s per node", netGBs());
  for (size_t c = 0; c < channels.size(); ++c) {
    const Channel& ch = channels[c];
    s += strFormat("\n  channel %zu (%.1f GB/s):", c, ch.bwGBs);
    const std::vector<int>& order = nodes > 1 ? ch.chain : ch.ring;
    if (nodes > 1 && ch.entryNic >= 0) s += " [" + system->nodes[ch.entryNic].id + "]";
    for (int r : order) s += strFormat(" %d", r);
    if (nodes > 1 && ch.exitNic >= 0) s += " [" + system->nodes[ch.exitNic].id + "]";
  }
  return s;
}

}  // namespace topo
}  // namespace weft
