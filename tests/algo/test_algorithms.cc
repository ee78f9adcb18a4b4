// The algorithm suite: every (algorithm, collective) pair that the kAlgos
// table says is implemented (algoSupports), run by the simulator for nranks
// 1..33 and checked element by element against a reference; plus bitwise
// identical float allreduce results on all ranks, scratch bounds, the costs
// the algorithm files state, and the double binary tree's shape. An
// algorithm added to the table later is covered by all of these without
// touching this file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "algo/binary_tree.h"
#include "algo/case_buffers.h"
#include "algo/schedule.h"
#include "algo/reference.h"
#include "algo/simulator.h"

using namespace weft;

static std::string hostsText(const std::vector<int>& h) {
  std::string out;
  for (int x : h) out += std::to_string(x) + " ";
  return out;
}

namespace {

const CollType kCollTypes[] = {CollType::AllReduce, CollType::ReduceScatter,
                               CollType::AllGather, CollType::Broadcast,
                               CollType::Reduce,    CollType::AllToAll,
                               CollType::Barrier};

struct Pair {
  Algo algo;
  CollType type;
};
std::string pairName(const Pair& p) {
  return std::string(algoName(p.algo)) + "/" + collName(p.type);
}

// Every implemented pair. Shm runs without a schedule (buildSchedule
// refuses it), so it is the one algorithm not simulated.
std::vector<Pair> implementedPairs() {
  std::vector<Pair> out;
  for (int i = 0; i < static_cast<int>(Algo::kCount); ++i) {
    const Algo algo = static_cast<Algo>(i);
    if (algo == Algo::Auto || algo == Algo::Shm) continue;
    for (CollType t : kCollTypes)
      if (algoSupports(algo, t)) out.push_back({algo, t});
  }
  return out;
}

// WEFT_ALGO_TEST_SEED=<n> reruns the randomized tests with other data and
// other simulator delivery orders.
uint64_t testSeed(uint64_t fallback) {
  const char* e = std::getenv("WEFT_ALGO_TEST_SEED");
  return e && *e ? std::strtoull(e, nullptr, 0) * 1000003u + fallback : fallback;
}

bool reduces(CollType t) {
  return t == CollType::AllReduce || t == CollType::ReduceScatter || t == CollType::Reduce;
}

struct Case {
  Algo algo;
  CollType type;
  int n;
  size_t count;
  size_t chunk;
  int slots;
  bool inPlace;
  weft_op_t op;
  int root;
  std::vector<int> hosts = {};  // BuildParams::hosts (hierarchical)
  bool foldPairs = false;       // BuildParams::foldPairs (recursive doubling)
};

std::string describe(const Case& c) {
  return std::string(algoName(c.algo)) + " " + collName(c.type) + " n=" + std::to_string(c.n) +
         " count=" + std::to_string(c.count) + " chunk=" + std::to_string(c.chunk) +
         " slots=" + std::to_string(c.slots) + (c.inPlace ? " in-place" : " out-of-place") +
         " op=" + std::to_string(c.op) + " root=" + std::to_string(c.root) +
         (c.foldPairs ? " foldPairs" : "");
}

CollArgs argsOf(const Case& c, size_t eltSize) {
  CollArgs a;
  a.type = c.type;
  a.count = c.count;
  a.eltSize = eltSize;
  a.op = c.op;
  a.root = c.root;
  a.inPlace = c.inPlace;
  return a;
}

void runCase(const Case& c, uint64_t seed, size_t window = sim::kEngineScanWindow) {
  INFO(describe(c) << " window=" << window);
  const CollArgs a = argsOf(c, 4);
  const int n = c.n;
  std::vector<sim::RankBuffers> bufs = wref::makeBuffers(a, n, seed);
  const std::vector<sim::RankBuffers> before = bufs;
  sim::SimResult res =
      sim::run(a, WEFT_INT32, n, c.chunk, c.slots, &bufs, seed, -1, c.algo, window, c.hosts,
               c.foldPairs);
  INFO(res.error);
  REQUIRE(res.ok);
  // Out of place, nobody writes the input.
  for (int r = 0; r < n; ++r) REQUIRE(bufs[r].send == before[r].send);
  const std::string bad = wref::checkBuffers(a, n, seed, bufs);
  INFO(bad);
  REQUIRE(bad.empty());
}

void runBarrier(Algo algo, int n, uint64_t seed) {
  INFO(algoName(algo) << " barrier n=" << n);
  CollArgs a;
  a.type = CollType::Barrier;
  std::vector<sim::RankBuffers> bufs(n);
  sim::SimResult res = sim::run(a, WEFT_INT32, n, 1 << 20, 2, &bufs, seed, -1, algo);
  INFO(res.error);
  REQUIRE(res.ok);
  if (n > 1) {  // and it waits for everyone
    std::vector<sim::RankBuffers> held(n);
    sim::SimResult h = sim::run(a, WEFT_INT32, n, 1 << 20, 2, &held, seed, static_cast<int>(seed % n), algo);
    CHECK_FALSE(h.ok);
  }
}

}  // namespace

TEST_CASE("algorithms: the table lists the implemented pairs", "[algo]") {
  std::set<std::string> names;
  for (const Pair& p : implementedPairs()) names.insert(pairName(p));
  for (const char* want :
       {"ring/allreduce", "ring/reduce_scatter", "ring/allgather", "rd/allreduce", "rd/allgather",
        "hd/allreduce", "hd/reduce_scatter", "dbt/allreduce", "direct/allreduce",
        "direct/reduce_scatter", "direct/allgather", "direct/broadcast", "direct/reduce",
        "direct/alltoall", "chain/broadcast", "chain/reduce", "binomial/broadcast",
        "binomial/reduce", "bruck/allgather", "pairwise/alltoall", "dissemination/barrier",
        "hier/allreduce"}) {
    INFO(want);
    CHECK(names.count(want) == 1);
  }
  // The default of every collective is implemented, and every name parses.
  for (CollType t : kCollTypes) CHECK(algoSupports(defaultAlgo(t), t));
  for (const Pair& p : implementedPairs()) {
    Algo back = Algo::Auto;
    CHECK(parseAlgo(algoName(p.algo), &back));
    CHECK(back == p.algo);
  }
}

TEST_CASE("algorithms: every implemented pair for nranks 1..33 against a reference", "[algo][sim]") {
  std::mt19937_64 rng(testSeed(2024));
  const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG};
  const size_t primes[] = {7, 13, 31, 37, 61, 101};
  // WEFT_ALGO_TEST_STRESS=1: every size four times, with all slot counts
  // and small random chunk sizes (minutes, not for every build).
  const bool stress = std::getenv("WEFT_ALGO_TEST_STRESS") != nullptr;
  size_t cases = 0;
  for (const Pair& pair : implementedPairs()) {
    int turn = 0;
    for (int n = 1; n <= 33; ++n) {
      if (pair.type == CollType::Barrier) {
        runBarrier(pair.algo, n, rng());
        ++cases;
        continue;
      }
      // (count, chunk bytes): empty, one element, n-1 and n+1 (fewer or a
      // few more elements than ranks, uneven splits), a prime, and a count
      // cut into many chunks.
      struct Size {
        size_t count, chunk;
      };
      const Size sizes[] = {{0, 1 << 20},
                            {1, 1 << 20},
                            {static_cast<size_t>(n > 1 ? n - 1 : 2), 1 << 20},
                            {static_cast<size_t>(n + 1), 32},
                            {primes[n % 6], 64},
                            {static_cast<size_t>(40 + n % 7), 12}};
      for (const Size& sz : sizes) {
        for (bool inPlace : {false, true}) {
          for (int rep = 0; rep < (stress ? 4 : 1); ++rep) {
            Case c;
            c.algo = pair.algo;
            c.type = pair.type;
            c.n = n;
            c.count = sz.count;
            c.chunk = stress && rep > 1 ? 4 * (1 + rng() % 8) : sz.chunk;
            c.slots = 1 + (turn + rep) % 4;
            c.inPlace = inPlace;
            c.op = reduces(pair.type) ? ops[turn % 5] : WEFT_SUM;
            c.root = static_cast<int>((turn * 7 + n / 2) % n);
            ++turn;
            runCase(c, rng());
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases > 20 * 33 * 12);
}

TEST_CASE("algorithms: progress when ranks look only a few steps ahead", "[algo][sim]") {
  // The engine posts only steps within a window past the first unfinished
  // one. A schedule that lists all of an exchange's sends before its
  // receives deadlocks once a message has more chunks than the window; here
  // messages of hundreds of chunks meet a window of 48 steps.
  std::mt19937_64 rng(testSeed(99));
  const weft_op_t ops[] = {WEFT_SUM, WEFT_AVG, WEFT_MAX};
  int turn = 0;
  for (const Pair& pair : implementedPairs()) {
    if (pair.type == CollType::Barrier) continue;
    for (int n : {2, 3, 5, 8}) {
      for (bool inPlace : {false, true}) {
        Case c;
        c.algo = pair.algo;
        c.type = pair.type;
        c.n = n;
        c.count = pair.type == CollType::AllToAll ? 120 : 301;
        c.chunk = 4;
        c.slots = 1 + turn % 3;
        c.inPlace = inPlace;
        c.op = ops[turn % 3];
        c.root = n - 1;
        ++turn;
        runCase(c, rng(), 48);
      }
    }
  }
}

TEST_CASE("algorithms: float allreduce is bitwise identical on every rank", "[algo][sim]") {
  std::mt19937_64 rng(testSeed(7));
  for (const Pair& pair : implementedPairs()) {
    if (pair.type != CollType::AllReduce) continue;
    for (int n = 1; n <= 33; ++n) {
      for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_AVG}) {
        const size_t count = n % 3 == 0 ? 130 : 29;
        const size_t chunk = n % 2 ? 64 : 1 << 20;
        CollArgs a;
        a.type = CollType::AllReduce;
        a.count = count;
        a.eltSize = 4;
        a.op = op;
        a.inPlace = (n + static_cast<int>(op)) % 2 == 0;
        // wref's int32 inputs, overwritten below with floats.
        std::vector<sim::RankBuffers> bufs = wref::makeBuffers(a, n, 0);
        std::uniform_real_distribution<float> mag(0.5f, 2.0f), near1(0.97f, 1.03f);
        std::vector<std::vector<float>> in(n, std::vector<float>(count));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            float x = op == WEFT_PROD ? near1(rng) : mag(rng) * ((rng() & 1) ? 1.0f : -1.0f);
            if (op != WEFT_PROD) x *= std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
            in[r][i] = x;
          }
          std::vector<uint8_t>& dst = a.inPlace ? bufs[r].recv : bufs[r].send;
          std::memcpy(dst.data(), in[r].data(), count * 4);
        }
        std::vector<sim::RankBuffers> again = bufs;
        sim::SimResult res = sim::run(a, WEFT_FLOAT32, n, chunk, 2, &bufs, rng(), -1, pair.algo);
        INFO(algoName(pair.algo) << " n=" << n << " op=" << op << " " << res.error);
        REQUIRE(res.ok);
        for (int r = 1; r < n; ++r) {
          INFO("rank " << r << " differs from rank 0");
          REQUIRE(std::memcmp(bufs[r].recv.data(), bufs[0].recv.data(), count * 4) == 0);
        }
        // The bits depend on the algorithm and n only: not on the chunk
        // size, the slots or the order messages arrive in.
        res = sim::run(a, WEFT_FLOAT32, n, 12, 3, &again, rng(), -1, pair.algo);
        REQUIRE(res.ok);
        CHECK(std::memcmp(again[n - 1].recv.data(), bufs[0].recv.data(), count * 4) == 0);
        // And it is the right number.
        const float* out = reinterpret_cast<const float*>(bufs[0].recv.data());
        for (size_t i = 0; i < count; ++i) {
          double want = in[0][i], scale = std::fabs(in[0][i]);
          for (int r = 1; r < n; ++r) {
            if (op == WEFT_PROD) want *= in[r][i];
            else if (op == WEFT_MAX) want = std::max<double>(want, in[r][i]);
            else want += in[r][i];
            scale += std::fabs(in[r][i]);
          }
          if (op == WEFT_AVG) want /= n, scale /= n;
          if (op == WEFT_MAX) REQUIRE(out[i] == static_cast<float>(want));
          else REQUIRE(std::fabs(out[i] - want) <= 1e-5 * (op == WEFT_PROD ? std::fabs(want) : scale));
        }
      }
    }
  }
}

TEST_CASE("algorithms: schedules name their algorithm and keep scratch bounded", "[algo]") {
  // A reduction or broadcast must not need scratch that grows with nranks:
  // a few chunks (plus, where the input is n blocks, the input's size).
  // Fold is the exception that must hold n-1 pieces of a chunk at once
  // (fold_groups.h): max(2 * slots, n) chunks; and gather_fold, which
  // gathers every rank's vector (n * N: small messages only).
  const size_t count = 20000, chunk = 1024;
  const int slots = 4;
  for (const Pair& pair : implementedPairs()) {
    for (int n : {1, 2, 3, 8, 13, 33}) {
      for (bool inPlace : {false, true}) {
        for (int r = 0; r < n; r += (n > 4 ? 5 : 1)) {
          CollArgs a;
          a.type = pair.type;
          a.count = count;
          a.inPlace = inPlace;
          a.root = n / 2;
          a.op = WEFT_AVG;
          BuildParams p;
          p.rank = r;
          p.nranks = n;
          p.chunkBytes = chunk;
          p.slots = slots;
          p.algo = pair.algo;
          Schedule s;
          INFO(pairName(pair) << " n=" << n << " rank " << r << (inPlace ? " in place" : ""));
          REQUIRE(buildSchedule(a, p, &s).isOk());
          CHECK(std::string(s.algorithm) == algoName(pair.algo));
          const bool nBlocks =
              pair.type == CollType::ReduceScatter || pair.type == CollType::AllToAll;
          const size_t folds = pair.algo == Algo::Fold         ? std::max(2 * slots, n) * chunk
                               : pair.algo == Algo::GatherFold ? n * count * 4 + 2 * slots * chunk
                                                               : 0;
          const size_t allowed =
              std::max(2 * slots * chunk, folds) + (nBlocks ? collBytes(a, n) : 0) +
              (pair.algo == Algo::Fold && pair.type == CollType::Reduce ? count * 4 / n + 4 : 0);
          CHECK(s.scratchBytes <= allowed);
        }
      }
    }
  }
}

namespace {

struct Traffic {
  size_t sent = 0, received = 0;
  std::set<int> sendPeers;
};
Traffic trafficOf(Algo algo, CollType t, int n, int rank, size_t count, int root = 0) {
  CollArgs a;
  a.type = t;
  a.count = count;
  a.root = root;
  BuildParams p;
  p.rank = rank;
  p.nranks = n;
  p.chunkBytes = 1 << 12;
  p.algo = algo;
  Schedule s;
  REQUIRE(buildSchedule(a, p, &s).isOk());
  Traffic tr;
  for (const Step& st : s.steps) {
    if (st.kind == StepKind::Send) tr.sent += st.bytes, tr.sendPeers.insert(st.peer);
    if (st.kind == StepKind::Recv || st.kind == StepKind::RecvReduce) tr.received += st.bytes;
  }
  return tr;
}

}  // namespace

TEST_CASE("algorithms: bytes moved per rank match the stated costs", "[algo]") {
  const size_t count = 1 << 14, N = count * 4;
  for (int n : {2, 4, 8, 16}) {
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    for (int r = 0; r < n; ++r) {
      INFO("n=" << n << " rank " << r);
      // Recursive doubling: log2 n exchanges of the whole vector.
      CHECK(trafficOf(Algo::RecursiveDoubling, CollType::AllReduce, n, r, count).sent == log2n * N);
      // Rabenseifner: 2(n-1)/n of the vector each way.
      const Traffic hd = trafficOf(Algo::HalvingDoubling, CollType::AllReduce, n, r, count);
      CHECK(hd.sent == 2 * (n - 1) * N / n);
      CHECK(hd.received == 2 * (n - 1) * N / n);
      CHECK(trafficOf(Algo::HalvingDoubling, CollType::ReduceScatter, n, r, count).sent ==
            (n - 1) * N);
      CHECK(trafficOf(Algo::RecursiveDoubling, CollType::AllGather, n, r, count).sent ==
            (n - 1) * N);
    }
  }
  for (int n : {2, 3, 5, 13, 33}) {
    int steps = 0;
    while ((1 << steps) < n) ++steps;
    for (int r = 0; r < n; ++r) {
      INFO("n=" << n << " rank " << r);
      // Bruck: n-1 blocks out and in, to ceil(log2 n) peers.
      const Traffic b = trafficOf(Algo::Bruck, CollType::AllGather, n, r, count);
      CHECK(b.sent == (n - 1) * N);
      CHECK(b.received == (n - 1) * N);
      CHECK(b.sendPeers.size() == static_cast<size_t>(steps));
      // Direct allreduce: the whole vector to and from everyone.
      const Traffic d = trafficOf(Algo::Direct, CollType::AllReduce, n, r, count);
      CHECK(d.sent == (n - 1) * N);
      CHECK(d.received == (n - 1) * N);
      // Double binary tree: at most 2N each way.
      const Traffic t = trafficOf(Algo::DoubleBinaryTree, CollType::AllReduce, n, r, count);
      CHECK(t.sent <= 2 * N);
      CHECK(t.received <= 2 * N);
    }
    // Binomial broadcast: the root feeds ceil(log2 n) subtrees.
    const int root = n / 2;
    CHECK(trafficOf(Algo::BinomialTree, CollType::Broadcast, n, root, count, root).sent ==
          steps * N);
  }
}

TEST_CASE("algorithms: the two binary trees are complementary for nranks 1..256", "[algo]") {
  for (int n = 1; n <= 256; ++n) {
    INFO("n=" << n);
    std::vector<int> interior(n, 0);
    for (int t = 0; t < 2; ++t) {
      INFO("tree " << t);
      std::vector<TreeLinks> links(n);
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        links[r] = binaryTreeLinks(n, t, r);
        if (links[r].parent < 0) {
          ++roots;
          CHECK(r == binaryTreeRoot(n, t));
        }
        if (links[r].nchildren() > 0) ++interior[r];
        CHECK((links[r].child[1] < 0 || links[r].child[0] >= 0));  // child 0 first
      }
      CHECK(roots == 1);
      // Parent and child links agree, and every rank has one parent.
      std::vector<int> parents(n, 0);
      for (int r = 0; r < n; ++r)
        for (int c : links[r].child)
          if (c >= 0) {
            REQUIRE(c < n);
            CHECK(links[c].parent == r);
            ++parents[c];
          }
      for (int r = 0; r < n; ++r) CHECK(parents[r] == (r == binaryTreeRoot(n, t) ? 0 : 1));
      // Acyclic and spanning: every rank reaches the root within depth steps.
      for (int r = 0; r < n; ++r) {
        int x = r, levels = 1;
        while (links[x].parent >= 0 && levels <= n) x = links[x].parent, ++levels;
        CHECK(x == binaryTreeRoot(n, t));
        CHECK(levels <= binaryTreeDepth(n));
      }
    }
    for (int r = 0; r < n; ++r) CHECK(interior[r] <= 1);
  }
}

// The hierarchical allreduce over real host layouts: H hosts of L ranks,
// hosts contiguous or interleaved (rank r on host r % H), every op, sizes
// that do not split evenly into L segments, chunking, in and out of place;
// and layouts it cannot use (hosts of different sizes), which must still
// give the right result (flat ring).
TEST_CASE("algorithms: recursive doubling allreduce with folded pairs", "[algo][sim]") {
  std::mt19937_64 rng(testSeed(91));
  const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG};
  int turn = 0;
  for (int n = 1; n <= 17; ++n)
    for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(37), size_t(1000)})
      for (bool inPlace : {false, true}) {
        Case c{Algo::RecursiveDoubling, CollType::AllReduce, n, count,
               count > 100 ? size_t(64) : size_t(1) << 20, 1 + turn % 3, inPlace, ops[turn % 5], 0};
        c.foldPairs = true;
        ++turn;
        runCase(c, rng());
      }
  // Taken for 4, 8, 16 ... ranks: each even rank talks only to its odd
  // partner (one fold, one unfold), each odd rank to its partner and to
  // log2(n/2) odd ranks of the doubling. Otherwise the plain schedule.
  for (int n : {4, 8, 16, 6, 2}) {
    CollArgs a;
    a.type = CollType::AllReduce;
    a.count = 16;
    BuildParams p;
    p.nranks = n;
    p.algo = Algo::RecursiveDoubling;
    for (int r = 0; r < n; ++r) {
      p.rank = r;
      p.foldPairs = true;
      Schedule folded, plain;
      REQUIRE(buildSchedule(a, p, &folded).isOk());
      p.foldPairs = false;
      REQUIRE(buildSchedule(a, p, &plain).isOk());
      std::set<int> peers;
      for (const Step& s : folded.steps)
        if (s.peer >= 0) peers.insert(s.peer);
      INFO("n=" << n << " rank " << r);
      const bool taken = n >= 4 && (n & (n - 1)) == 0;
      if (!taken) {
        REQUIRE(folded.steps.size() == plain.steps.size());
        continue;
      }
      int doublings = 0;
      for (int m = n / 2; m > 1; m /= 2) ++doublings;
      if (r % 2 == 0) {
        REQUIRE(peers == std::set<int>{r + 1});
      } else {
        REQUIRE(peers.count(r - 1) == 1);
        REQUIRE(static_cast<int>(peers.size()) == 1 + doublings);
        for (int q : peers) REQUIRE((q == r - 1 || q % 2 == 1));
      }
    }
  }
}

TEST_CASE("algorithms: hierarchical allreduce over host layouts", "[algo][sim][hier]") {
  std::mt19937_64 rng(testSeed(77));
  const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MAX, WEFT_MIN, WEFT_AVG};
  int turn = 0;
  auto runLayout = [&](const std::vector<int>& hosts) {
    const int n = static_cast<int>(hosts.size());
    for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(37), size_t(1000)})
      for (bool inPlace : {false, true}) {
        Case c;
        c.algo = Algo::Hierarchical;
        c.type = CollType::AllReduce;
        c.n = n;
        c.count = count;
        c.chunk = count > 100 ? 64 : 1 << 20;
        c.slots = 1 + turn % 3;
        c.inPlace = inPlace;
        c.op = ops[turn % 5];
        c.root = 0;
        c.hosts = hosts;
        ++turn;
        INFO("hosts of ranks: " << hostsText(hosts));
        runCase(c, rng());
      }
  };
  for (int H = 1; H <= 4; ++H)
    for (int L = 1; L <= 4; ++L) {
      std::vector<int> contiguous, interleaved;
      for (int r = 0; r < H * L; ++r) {
        contiguous.push_back(100 + r / L);
        interleaved.push_back(7 * (r % H));
      }
      runLayout(contiguous);
      runLayout(interleaved);
    }
  runLayout({0, 0, 0, 1, 1});        // uneven: flat
  runLayout({5, 5, 9, 9, 9, 9, 5});  // uneven, interleaved: flat
}

TEST_CASE("algorithms: hierarchical allreduce keeps each byte off the network but once per rail",
          "[algo][hier]") {
  // 3 hosts x 4 ranks, 1200 int32: each rank sends to other hosts only its
  // rail's ring share, 2 (H-1)/H of its 300-element segment.
  const int H = 3, L = 4, n = H * L;
  std::vector<int> hosts;
  for (int r = 0; r < n; ++r) hosts.push_back(r / L);
  CollArgs a;
  a.type = CollType::AllReduce;
  a.count = 1200;
  a.eltSize = 4;
  for (int r = 0; r < n; ++r) {
    BuildParams p;
    p.rank = r;
    p.nranks = n;
    p.chunkBytes = 1 << 20;
    p.algo = Algo::Hierarchical;
    p.hosts = hosts;
    Schedule s;
    REQUIRE(buildSchedule(a, p, &s).isOk());
    CHECK(std::string(s.algorithm) == "hier");
    size_t offHost = 0, onHost = 0;
    for (const Step& st : s.steps) {
      if (st.kind != StepKind::Send) continue;
      (hosts[st.peer] == hosts[r] ? onHost : offHost) += st.bytes;
    }
    INFO("rank " << r);
    CHECK(offHost == 2 * (H - 1) * (1200 / L) * 4 / H);
    CHECK(onHost == 2 * (L - 1) * (1200 / L) * 4);
  }
}
