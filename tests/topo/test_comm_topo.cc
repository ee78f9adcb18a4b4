// What a communicator takes from the topology (comm_topo.h), without a
// communicator: ranks placed on hosts by hand, the allgather done in memory
// from every rank's own contribution.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "topo/comm_topo.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

namespace {

std::vector<PeerInfo> peersOn(const std::vector<int>& hostOfRank) {
  std::vector<PeerInfo> p(hostOfRank.size());
  for (size_t r = 0; r < p.size(); ++r) {
    p[r].rank = static_cast<int>(r);
    p[r].hostHash = 1000 + hostOfRank[r];
    p[r].hostname = "host" + std::to_string(hostOfRank[r]);
  }
  return p;
}

// Runs setUpCommTopology for every rank: a first pass collects what each
// rank contributes, the second hands every rank all contributions.
std::vector<CommTopology> setUpAll(const Config& cfg, const std::vector<PeerInfo>& peers,
                                   const std::vector<std::string>* forced = nullptr) {
  const int n = static_cast<int>(peers.size());
  std::vector<std::string> contrib(n);
  std::vector<CommTopology> out(n);
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < n; ++r) {
      auto gather = [&](const std::string& mine, std::vector<std::string>* all) {
        contrib[r] = mine;
        *all = forced ? *forced : contrib;
        return Status();
      };
      const Status st = setUpCommTopology(cfg, peers, r, gather, &out[r]);
      INFO(st.message());
      REQUIRE(st.isOk());
    }
  return out;
}

// Rank r's schedule for `a` with `algo` on r's topology (ring order applied
// where buildScheduleInRingOrder applies it).
Schedule ringSchedule(const std::vector<CommTopology>& all, int r, const CollArgs& a, Algo algo,
                      size_t chunkBytes = 1 << 20) {
  BuildParams p;
  p.rank = r;
  p.nranks = static_cast<int>(all.size());
  p.algo = algo;
  p.chunkBytes = chunkBytes;
  Schedule s;
  REQUIRE(buildScheduleInRingOrder(all[r], a, p, &s).isOk());
  return s;
}

CollArgs argsOf(CollType type, size_t count, int root = 0) {
  CollArgs a;
  a.type = type;
  a.count = count;
  a.root = root;
  return a;
}

}  // namespace

TEST_CASE("comm topology: ranks follow the View's ring, host by host, the same on every rank",
          "[topo]") {
  Config cfg;
  cfg.topoFile = ttest::topologyDir() + "dgx1-v100.xml";
  // One host of 8: the NVLink ring, not rank order.
  auto one = setUpAll(cfg, peersOn(std::vector<int>(8, 0)));
  REQUIRE(one[0].reordered);
  REQUIRE(one[0].ringOrder == one[0].view.channels[0].ring);
  for (const CommTopology& t : one) REQUIRE(t.ringOrder == one[0].ringOrder);
  // Every hop of the ring is NVLink.
  const std::vector<int>& ring = one[0].ringOrder;
  for (int i = 0; i < 8; ++i) REQUIRE(one[ring[i]].peerClass[ring[(i + 1) % 8]] == PathClass::Nvl);
  REQUIRE(one[0].peerClass[0] == PathClass::Loc);
  REQUIRE(one[0].peerClass[5] == PathClass::Sys);  // gpu0 - gpu5: no NVLink

  // Two hosts, ranks interleaved: each host's ranks stay together, in its
  // chain's order; peers on the other host are network peers.
  std::vector<int> hosts;
  for (int r = 0; r < 16; ++r) hosts.push_back(r % 2);
  auto two = setUpAll(cfg, peersOn(hosts));
  const std::vector<int>& order = two[0].ringOrder;
  REQUIRE(order.size() == 16);
  for (int i = 0; i < 8; ++i) REQUIRE(order[i] % 2 == 0);
  for (int i = 8; i < 16; ++i) REQUIRE(order[i] % 2 == 1);
  for (int i = 0; i < 8; ++i) REQUIRE(order[i] == 2 * two[0].view.channels[0].chain[i]);
  for (const CommTopology& t : two) REQUIRE(t.ringOrder == order);
  for (int r = 0; r < 16; ++r) REQUIRE(two[0].ringPos[order[r]] == r);
  REQUIRE(two[0].peerClass[1] == PathClass::None);
  REQUIRE(two[0].hosts == 2);
}

TEST_CASE("comm topology: an unreadable ring order from a host keeps its rank order", "[topo]") {
  Config cfg;
  cfg.topoFile = ttest::topologyDir() + "dgx1-v100.xml";
  for (const char* bad : {"", "0,1,2", "0,0,1,2,3,4,5,6", "7,6,5,4,3,2,1,x", "0,1,2,3,4,5,6,7,8",
                          "-1,1,2,3,4,5,6,7"}) {
    INFO(bad);
    const std::vector<std::string> forced(8, bad);
    auto t = setUpAll(cfg, peersOn(std::vector<int>(8, 0)), &forced);
    REQUIRE_FALSE(t[0].reordered);
  }
}

TEST_CASE("comm topology: a bad WEFT_TOPO_FILE fails with its name", "[topo]") {
  Config cfg;
  cfg.topoFile = "/nonexistent/topo.xml";
  CommTopology t;
  const Status st = setUpCommTopology(
      cfg, peersOn({0}), 0, [](const std::string&, std::vector<std::string>*) { return Status(); },
      &t);
  REQUIRE(st.isError());
  REQUIRE(st.message().find("WEFT_TOPO_FILE") != std::string::npos);
  REQUIRE(st.message().find("/nonexistent/topo.xml") != std::string::npos);
}

TEST_CASE("comm topology: ring schedules are built on ring positions", "[topo]") {
  Config cfg;
  cfg.topoFile = ttest::topologyDir() + "dgx1-v100.xml";
  auto all = setUpAll(cfg, peersOn(std::vector<int>(8, 0)));
  const CollArgs a = argsOf(CollType::AllReduce, 1000);
  for (int r = 0; r < 8; ++r) {
    const Schedule s = ringSchedule(all, r, a, Algo::Ring);
    const int pos = all[r].ringPos[r];
    const int next = all[r].ringOrder[(pos + 1) % 8], prev = all[r].ringOrder[(pos + 7) % 8];
    for (const Step& st : s.steps) {
      if (st.kind == StepKind::Send) REQUIRE(st.peer == next);
      if (st.kind == StepKind::Recv || st.kind == StepKind::RecvReduce) REQUIRE(st.peer == prev);
    }
  }
  // Other collectives and algorithms keep rank order.
  BuildParams p;
  p.nranks = 8;
  p.algo = Algo::RecursiveDoubling;
  const Schedule s = ringSchedule(all, 0, a, Algo::RecursiveDoubling);
  Schedule plain;
  REQUIRE(buildSchedule(a, p, &plain).isOk());
  REQUIRE(s.steps.size() == plain.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) REQUIRE(s.steps[i].peer == plain.steps[i].peer);
}

TEST_CASE("comm topology: ranks sharing a core are neighbours, and chains follow the ring",
          "[topo]") {
  // A CPU-only host of two sockets: the View puts ranks 0-3 on the first
  // NUMA node and 4-7 on the second; each group is bound round-robin to two
  // cores of its socket (0 and 1, 64 and 65). Within each node's run of the
  // ring, ranks sharing a core become neighbours.
  Config cfg;
  cfg.topoFile = ttest::topologyDir() + "cpu-2s.xml";
  std::vector<PeerInfo> peers = peersOn(std::vector<int>(8, 0));
  for (int r = 0; r < 8; ++r) {
    const int c = (r < 4 ? 0 : 64) + r % 2;
    peers[r].cpuMask.assign(2, 0);
    peers[r].cpuMask[c / 64] = uint64_t{1} << (c % 64);
  }
  auto all = setUpAll(cfg, peers);
  const std::vector<int>& order = all[0].ringOrder;
  for (const CommTopology& t : all) REQUIRE(t.ringOrder == order);
  REQUIRE(all[0].reordered);
  // Each node's ranks stay together, and pair up by core.
  for (int h = 0; h < 2; ++h) {
    std::vector<int> run(order.begin() + 4 * h, order.begin() + 4 * h + 4);
    const int base = run[0] < 4 ? 0 : 4;
    REQUIRE(run == std::vector<int>{base, base + 2, base + 1, base + 3});
  }
  // A chain broadcast from each root runs along the ring from the root's
  // position: every rank receives from its ring predecessor and sends to
  // its successor, the last one only receives.
  for (CollType type : {CollType::Broadcast, CollType::Reduce})
    for (int root = 0; root < 8; root += 3) {
      const int rootPos = all[0].ringPos[root];
      for (int r = 0; r < 8; ++r) {
        const Schedule s = ringSchedule(all, r, argsOf(type, 256, root), Algo::Chain);
        const int pos = all[r].ringPos[r];
        const int q = (pos - rootPos + 8) % 8;  // distance from the root along the ring
        const int next = all[r].ringOrder[(pos + 1) % 8], prev = all[r].ringOrder[(pos + 7) % 8];
        int sends = 0, recvs = 0;
        for (const Step& st : s.steps) {
          if (st.kind == StepKind::Send) ++sends;
          if (st.kind == StepKind::Recv || st.kind == StepKind::RecvReduce) ++recvs;
          // Broadcast flows root -> last, reduce last -> root.
          const int down = type == CollType::Broadcast ? next : prev;
          const int up = type == CollType::Broadcast ? prev : next;
          if (st.kind == StepKind::Send) REQUIRE(st.peer == down);
          if (st.kind == StepKind::Recv || st.kind == StepKind::RecvReduce) REQUIRE(st.peer == up);
        }
        const bool first = q == 0, last = q == 7;
        if (type == CollType::Broadcast) {
          REQUIRE((sends > 0) == !last);
          REQUIRE((recvs > 0) == !first);
        } else {
          REQUIRE((recvs > 0) == !last);
          REQUIRE((sends > 0) == !first);
        }
      }
    }
  // A broadcast chain above 32 KiB keeps rank order (larger pipelines ran
  // slower with hops inside a core): rank r receives from r-1.
  for (int r = 1; r < 8; ++r)  // 256 KiB of float
    for (const Step& st :
         ringSchedule(all, r, argsOf(CollType::Broadcast, 64 << 10), Algo::Chain, 64 << 10).steps)
      if (st.kind == StepKind::Recv) REQUIRE(st.peer == r - 1);
  // Two ranks per core: recursive doubling allreduce folds each core's
  // pair (ring positions 2i, 2i+1) first.
  REQUIRE(all[0].pairedCores);
  for (int r = 0; r < 8; ++r) {
    const Schedule s = ringSchedule(all, r, argsOf(CollType::AllReduce, 64), Algo::RecursiveDoubling);
    const int pos = all[r].ringPos[r];
    const int mate = all[r].ringOrder[pos ^ 1];
    REQUIRE(peers[mate].cpuMask == peers[r].cpuMask);  // the partner on its core
    std::set<int> to;
    for (const Step& st : s.steps)
      if (st.peer >= 0) to.insert(st.peer);
    if (pos % 2 == 0) REQUIRE(to == std::set<int>{mate});
    else REQUIRE(to.count(mate) == 1);
  }
  // Unbound ranks (no mask known) keep the View's order, and no folding.
  auto plain = setUpAll(cfg, peersOn(std::vector<int>(8, 0)));
  REQUIRE_FALSE(plain[0].reordered);
  REQUIRE_FALSE(plain[0].pairedCores);
  // Three ranks on a core are not pairs.
  std::vector<PeerInfo> three = peersOn(std::vector<int>(4, 0));
  for (int r = 0; r < 4; ++r) three[r].cpuMask = {uint64_t{1} << (r == 3 ? 1 : 0)};
  REQUIRE_FALSE(setUpAll(cfg, three)[0].pairedCores);
}

TEST_CASE("comm topology: the cost model is capped by the graph", "[topo]") {
  Config cfg;
  cfg.topoFile = ttest::topologyDir() + "pcie-2s-4gpu-2nic.xml";
  auto t = setUpAll(cfg, peersOn({0, 0, 0, 0, 1, 1, 1, 1}));
  CostModel m;
  m.intra = LinkClass{0.5, 1000};
  m.inter = LinkClass{1, 1000};
  applyToCostModel(t[0], &m);
  REQUIRE(m.intra.bandwidthGBs == Approx(31.504));  // the ring over the switch uplinks
  REQUIRE(m.inter.bandwidthGBs == Approx(25));      // two 100 Gb/s NICs
  REQUIRE(m.inter.latencyUs == Approx(3));          // RoCE
  // Where the graph knows less than the transport's figures, they stay.
  CostModel slow;
  slow.intra = LinkClass{0.5, 4};
  slow.inter = LinkClass{20, 1};
  applyToCostModel(t[0], &slow);
  REQUIRE(slow.intra.bandwidthGBs == Approx(4));
  REQUIRE(slow.inter.bandwidthGBs == Approx(1));
  REQUIRE(slow.inter.latencyUs == Approx(20));
}
