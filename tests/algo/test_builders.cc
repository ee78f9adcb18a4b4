// Every schedule builder, run by the in-memory simulator for nranks 1..33,
// many counts, chunk sizes and slot counts, in and out of place, checked
// element by element against a reference computed here.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "algo/case_buffers.h"
#include "algo/reference.h"
#include "algo/schedule.h"
#include "algo/simulator.h"

using namespace weft;

namespace {

struct Case {
  CollType type;
  size_t count;
  int n;
  size_t chunk;
  int slots;
  bool inPlace;
  weft_op_t op;
  int root;
};

std::string describe(const Case& c) {
  return std::string(collName(c.type)) + " n=" + std::to_string(c.n) +
         " count=" + std::to_string(c.count) + " chunk=" + std::to_string(c.chunk) +
         " slots=" + std::to_string(c.slots) + (c.inPlace ? " in-place" : " out-of-place") +
         " op=" + std::to_string(c.op) + " root=" + std::to_string(c.root);
}

void runCase(const Case& c, uint64_t seed) {
  INFO(describe(c));
  CollArgs a;
  a.type = c.type;
  a.count = c.count;
  a.eltSize = 4;
  a.op = c.op;
  a.root = c.root;
  a.inPlace = c.inPlace;
  const int n = c.n;
  std::vector<sim::RankBuffers> bufs = wref::makeBuffers(a, n, seed);
  sim::SimResult res = sim::run(a, WEFT_INT32, n, c.chunk, c.slots, &bufs, seed);
  INFO(res.error);
  REQUIRE(res.ok);
  const std::string bad = wref::checkBuffers(a, n, seed, bufs);
  INFO(bad);
  REQUIRE(bad.empty());
}

}  // namespace

TEST_CASE("builders: every collective for nranks 1..33 in the simulator", "[algo][sim]") {
  std::mt19937_64 rng(12345);
  const CollType types[] = {CollType::AllReduce, CollType::ReduceScatter, CollType::AllGather,
                            CollType::Broadcast, CollType::Reduce,        CollType::AllToAll};
  const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG};
  int cases = 0;
  for (int n = 1; n <= 33; n += (n < 9 ? 1 : 4)) {
    for (CollType t : types) {
      for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(n), size_t(37), size_t(130)}) {
        for (bool inPlace : {false, true}) {
          Case c;
          c.type = t;
          c.count = count;
          c.n = n;
          c.chunk = std::vector<size_t>{4, 12, 64, 1 << 20}[rng() % 4];
          c.slots = 1 + static_cast<int>(rng() % 4);
          c.inPlace = inPlace;
          c.op = ops[rng() % 5];
          c.root = static_cast<int>(rng() % n);
          runCase(c, rng());
          ++cases;
        }
      }
    }
  }
  CHECK(cases > 500);
}

TEST_CASE("builders: barrier and point-to-point schedules complete", "[algo][sim]") {
  for (int n = 1; n <= 33; ++n) {
    CollArgs a;
    a.type = CollType::Barrier;
    std::vector<sim::RankBuffers> bufs(n);
    sim::SimResult res = sim::run(a, WEFT_INT32, n, 1 << 20, 2, &bufs, n);
    INFO("n=" << n << " " << res.error);
    REQUIRE(res.ok);
    int rounds = 0;
    for (int d = 1; d < n; d *= 2) ++rounds;
    CHECK(res.messages == static_cast<size_t>(n * rounds));
  }
}

TEST_CASE("builders: ring allreduce moves 2(n-1)/n of the data per rank", "[algo]") {
  CollArgs a;
  a.type = CollType::AllReduce;
  a.count = 1 << 16;
  a.eltSize = 4;
  for (int n : {2, 3, 4, 8}) {
    BuildParams p;
    p.nranks = n;
    p.rank = 1 % n;
    p.chunkBytes = 4096;
    Schedule s;
    REQUIRE(buildSchedule(a, p, &s).isOk());
    size_t sent = 0;
    for (const Step& st : s.steps)
      if (st.kind == StepKind::Send) sent += st.bytes;
    const size_t total = a.count * 4;
    // Within one element per segment of the ideal 2(n-1)/n * N.
    CHECK(sent >= 2 * (n - 1) * (total / n) - 8 * n);
    CHECK(sent <= 2 * (n - 1) * (total / n + 4));
    CHECK(std::string(s.algorithm) == "ring");
  }
}

TEST_CASE("builders: a deliberately broken schedule is caught by the simulator", "[algo][sim]") {
  // Sanity of the checker itself: run allgather with mismatched chunk sizes
  // between ranks would be a length mismatch; here we simply verify that the
  // simulator reports deadlock for a lone receive.
  CollArgs a;
  a.type = CollType::Recv;
  a.count = 4;
  a.eltSize = 4;
  a.peer = 0;
  std::vector<sim::RankBuffers> bufs(1);
  bufs[0].recv.resize(16);
  sim::SimResult res = sim::run(a, WEFT_INT32, 1, 1 << 20, 1, &bufs, 1);
  CHECK_FALSE(res.ok);
  CHECK(res.error.find("deadlock") != std::string::npos);
}

TEST_CASE("builders: no rank leaves a barrier while one rank has not arrived", "[algo][sim]") {
  for (int n = 2; n <= 33; ++n) {
    for (int held = 0; held < n; held += (n > 8 ? 5 : 1)) {
      CollArgs a;
      a.type = CollType::Barrier;
      std::vector<sim::RankBuffers> bufs(n);
      sim::SimResult res = sim::run(a, WEFT_INT32, n, 1 << 20, 2, &bufs, n * 31 + held, held);
      INFO("n=" << n << " held rank " << held);
      REQUIRE_FALSE(res.ok);  // cannot finish without the held rank
      for (int r = 0; r < n; ++r) CHECK_FALSE(res.rankDone[r]);
    }
  }
}
