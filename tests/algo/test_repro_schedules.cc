// The schedules that serve reproducible calls (CollArgs::repro: direct and
// fold; docs/reproducibility.md) against the ordered mode's definition, bit
// for bit, in the simulator: every float type, SUM / AVG / PROD, 1 to 13
// ranks, counts around the rank count, chunk sizes from 1 element up, in
// and out of place. And the selector keeps reproducible calls on them.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "algo/select.h"
#include "algo/simulator.h"
#include "kernels/cpu/reduce.h"
#include "repro/repro_ref.h"

using namespace weft;

namespace {

struct Case {
  CollType type = CollType::AllReduce;
  Algo algo = Algo::Fold;
  weft_datatype_t dt = WEFT_FLOAT32;
  weft_op_t op = WEFT_SUM;
  int n = 3;
  size_t count = 10;
  size_t chunk = 1 << 20;
  int slots = 2;
  bool inPlace = false;
  int root = 0;
};

// Runs c in the simulator; returns "" when every rank that has a result
// holds the ordered fold of the inputs, bit for bit.
template <typename T>
std::string runCase(const Case& c, uint64_t seed) {
  CollArgs a;
  a.type = c.type;
  a.count = c.count;
  a.eltSize = sizeof(T);
  a.op = c.op;
  a.root = c.root;
  a.inPlace = c.inPlace;
  a.repro = Repro::Ordered;
  const int n = c.n;
  const size_t inCount = c.type == CollType::ReduceScatter ? c.count * n : c.count;
  std::vector<std::vector<T>> in(n, std::vector<T>(inCount));
  std::vector<sim::RankBuffers> bufs(n);
  for (int r = 0; r < n; ++r) {
    repro::fillOrderExposing(in[r].data(), inCount, r, seed, c.op == WEFT_PROD);
    bufs[r].send.resize(sendBytes(a, n, r));
    bufs[r].recv.assign(c.inPlace ? inCount * sizeof(T) : recvBytes(a, n, r), 0xA5);
    std::vector<uint8_t>& dst = c.inPlace ? bufs[r].recv : bufs[r].send;
    std::memcpy(dst.data(), in[r].data(), inCount * sizeof(T));
  }
  const sim::SimResult res = sim::run(a, c.dt, n, c.chunk, c.slots, &bufs, seed, -1, c.algo);
  if (!res.ok) return res.error;
  std::vector<T> vals(n);
  for (int r = 0; r < n; ++r) {
    if (c.type == CollType::Reduce && r != c.root) continue;
    const size_t first = c.type == CollType::ReduceScatter ? r * c.count : 0;
    const uint8_t* out = bufs[r].recv.data() +
                         (c.inPlace && c.type == CollType::ReduceScatter ? first * sizeof(T) : 0);
    for (size_t i = 0; i < c.count; ++i) {
      for (int q = 0; q < n; ++q) vals[q] = in[q][first + i];
      const T want = repro::orderedFold(vals.data(), n, c.op);
      if (std::memcmp(out + i * sizeof(T), &want, sizeof(T)) != 0)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " differs";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("repro schedules: direct, fold and gather_fold give the ordered fold bit for bit",
          "[algo][sim][repro]") {
  std::mt19937_64 rng(26);
  size_t cases = 0;
  for (CollType t : {CollType::AllReduce, CollType::Reduce, CollType::ReduceScatter}) {
    for (Algo algo : {Algo::Direct, Algo::Fold, Algo::GatherFold}) {
      if (!algoSupports(algo, t)) continue;
      for (int n : {1, 2, 3, 4, 5, 8, 9, 13}) {
        int turn = 0;
        for (weft_datatype_t dt : repro::kFloatTypes) {
          for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_PROD}) {
            Case c;
            c.type = t;
            c.algo = algo;
            c.dt = dt;
            c.op = op;
            c.n = n;
            const size_t counts[] = {1, static_cast<size_t>(n + 1), 37, 203};
            c.count = counts[turn % 4];
            const size_t elt = datatypeSize(dt);
            const size_t chunks[] = {elt, 3 * elt, 64, 1 << 20};
            c.chunk = chunks[(turn / 2) % 4];
            c.slots = 1 + turn % 3;
            c.inPlace = turn % 2 == 1;
            c.root = turn % n;
            ++turn;
            std::string err;
            repro::withType(dt, [&](auto v) { err = runCase<decltype(v)>(c, rng()); });
            INFO(collName(t) << " " << algoName(algo) << " n=" << n << " dt=" << dt << " op=" << op
                             << " count=" << c.count << " chunk=" << c.chunk << " slots=" << c.slots
                             << " inPlace=" << c.inPlace);
            REQUIRE(err == "");
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases == 7 * 8 * 6 * 3);
}

TEST_CASE("repro schedules: a ring's float sum is not the ordered fold (the test can fail)",
          "[algo][sim][repro]") {
  // The same check applied to ring and halving-doubling (which fold in
  // another order) finds differences: these inputs expose order.
  std::mt19937_64 rng(27);
  for (Algo algo : {Algo::Ring, Algo::HalvingDoubling}) {
    Case c;
    c.algo = algo;
    c.n = 5;
    c.count = 600;
    c.chunk = 64;
    std::string err = runCase<float>(c, rng());
    INFO(algoName(algo));
    CHECK(err != "");
  }
}

TEST_CASE("repro schedules: the selector keeps reproducible calls on folding algorithms",
          "[algo][repro]") {
  CostModel m;
  m.nranks = 4;
  m.nhosts = 2;
  m.maxRanksPerHost = 2;
  AlgoRules rules;
  REQUIRE(parseAlgoRules("allreduce:ring;reduce_scatter:hd;reduce:chain", &rules).isOk());
  for (CollType t : {CollType::AllReduce, CollType::Reduce, CollType::ReduceScatter}) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 24}) {
      CollArgs a;
      a.type = t;
      a.count = count;
      a.eltSize = 4;
      a.repro = Repro::Ordered;
      const Choice c = choose(a, m, &rules);
      INFO(collName(t) << " count " << count << ": " << algoName(c.algo));
      CHECK(algoFoldsInRankOrder(c.algo, t));
      CHECK_FALSE(c.forced);  // the rules name other algorithms: passed over
      // Off: the rules win, and the model never picks fold on its own.
      a.repro = Repro::Off;
      CHECK(choose(a, m, &rules).forced);
      CHECK(choose(a, m, nullptr).algo != Algo::Fold);
    }
  }
  // A rule that names a folding algorithm is taken.
  REQUIRE(parseAlgoRules("allreduce:direct", &rules).isOk());
  CollArgs a;
  a.count = 1 << 20;
  a.repro = Repro::Ordered;
  CHECK(choose(a, m, &rules).algo == Algo::Direct);
  CHECK(choose(a, m, &rules).forced);
  // Large reproducible allreduces take fold (bandwidth), small ones direct
  // or gather_fold (latency).
  CHECK(choose(a, m, nullptr).algo == Algo::Fold);
  a.count = 2;
  const Algo small = choose(a, m, nullptr).algo;
  CHECK((small == Algo::Direct || small == Algo::GatherFold));
  // Beyond a few ranks, gather_fold's ceil(log2 n) rounds beat direct's n-1 messages.
  m.nranks = 16;
  m.maxRanksPerHost = 8;
  CHECK(choose(a, m, nullptr).algo == Algo::GatherFold);
}

TEST_CASE("repro schedules: float MAX keeps the lowest rank's NaN on every folding path",
          "[algo][sim][repro]") {
  // Two NaNs give the first (kernels/ops.h): only the fold's order decides
  // which payload survives. Element 0: every rank a NaN of its own payload;
  // element 1: rank 0 a number, the others NaNs (the number wins).
  for (Algo algo : {Algo::Direct, Algo::Fold, Algo::GatherFold}) {
    for (int n : {3, 5}) {
      CollArgs a;
      a.type = CollType::AllReduce;
      a.count = 2;
      a.eltSize = 4;
      a.op = WEFT_MAX;
      a.repro = Repro::Ordered;
      std::vector<sim::RankBuffers> bufs(n);
      for (int r = 0; r < n; ++r) {
        const uint32_t nan = 0x7fc00000u | static_cast<uint32_t>(r + 1);
        const uint32_t second = r == 0 ? 0x3f800000u : nan;  // 1.0f on rank 0
        bufs[r].send.resize(8);
        bufs[r].recv.assign(8, 0);
        std::memcpy(bufs[r].send.data(), &nan, 4);
        std::memcpy(bufs[r].send.data() + 4, &second, 4);
      }
      REQUIRE(sim::run(a, WEFT_FLOAT32, n, 4, 2, &bufs, 9, -1, algo).ok);
      for (int r = 0; r < n; ++r) {
        uint32_t got[2];
        std::memcpy(got, bufs[r].recv.data(), 8);
        INFO(algoName(algo) << " n=" << n << " rank " << r);
        CHECK(got[0] == 0x7fc00001u);
        CHECK(got[1] == 0x3f800000u);
      }
    }
  }
}
