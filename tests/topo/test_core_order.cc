// groupByCore (topo/core_order.h): ranks that share a core become
// neighbours in a host's ring, within each device's run, stable otherwise.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "topo/core_order.h"

using namespace weft::topo;

namespace {

std::vector<uint64_t> cpu(int c) {
  std::vector<uint64_t> m(static_cast<size_t>(c / 64 + 1), 0);
  m[static_cast<size_t>(c / 64)] = uint64_t{1} << (c % 64);
  return m;
}

std::vector<const std::vector<uint64_t>*> ptrs(const std::vector<std::vector<uint64_t>>& m) {
  std::vector<const std::vector<uint64_t>*> p;
  for (const auto& x : m) p.push_back(&x);
  return p;
}

}  // namespace

TEST_CASE("core order: round-robin ranks on 2 cores pair up by core", "[topo]") {
  // 4 ranks bound round-robin to cpus 0 and 1 (weft-perf -B 1, mpirun --map-by core).
  const std::vector<std::vector<uint64_t>> masks{cpu(0), cpu(1), cpu(0), cpu(1)};
  std::vector<int> order{0, 1, 2, 3};
  groupByCore(&order, {7, 7, 7, 7}, ptrs(masks));
  REQUIRE(order == std::vector<int>{0, 2, 1, 3});
  // 6 ranks on 3 cores.
  const std::vector<std::vector<uint64_t>> six{cpu(0), cpu(1), cpu(2), cpu(0), cpu(1), cpu(2)};
  std::vector<int> o6{0, 1, 2, 3, 4, 5};
  groupByCore(&o6, std::vector<int>(6, 0), ptrs(six));
  REQUIRE(o6 == std::vector<int>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("core order: unbound or one rank per core keeps the order", "[topo]") {
  // Every rank may run on cpus 0-1: nothing to group.
  std::vector<uint64_t> both{3};
  const std::vector<const std::vector<uint64_t>*> any{&both, &both, &both, &both};
  std::vector<int> order{0, 1, 2, 3};
  groupByCore(&order, {0, 0, 0, 0}, any);
  REQUIRE(order == std::vector<int>{0, 1, 2, 3});
  // One rank per core, in core order already.
  const std::vector<std::vector<uint64_t>> own{cpu(0), cpu(1), cpu(2), cpu(3)};
  groupByCore(&order, {0, 0, 0, 0}, ptrs(own));
  REQUIRE(order == std::vector<int>{0, 1, 2, 3});
  // Unknown masks (empty) stay where they are.
  const std::vector<std::vector<uint64_t>> none(4);
  groupByCore(&order, {0, 0, 0, 0}, ptrs(none));
  REQUIRE(order == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("core order: only within a device's run, and CPUs past 64", "[topo]") {
  // The View chained devices 5 then 2; ranks 1 and 3 share cpu 70 on
  // device 2, ranks 0 and 2 cpus 9 and 8 on device 5.
  const std::vector<std::vector<uint64_t>> masks{cpu(9), cpu(70), cpu(8), cpu(70)};
  const std::vector<int> device{5, 2, 5, 2};
  std::vector<int> order{0, 2, 3, 1};
  groupByCore(&order, device, ptrs(masks));
  // Device 5's run sorted by cpu (2 before 0), device 2's kept (a tie).
  REQUIRE(order == std::vector<int>{2, 0, 3, 1});
}
