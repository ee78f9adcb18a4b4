// The cost model fed from the topology (simulate.h): the figures come from
// the graph, and the estimates behave as the model says.
#include "topo/simulate.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

TEST_CASE("the cost model takes its links from the View", "[topo]") {
  const System s = ttest::load("dgx-h100.xml");
  View one, four;
  REQUIRE(View::build(s, 1, 8, &one).isOk());
  REQUIRE(View::build(s, 4, 8, &four).isOk());
  CostModel m = costModelFor(one);
  REQUIRE(m.intra.bandwidthGBs == Approx(450));
  REQUIRE(m.nhosts == 1);
  m = costModelFor(four);
  REQUIRE(m.nranks == 32);
  REQUIRE(m.nhosts == 4);
  REQUIRE(m.inter.bandwidthGBs == Approx(400));  // 8 NICs x 400 Gb/s
  REQUIRE(m.inter.latencyUs == Approx(2));       // InfiniBand
  // Large messages: ring bus bandwidth approaches the ring's link bandwidth
  // in one node and the network's across nodes, never above.
  for (const View* v : {&one, &four}) {
    const double limit = v->nodes == 1 ? 450 : 400;
    double ring = 0, hd = 0;
    for (const SimRow& r : simulateAllReduce(*v, {size_t(8) << 30})) {
      if (r.algo == Algo::Ring) ring = r.busGBs;
      if (r.algo == Algo::HalvingDoubling) hd = r.busGBs;
      REQUIRE(r.busGBs <= limit * 1.0001);
    }
    REQUIRE(ring > 0.9 * limit);
    if (v->nodes > 1) REQUIRE(ring > hd);
  }
  // The PCIe box's model is bounded by its switch uplinks.
  const System p = ttest::load("pcie-2s-4gpu-2nic.xml");
  View pv;
  REQUIRE(View::build(p, 1, 4, &pv).isOk());
  REQUIRE(costModelFor(pv).intra.bandwidthGBs == Approx(31.504));
}
