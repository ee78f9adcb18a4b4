// The fusion planner (fusion_plan.h): one pass over the calls that gives
// each an item (its own, or an open run's), then the members listed by item.
#include "api/fusion_plan.h"

#include <algorithm>

namespace weft {

size_t FusionPlan::fusedItems() const {
  return static_cast<size_t>(
      std::count_if(items.begin(), items.end(), [](const Item& it) { return it.n > 1; }));
}

void planFusion(const FusionCall* calls, size_t n, FusionPlan* plan) {
  plan->items.clear();
  plan->members.clear();
  plan->open.clear();
  plan->itemOf.assign(n, 0);
  auto newItem = [plan](size_t i, size_t bytes) {
    plan->itemOf[i] = plan->items.size();
    FusionPlan::Item it;
    it.bytes = bytes;
    plan->items.push_back(it);
  };
  for (size_t i = 0; i < n; ++i) {
    const FusionCall& c = calls[i];
    if (c.kind == FusionCall::kOtherCollective) {
      // Closes the comm's runs: nothing moves across it.
      plan->open.erase(std::remove_if(plan->open.begin(), plan->open.end(),
                                      [&](const FusionPlan::Run& r) { return r.comm == c.comm; }),
                       plan->open.end());
    }
    const bool eligible = c.kind == FusionCall::kAllReduce && c.host && c.bytes > 0 &&
                          c.threshold > 0 && c.bytes <= c.threshold && c.bytes <= c.maxCall;
    if (!eligible) {
      newItem(i, c.bytes);
      continue;
    }
    auto run = std::find_if(plan->open.begin(), plan->open.end(), [&](const FusionPlan::Run& r) {
      return r.comm == c.comm && r.dtype == c.dtype && r.op == c.op && r.repro == c.repro;
    });
    if (run != plan->open.end() && plan->items[run->item].bytes + c.bytes <= c.threshold) {
      plan->itemOf[i] = run->item;
      plan->items[run->item].bytes += c.bytes;
      continue;
    }
    // A new run: the first of its key, or the last one is full.
    newItem(i, c.bytes);
    if (run != plan->open.end()) {
      run->item = plan->itemOf[i];
    } else {
      plan->open.push_back(FusionPlan::Run{c.comm, c.dtype, c.op, c.repro, plan->itemOf[i]});
    }
  }
  // Members by item, each item's in call order (a counting sort).
  for (size_t i = 0; i < n; ++i) plan->items[plan->itemOf[i]].n++;
  size_t at = 0;
  for (FusionPlan::Item& it : plan->items) {
    it.first = at;
    at += it.n;
    it.n = 0;
  }
  plan->members.resize(n);
  for (size_t i = 0; i < n; ++i) {
    FusionPlan::Item& it = plan->items[plan->itemOf[i]];
    plan->members[it.first + it.n++] = i;
  }
}

}  // namespace weft
