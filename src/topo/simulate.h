// Estimates from the topology model: the cost model of src/algo/select.h
// fed with a View's figures (ring bandwidth and hop latency within a node,
// the channels' NICs between nodes), and the bus bandwidth it predicts for
// allreduce with each algorithm. This is what `weft-topo --simulate`
// prints; docs/topology.md compares it with published measurements.
#pragma once

#include <vector>

#include "algo/select.h"
#include "topo/view.h"

namespace weft {
namespace topo {

// The cost model for ranks placed as `v` says. Within a node: latency the
// slowest hop of channel 0, bandwidth v.ringGBs(). Between nodes: the NICs'
// latency (link table) and v.netGBs(). Device ranks (a GPU system) reduce at
// kGpuReduceGBs; host ranks keep CostModel's host figure.
constexpr double kGpuReduceGBs = 1000;
CostModel costModelFor(const View& v);

struct SimRow {
  Algo algo = Algo::Ring;
  size_t bytes = 0;
  size_t chunkBytes = 0;
  double us = 0;
  double busGBs = 0;  // algbw * 2(n-1)/n, as nccl-tests prints for allreduce
};
// One row per (size, algorithm) for every allreduce algorithm the model
// prices (ring, dbt, rd, hd, direct).
std::vector<SimRow> simulateAllReduce(const View& v, const std::vector<size_t>& sizes);

}  // namespace topo
}  // namespace weft
