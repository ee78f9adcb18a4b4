// Which NIC each rank uses (nic_choice.h) and which transport a peer on
// another host gets first (transportOrder), on the shipped machine files.
#include <algorithm>
#include <map>
#include <set>

#include "topo/comm_topo.h"
#include "topo/nic_choice.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

namespace {

bool rdma(const System& s, int n) { return s.nodes[n].nicType == "ib" || s.nodes[n].nicType == "roce"; }

// Stands in for a transport where only its name matters: transportOrder
// ranks candidates by name and never calls them.
class Named : public Transport {
 public:
  explicit Named(const char* n) : n_(n) {}
  const char* name() const override { return n_; }
  bool canReach(const PeerInfo&) const override { return true; }
  TransportCaps caps() const override { return TransportCaps(); }
  Status localAddress(std::string*) override { return Status(); }
  Status connect(const std::vector<int>&, const std::vector<std::string>&,
                 std::vector<std::unique_ptr<Endpoint>>*) override {
    return Status();
  }
  Status progress() override { return Status(); }
  Status checkPeer(int) override { return Status(); }
  void shutdown() override {}

 private:
  const char* n_;
};

}  // namespace

TEST_CASE("nic choice: every rank takes a nearest RDMA NIC, equally near ones spread", "[topo]") {
  for (const std::string& f : ttest::shippedFiles()) {
    INFO(f);
    const System s = ttest::load(f);
    const int rpn = static_cast<int>(
        std::max(s.nodesOf(NodeType::Gpu).size(), s.nodesOf(NodeType::Numa).size()));
    View v;
    REQUIRE(View::build(s, 2, rpn, &v).isOk());
    std::vector<int> nics;
    for (int n : s.nodesOf(NodeType::Nic))
      if (rdma(s, n)) nics.push_back(n);
    const std::vector<int> got = rdmaNicPerLocalRank(v);
    REQUIRE(got.size() == static_cast<size_t>(rpn));
    if (nics.empty()) {
      // cpu-2s.xml: Ethernet only.
      for (int r = 0; r < rpn; ++r) {
        REQUIRE(got[r] == -1);
        REQUIRE(rdmaNicName(v, r).empty());
      }
      continue;
    }
    std::map<int, int> uses;
    for (int r = 0; r < rpn; ++r) {
      REQUIRE(std::find(nics.begin(), nics.end(), got[r]) != nics.end());
      REQUIRE(rdmaNicName(v, r) == s.nodes[got[r]].name);
      for (int n : nics) REQUIRE(s.path(v.device[r], got[r]).cls <= s.path(v.device[r], n).cls);
      ++uses[got[r]];
    }
    // These machines have one NIC per GPU or one per GPU pair, each as near
    // to its GPUs as any: all are used, none by more than its share.
    REQUIRE(uses.size() == std::min(nics.size(), static_cast<size_t>(rpn)));
    for (auto& u : uses) REQUIRE(u.second <= (rpn + static_cast<int>(nics.size()) - 1) /
                                                 static_cast<int>(nics.size()));
  }
  // DGX A100: each pair of GPUs shares a PCIe switch with two NICs.
  const System s = ttest::load("dgx-a100.xml");
  View v;
  REQUIRE(View::build(s, 1, 8, &v).isOk());
  const std::vector<int> got = rdmaNicPerLocalRank(v);
  std::set<int> distinct(got.begin(), got.end());
  REQUIRE(distinct.size() == 8);
  for (int r = 0; r < 8; ++r) REQUIRE(s.path(v.device[r], got[r]).cls <= PathClass::Pxb);
}

TEST_CASE("transport order: another host tries ibverbs and ucx before tcp, this host shm first",
          "[topo]") {
  std::vector<std::unique_ptr<Transport>> cands;
  for (const char* n : {"self", "shm", "ucx", "tcp"}) cands.push_back(std::make_unique<Named>(n));
  CommTopology t;
  t.peerClass = {PathClass::Loc, PathClass::Sys, PathClass::None};
  auto names = [&](int peer) {
    std::string s;
    for (size_t i : transportOrder(t, cands, peer)) s += std::string(cands[i]->name()) + " ";
    return s;
  };
  REQUIRE(names(0) == "self shm tcp ucx ");
  REQUIRE(names(1) == "shm tcp self ucx ");
  REQUIRE(names(2) == "ucx tcp self shm ");
  cands.insert(cands.begin() + 2, std::make_unique<Named>("ibverbs"));
  REQUIRE(names(2) == "ibverbs ucx tcp self shm ");
}
