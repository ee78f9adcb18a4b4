#include "topo/comm_topo.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "core/log.h"
#include "topo/core_order.h"
#include "topo/detect.h"
#include "topo/link_table.h"
#include "topo/topo_file.h"

namespace weft {
namespace topo {
namespace {

// One System per source per process: detection costs tens of milliseconds
// (hwloc walks sysfs), and every communicator of the process would ask.
std::mutex gCacheMu;
std::map<std::string, std::shared_ptr<const System>> gCache;  // "" = detected
std::set<std::string> gDumped;

System minimalSystem() {
  System s;
  s.name = "unknown (detection failed)";
  Node cpu;
  cpu.type = NodeType::Cpu;
  cpu.id = "cpu0";
  const int c = s.addNode(cpu);
  Node numa;
  numa.type = NodeType::Numa;
  numa.id = "numa0";
  numa.parent = c;
  Link l;
  l.a = c;
  l.b = s.addNode(numa);
  l.type = LinkType::Mem;
  s.addLink(l);
  s.finalize();
  return s;
}

Status systemFor(const Config& cfg, std::shared_ptr<const System>* out) {
  std::lock_guard<std::mutex> lk(gCacheMu);
  auto it = gCache.find(cfg.topoFile);
  if (it != gCache.end()) {
    *out = it->second;
    return Status();
  }
  auto s = std::make_shared<System>();
  if (!cfg.topoFile.empty()) {
    Status st = loadSystemFile(cfg.topoFile, s.get());
    if (st.isError()) return st.withContext("WEFT_TOPO_FILE");
  } else {
    std::vector<std::string> notes;
    Status st = detectSystem(s.get(), &notes);
    if (st.isError()) {
      WEFT_WARN(kInit, "topology detection failed (%s): assuming one socket", st.message().c_str());
      *s = minimalSystem();
    }
    for (const std::string& n : notes) WEFT_INFO(kInit, "topology: %s", n.c_str());
  }
  gCache[cfg.topoFile] = s;
  *out = s;
  return Status();
}

std::string expandPath(std::string p, const std::string& host) {
  for (size_t i; (i = p.find("%h")) != std::string::npos;) p.replace(i, 2, host);
  for (size_t i; (i = p.find("%p")) != std::string::npos;)
    p.replace(i, 2, std::to_string(getpid()));
  return p;
}

std::string encode(const std::vector<int>& order) {
  std::string s;
  for (int x : order) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// A permutation of 0..k-1 from "i0,i1,..."; false on anything else.
bool decode(const std::string& s, int k, std::vector<int>* out) {
  out->clear();
  std::vector<bool> seen(k, false);
  size_t pos = 0;
  while (pos <= s.size() && static_cast<int>(out->size()) < k) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string tok = s.substr(pos, comma - pos);
    if (tok.empty() || tok.size() > 5 || tok.find_first_not_of("0123456789") != std::string::npos)
      return false;
    const int x = std::stoi(tok);
    if (x >= k || seen[x]) return false;
    seen[x] = true;
    out->push_back(x);
    pos = comma + 1;
  }
  return static_cast<int>(out->size()) == k && pos == s.size() + 1;
}

}  // namespace

Status setUpCommTopology(const Config& cfg, const std::vector<PeerInfo>& peers, int rank,
                         const Allgather& allgather, CommTopology* out) {
  CommTopology t;
  WEFT_RETURN_IF_ERROR(systemFor(cfg, &t.system));
  t.source = cfg.topoFile.empty() ? "detected" : "WEFT_TOPO_FILE=" + cfg.topoFile;
  const int n = static_cast<int>(peers.size());
  // Hosts in order of their lowest rank; each host's ranks in rank order.
  std::vector<uint64_t> hostKeys;
  std::vector<std::vector<int>> hostRanks;
  for (int r = 0; r < n; ++r) {
    auto it = std::find(hostKeys.begin(), hostKeys.end(), peers[r].hostHash);
    if (it == hostKeys.end()) {
      hostKeys.push_back(peers[r].hostHash);
      hostRanks.emplace_back();
      it = hostKeys.end() - 1;
    }
    hostRanks[it - hostKeys.begin()].push_back(r);
  }
  t.hosts = static_cast<int>(hostKeys.size());
  const int myHost = static_cast<int>(
      std::find(hostKeys.begin(), hostKeys.end(), peers[rank].hostHash) - hostKeys.begin());
  const std::vector<int>& mine = hostRanks[myHost];
  const int local = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  t.localRank = local;
  // A layout the View does not take (more than 1024 ranks on a host) keeps
  // rank order; every rank still joins the allgather.
  Status vs =
      View::build(*t.system, std::min(t.hosts, 65536), static_cast<int>(mine.size()), &t.view);
  if (vs.isError()) WEFT_WARN(kInit, "topology: %s; rank order kept", vs.message().c_str());
  std::string chain;
  if (vs.isOk()) {
    std::vector<int> local = t.hosts > 1 ? t.view.channels[0].chain : t.view.channels[0].ring;
    std::vector<const std::vector<uint64_t>*> masks;
    for (int r : mine) masks.push_back(&peers[r].cpuMask);
    groupByCore(&local, t.view.device, masks);
    chain = encode(local);
  }
  std::vector<std::string> all;
  WEFT_RETURN_IF_ERROR(allgather(chain, &all));
  if (static_cast<int>(all.size()) != n) return invalidUsage("topology: allgather size mismatch");
  for (int h = 0; h < t.hosts; ++h) {
    const std::vector<int>& ranks = hostRanks[h];
    std::vector<int> order;
    if (!decode(all[ranks[0]], static_cast<int>(ranks.size()), &order)) {
      if (!all[ranks[0]].empty())
        WEFT_WARN(kInit,
                  "topology: rank %d sent an unreadable ring order; host %s keeps rank order",
                  ranks[0], peers[ranks[0]].hostname.c_str());
      order.resize(ranks.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    }
    for (int i : order) t.ringOrder.push_back(ranks[i]);
  }
  t.ringPos.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    t.ringPos[t.ringOrder[i]] = i;
    t.reordered = t.reordered || t.ringOrder[i] != i;
  }
  t.pairedCores = t.hosts == 1 && n >= 4 && (n & (n - 1)) == 0;
  std::set<std::vector<uint64_t>> pairCpus;
  for (int i = 0; t.pairedCores && i < n; i += 2) {
    const std::vector<uint64_t>& a = peers[t.ringOrder[i]].cpuMask;
    int bits = 0;
    for (uint64_t w : a) bits += __builtin_popcountll(w);
    t.pairedCores = bits == 1 && a == peers[t.ringOrder[i + 1]].cpuMask && pairCpus.insert(a).second;
  }
  t.peerClass.assign(n, PathClass::None);
  for (size_t i = 0; i < mine.size(); ++i)
    t.peerClass[mine[i]] =
        vs.isOk() ? t.system->path(t.view.device[local], t.view.device[i]).cls : PathClass::Phb;
  t.peerClass[rank] = PathClass::Loc;

  if (!cfg.topoDumpFile.empty() && local == 0) {
    const std::string path = expandPath(cfg.topoDumpFile, peers[rank].hostname);
    std::lock_guard<std::mutex> lk(gCacheMu);
    if (gDumped.insert(path).second) {
      Status st = dumpSystemFile(*t.system, path);
      if (st.isError()) WEFT_WARN(kInit, "WEFT_TOPO_DUMP_FILE: %s", st.message().c_str());
    }
  }
  if (rank == 0 && vs.isOk() && logEnabled(LogLevel::Info, kInit)) {
    std::string order;
    for (int i = 0; i < n && i < 256; ++i) order += strFormat("%s%d", i ? " " : "", t.ringOrder[i]);
    WEFT_INFO(kInit, "topology (%s): \"%s\", %zu gpu(s), %zu nic(s); view %s\n  ring order %s%s",
              t.source.c_str(), t.system->name.c_str(), t.system->nodesOf(NodeType::Gpu).size(),
              t.system->nodesOf(NodeType::Nic).size(), t.view.describe().c_str(), order.c_str(),
              n > 256 ? " ..." : "");
  }
  *out = std::move(t);
  return Status();
}

std::vector<size_t> transportOrder(const CommTopology& t,
                                   const std::vector<std::unique_ptr<Transport>>& cands, int peer) {
  std::vector<std::string> names;
  const PathClass cls =
      peer < static_cast<int>(t.peerClass.size()) ? t.peerClass[peer] : PathClass::None;
  switch (cls) {
    case PathClass::Loc:
      names = {"self", "shm", "tcp"};
      break;
    case PathClass::Nvl:
    case PathClass::Pix:
    case PathClass::Pxb:
    case PathClass::Phb:
    case PathClass::Sys:
      names = {"shm", "tcp"};
      break;
    case PathClass::None:
      // Another host: the RDMA transports where the communicator built them
      // (ibverbs when asked for, ucx when asked for or UCX found RDMA).
      names = {"ibverbs", "ucx", "tcp"};
      break;
  }
  std::vector<size_t> order;
  for (const std::string& name : names)
    for (size_t i = 0; i < cands.size(); ++i)
      if (name == cands[i]->name()) order.push_back(i);
  for (size_t i = 0; i < cands.size(); ++i)
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  return order;
}

void applyToCostModel(const CommTopology& t, CostModel* m) {
  m->pairedCores = t.pairedCores;
  if (!t.system) return;
  if (t.view.ranksPerNode > 1 && t.view.ringGBs() > 0)
    m->intra.bandwidthGBs = std::min(m->intra.bandwidthGBs, t.view.ringGBs());
  if (t.hosts <= 1) return;
  std::map<int, double> nics;
  double lat = 0;
  for (const Channel& c : t.view.channels)
    for (int nic : {c.entryNic, c.exitNic}) {
      if (nic < 0) continue;
      const Node& nd = t.system->nodes[nic];
      if (nd.speedGbps <= 0) return;  // a speed the graph does not know
      nics[nic] = nd.speedGbps / 8;
      lat = std::max(lat, nicLatencyUs(nd.nicType));
    }
  if (nics.empty()) return;
  double net = 0;
  for (const auto& kv : nics) net += kv.second;
  m->inter.bandwidthGBs = std::min(m->inter.bandwidthGBs, net);
  m->inter.latencyUs = std::max(m->inter.latencyUs, lat);
}

Status buildScheduleInRingOrder(const CommTopology& t, const CollArgs& args, const BuildParams& p,
                                Schedule* out) {
  const Algo a = p.algo == Algo::Auto ? defaultAlgo(args.type) : p.algo;
  const bool ring = args.type == CollType::AllReduce && a == Algo::Ring;
  // A broadcast chain follows the ring up to 32 KiB: ranks that share a
  // core hand small messages over cheaply (4 ranks on 2 cores over tcp:
  // 8 KiB 15.7 -> 11.3 us, 32 KiB 26.0 -> 22.6), while a pipeline of larger
  // chunks ran 10-30% slower at 64 KiB-1 MiB with hops inside a core than
  // with every hop between cores (rank order). A reduce chain gained at
  // every size measured (1 MiB 1332 -> 1013 us).
  constexpr size_t kChainRingBytes = 32 << 10;
  const bool chain = a == Algo::Chain &&
                     ((args.type == CollType::Broadcast &&
                       args.count * args.eltSize <= kChainRingBytes) ||
                      args.type == CollType::Reduce);
  const bool folded =
      args.type == CollType::AllReduce && a == Algo::RecursiveDoubling && t.pairedCores;
  if (!((t.reordered && (ring || chain)) || folded) ||
      static_cast<int>(t.ringOrder.size()) != p.nranks)
    return buildSchedule(args, p, out);
  BuildParams q = p;
  q.rank = t.ringPos[p.rank];
  q.foldPairs = folded;
  CollArgs b = args;
  if (chain) b.root = t.ringPos[args.root];
  WEFT_RETURN_IF_ERROR(buildSchedule(b, q, out));
  for (Step& s : out->steps)
    if (s.peer >= 0) s.peer = t.ringOrder[s.peer];
  return Status();
}

}  // namespace topo
}  // namespace weft
