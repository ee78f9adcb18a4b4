#include "topo/core_order.h"

#include <algorithm>
#include <climits>

namespace weft {
namespace topo {
namespace {

int lowestCpu(const std::vector<uint64_t>* mask) {
  if (!mask) return INT_MAX;
  for (size_t w = 0; w < mask->size(); ++w)
    if ((*mask)[w]) return static_cast<int>(w * 64) + __builtin_ctzll((*mask)[w]);
  return INT_MAX;  // unknown
}

}  // namespace

void groupByCore(std::vector<int>* order, const std::vector<int>& device,
                 const std::vector<const std::vector<uint64_t>*>& masks) {
  auto devOf = [&](int local) {
    return local >= 0 && static_cast<size_t>(local) < device.size() ? device[local] : -1;
  };
  auto cpuOf = [&](int local) {
    return local >= 0 && static_cast<size_t>(local) < masks.size() ? lowestCpu(masks[local])
                                                                   : INT_MAX;
  };
  for (size_t b = 0; b < order->size();) {
    size_t e = b + 1;
    while (e < order->size() && devOf((*order)[e]) == devOf((*order)[b])) ++e;
    std::stable_sort(order->begin() + static_cast<long>(b), order->begin() + static_cast<long>(e),
                     [&](int x, int y) { return cpuOf(x) < cpuOf(y); });
    b = e;
  }
}

}  // namespace topo
}  // namespace weft
