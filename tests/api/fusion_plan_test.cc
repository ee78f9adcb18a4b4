// The fusion planner (src/api/fusion_plan.h): which calls of a group run
// together, as a pure function of the call list.
#include "api/fusion_plan.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace weft;

namespace {

const int kA = 1, kB = 2;  // two comms (identity only)

FusionCall ar(const int* comm, size_t bytes, int dtype = 7, int op = 0, size_t threshold = 1024) {
  FusionCall c;
  c.comm = comm;
  c.kind = FusionCall::kAllReduce;
  c.dtype = dtype;
  c.op = op;
  c.bytes = bytes;
  c.threshold = threshold;
  return c;
}

FusionCall other(const int* comm, FusionCall::Kind kind) {
  FusionCall c = ar(comm, 64);
  c.kind = kind;
  return c;
}

// The plan as text: items in order, "(0 2)" fused, "1" alone.
std::string show(const std::vector<FusionCall>& calls) {
  FusionPlan p;
  planFusion(calls.data(), calls.size(), &p);
  std::string s;
  for (const FusionPlan::Item& it : p.items) {
    if (!s.empty()) s += ' ';
    if (it.n > 1) s += '(';
    for (size_t k = 0; k < it.n; ++k) s += (k ? " " : "") + std::to_string(p.members[it.first + k]);
    if (it.n > 1) s += ')';
  }
  return s;
}

}  // namespace

TEST_CASE("fusion plan: equal allreduces of one comm make one run", "[fusion]") {
  CHECK(show({ar(&kA, 100), ar(&kA, 100), ar(&kA, 100)}) == "(0 1 2)");
  CHECK(show({ar(&kA, 100)}) == "0");
  CHECK(show({}) == "");
}

TEST_CASE("fusion plan: runs are keyed by comm and datatype and op and repro mode", "[fusion]") {
  FusionCall repro = ar(&kA, 10);
  repro.repro = 1;
  CHECK(show({ar(&kA, 10), ar(&kB, 10), ar(&kA, 10, 9), ar(&kA, 10, 7, 3), repro, ar(&kB, 10),
              ar(&kA, 10), ar(&kA, 10, 9), ar(&kA, 10, 7, 3)}) == "(0 6) (1 5) (2 7) (3 8) 4");
  FusionCall r2 = repro;
  CHECK(show({repro, ar(&kA, 10), r2}) == "(0 2) 1");
}

TEST_CASE("fusion plan: the threshold bounds each run exactly", "[fusion]") {
  // 1024 bytes: 4 x 256 fit, the fifth starts a new run.
  std::vector<FusionCall> c(5, ar(&kA, 256));
  CHECK(show(c) == "(0 1 2 3) 4");
  // 1023 + 1 fits; one byte more does not.
  CHECK(show({ar(&kA, 1023), ar(&kA, 1)}) == "(0 1)");
  CHECK(show({ar(&kA, 1023), ar(&kA, 2)}) == "0 1");
  // A full run closes: later calls start a new one even where they would
  // have fitted in an earlier, closed run.
  CHECK(show({ar(&kA, 600), ar(&kA, 600), ar(&kA, 400), ar(&kA, 10)}) == "0 (1 2 3)");
}

TEST_CASE("fusion plan: calls over the threshold and empty calls run alone", "[fusion]") {
  CHECK(show({ar(&kA, 100), ar(&kA, 1025), ar(&kA, 100)}) == "(0 2) 1");
  CHECK(show({ar(&kA, 1024), ar(&kA, 1024)}) == "0 1");
  CHECK(show({ar(&kA, 0), ar(&kA, 0), ar(&kA, 8)}) == "0 1 2");
}

TEST_CASE("fusion plan: calls above the comm's largest fused call run alone", "[fusion]") {
  FusionCall small = ar(&kA, 100), limit = ar(&kA, 200), over = ar(&kA, 201);
  for (FusionCall* c : {&small, &limit, &over}) c->maxCall = 200;
  CHECK(show({small, over, limit, over, small}) == "(0 2 4) 1 3");
  // Another comm without the limit fuses its larger calls.
  CHECK(show({over, ar(&kB, 201), over, ar(&kB, 201)}) == "0 (1 3) 2");
}

TEST_CASE("fusion plan: threshold 0 or stream-ordered calls are never fused", "[fusion]") {
  CHECK(show({ar(&kA, 8, 7, 0, 0), ar(&kA, 8, 7, 0, 0)}) == "0 1");
  FusionCall s = ar(&kA, 8);
  s.host = false;
  CHECK(show({s, s}) == "0 1");
  CHECK(show({s, ar(&kA, 8), s, ar(&kA, 8)}) == "0 (1 3) 2");
}

TEST_CASE("fusion plan: another collective on the comm closes its runs", "[fusion]") {
  const FusionCall bcast = other(&kA, FusionCall::kOtherCollective);
  CHECK(show({ar(&kA, 8), ar(&kA, 8), bcast, ar(&kA, 8), ar(&kA, 8)}) == "(0 1) 2 (3 4)");
  // ... not another comm's.
  CHECK(show({ar(&kB, 8), ar(&kA, 8), bcast, ar(&kB, 8), ar(&kA, 8)}) == "(0 3) 1 2 4");
}

TEST_CASE("fusion plan: sends and receives close no run", "[fusion]") {
  // Ranks differ in their point-to-point calls (0 sends where 1 receives):
  // their plans must still fuse the same collectives.
  const FusionCall send = other(&kA, FusionCall::kPointToPoint);
  const std::vector<FusionCall> rank0{ar(&kA, 8), send, ar(&kA, 8)};
  const std::vector<FusionCall> rank1{ar(&kA, 8), ar(&kA, 8), send};
  CHECK(show(rank0) == "(0 2) 1");
  CHECK(show(rank1) == "(0 1) 2");
}

TEST_CASE("fusion plan: the plan is a function of the call list", "[fusion]") {
  // A long mixed list, planned twice into fresh and reused plans.
  std::vector<FusionCall> calls;
  const FusionCall bcast = other(&kA, FusionCall::kOtherCollective);
  for (int i = 0; i < 300; ++i) {
    if (i % 37 == 36) calls.push_back(bcast);
    calls.push_back(ar(i % 3 ? &kA : &kB, 8 + (i * 53) % 300, 7 + i % 2));
  }
  FusionPlan a, b;
  planFusion(calls.data(), calls.size(), &a);
  planFusion(calls.data(), 5, &b);  // b's vectors used before
  planFusion(calls.data(), calls.size(), &b);
  REQUIRE(a.items.size() == b.items.size());
  CHECK(a.members == b.members);
  for (size_t i = 0; i < a.items.size(); ++i) {
    CHECK(a.items[i].first == b.items[i].first);
    CHECK(a.items[i].n == b.items[i].n);
  }
  // Every call exactly once; each run within the threshold, one key.
  std::vector<int> seen(calls.size(), 0);
  for (size_t m : a.members) seen[m]++;
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(calls.size()));
  for (const FusionPlan::Item& it : a.items) {
    size_t bytes = 0;
    for (size_t k = 0; k < it.n; ++k) {
      const FusionCall& c = calls[a.members[it.first + k]];
      const FusionCall& h = calls[a.members[it.first]];
      CHECK(c.comm == h.comm);
      CHECK(c.dtype == h.dtype);
      bytes += c.bytes;
      if (k) CHECK(a.members[it.first + k] > a.members[it.first + k - 1]);
    }
    CHECK(bytes == it.bytes);
    if (it.n > 1) CHECK(bytes <= 1024);
  }
  CHECK(a.fusedItems() > 10);
}
