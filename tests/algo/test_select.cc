// Algorithm selection: the WEFT_ALGO grammar and lookup (algo_rules.h), and
// the cost model and selector (select.h). Written against whatever the
// support table (algoSupports) says today: checks that need an algorithm the
// table does not list yet are skipped, and model-level checks use modelUs(),
// which does not depend on the table.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <vector>

#include "algo/algo_rules.h"
#include "algo/select.h"

using namespace weft;

namespace {

const CollType kColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                           CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll,
                           CollType::Barrier};
const CollType kAllTypes[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                              CollType::AllGather, CollType::ReduceScatter, CollType::AllToAll,
                              CollType::Barrier,   CollType::Send,          CollType::Recv};

bool isP2p(CollType t) { return t == CollType::Send || t == CollType::Recv; }

std::vector<Algo> realAlgos() {  // every algorithm but Auto
  std::vector<Algo> out;
  for (int i = 1; i < static_cast<int>(Algo::kCount); ++i) out.push_back(static_cast<Algo>(i));
  return out;
}

AlgoRules parseOk(const std::string& spec) {
  AlgoRules r;
  Status st = parseAlgoRules(spec, &r);
  INFO("spec: " << spec << " -> " << st.message());
  REQUIRE(st.isOk());
  return r;
}

std::string parseError(const std::string& spec) {
  AlgoRules r;
  r.rules.push_back(AlgoRule{});  // must survive a failed parse
  Status st = parseAlgoRules(spec, &r);
  INFO("spec: " << spec);
  REQUIRE(st.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(r.rules.size() == 1);
  return st.message();
}

// The message quotes the clause and contains `what`.
void expectError(const std::string& spec, const std::string& clause, const std::string& what) {
  const std::string msg = parseError(spec);
  INFO("spec: " << spec << "\nmessage: " << msg);
  CHECK(msg.find("\"" + clause + "\"") != std::string::npos);
  CHECK(msg.find(what) != std::string::npos);
}

CollArgs argsFor(CollType t, size_t bytes, int n) {
  CollArgs a;
  a.type = t;
  a.eltSize = 1;
  const bool perRank =
      t == CollType::AllGather || t == CollType::ReduceScatter || t == CollType::AllToAll;
  a.count = perRank ? bytes / static_cast<size_t>(n) : bytes;
  if (t == CollType::Barrier) a.count = 0;
  if (isP2p(t)) a.peer = n > 1 ? 1 : 0;
  return a;
}

CostModel model(int n, int hosts = 1, bool arena = false, int cores = 0) {
  CostModel m;
  m.nranks = n;
  m.nhosts = hosts;
  m.maxRanksPerHost = (n + hosts - 1) / hosts;
  m.shmArena = arena && hosts == 1;
  m.cores = cores;
  return m;
}

std::vector<size_t> chunkCandidates(const CostModel& m) {
  std::vector<size_t> out;
  for (size_t c = m.minChunk;; c = std::min(c * 2, m.maxChunk)) {
    out.push_back(c);
    if (c >= m.maxChunk) break;
  }
  return out;
}

// The model's best time for `a` over the chunk candidates (table-independent).
double bestModelUs(Algo a, CollType t, size_t bytes, const CostModel& m) {
  double best = INFINITY;
  for (size_t c : chunkCandidates(m)) best = std::min(best, modelUs(a, t, bytes, m, c));
  return best;
}

bool usable(Algo a, CollType t) { return algoImplements(a, t); }

bool nearlyLe(double a, double b) { return a <= b * (1 + 1e-12) + 1e-12; }

}  // namespace

// ---------------------------------------------------------------- grammar

TEST_CASE("select: empty and blank WEFT_ALGO give no rules", "[select]") {
  for (const char* spec : {"", "   ", ";", " ; ;; ", "\t"}) {
    AlgoRules r = parseOk(spec);
    CHECK(r.empty());
    CHECK(r.lookup(CollType::AllReduce, 100) == Algo::Auto);
  }
}

TEST_CASE("select: the documented example parses into four rules", "[select]") {
  if (!usable(Algo::RecursiveDoubling, CollType::AllReduce) ||
      !usable(Algo::BinomialTree, CollType::Broadcast)) {
    WARN("rd or binomial not in the support table yet: skipped");
    return;
  }
  AlgoRules r = parseOk("allreduce:0-16K=rd,16K-inf=ring;broadcast:binomial;ring");
  REQUIRE(r.rules.size() == 4);
  CHECK_FALSE(r.rules[0].anyColl);
  CHECK(r.rules[0].type == CollType::AllReduce);
  CHECK(r.rules[0].lo == 0);
  CHECK(r.rules[0].hi == 16384);
  CHECK(r.rules[0].algo == Algo::RecursiveDoubling);
  CHECK(r.rules[1].lo == 16384);
  CHECK(r.rules[1].hi == SIZE_MAX);
  CHECK(r.rules[1].algo == Algo::Ring);
  CHECK(r.rules[2].type == CollType::Broadcast);
  CHECK(r.rules[2].algo == Algo::BinomialTree);
  CHECK(r.rules[3].anyColl);
  CHECK(r.rules[3].algo == Algo::Ring);

  CHECK(r.lookup(CollType::AllReduce, 0) == Algo::RecursiveDoubling);
  CHECK(r.lookup(CollType::AllReduce, 16383) == Algo::RecursiveDoubling);
  CHECK(r.lookup(CollType::AllReduce, 16384) == Algo::Ring);
  CHECK(r.lookup(CollType::AllReduce, SIZE_MAX) == Algo::Ring);
  CHECK(r.lookup(CollType::Broadcast, 1 << 30) == Algo::BinomialTree);
  CHECK(r.lookup(CollType::AllGather, 5) == Algo::Ring);
  CHECK(r.lookup(CollType::ReduceScatter, 5) == Algo::Ring);
  // Collectives ring does not implement fall through to the model.
  for (CollType t : {CollType::Reduce, CollType::AllToAll, CollType::Barrier})
    CHECK(r.lookup(t, 5) == (usable(Algo::Ring, t) ? Algo::Ring : Algo::Auto));
  CHECK(r.lookup(CollType::Send, 5) == Algo::Auto);
  CHECK(r.lookup(CollType::Recv, 5) == Algo::Auto);
}

TEST_CASE("select: sizes take parseBytes units and match lo inclusive hi exclusive", "[select]") {
  struct {
    const char* spec;
    size_t lo, hi;
  } cases[] = {
      {"allreduce:0-4096=ring", 0, 4096},           {"allreduce:1K-2K=ring", 1024, 2048},
      {"allreduce:1k-2kb=ring", 1024, 2048},        {"allreduce:4M-1G=ring", 4u << 20, 1u << 30},
      {"allreduce:3-inf=ring", 3, SIZE_MAX},        {"allreduce:3-INF=ring", 3, SIZE_MAX},
      {" allreduce : 100 - 200 = ring ", 100, 200},
  };
  for (const auto& c : cases) {
    INFO(c.spec);
    AlgoRules r = parseOk(c.spec);
    REQUIRE(r.rules.size() == 1);
    CHECK(r.rules[0].lo == c.lo);
    CHECK(r.rules[0].hi == c.hi);
    CHECK(r.lookup(CollType::AllReduce, c.lo) == Algo::Ring);
    if (c.lo > 0) CHECK(r.lookup(CollType::AllReduce, c.lo - 1) == Algo::Auto);
    if (c.hi != SIZE_MAX) {
      CHECK(r.lookup(CollType::AllReduce, c.hi - 1) == Algo::Ring);
      CHECK(r.lookup(CollType::AllReduce, c.hi) == Algo::Auto);
    } else {
      CHECK(r.lookup(CollType::AllReduce, SIZE_MAX) == Algo::Ring);
    }
  }
}

TEST_CASE("select: bare names and all apply to every collective they implement", "[select]") {
  for (const char* spec : {"ring", "all:ring", "ALL:Ring", "all:0-inf=ring", "0-inf=ring"}) {
    INFO(spec);
    AlgoRules r = parseOk(spec);
    REQUIRE(r.rules.size() == 1);
    CHECK(r.rules[0].anyColl);
    for (CollType t : kAllTypes)
      CHECK(r.lookup(t, 1000) == (usable(Algo::Ring, t) ? Algo::Ring : Algo::Auto));
  }
  // Names no collective explicitly, so an algorithm that implements few is fine.
  AlgoRules r = parseOk("dissemination;pairwise;chain");
  CHECK(r.lookup(CollType::Barrier, 0) == Algo::Dissemination);
  CHECK(r.lookup(CollType::AllToAll, 1) == Algo::Pairwise);
  CHECK(r.lookup(CollType::Broadcast, 1) == Algo::Chain);
  CHECK(r.lookup(CollType::AllReduce, 1) ==
        (usable(Algo::Dissemination, CollType::AllReduce) ? Algo::Dissemination : Algo::Auto));
}

TEST_CASE("select: overlapping ranges and clauses match first", "[select]") {
  Algo other = Algo::Auto;
  for (Algo a : realAlgos())
    if (a != Algo::Ring && a != Algo::Shm && usable(a, CollType::AllReduce)) other = a;
  if (other == Algo::Auto) {
    WARN("only ring implements allreduce: skipped");
    return;
  }
  const std::string o = algoName(other);
  AlgoRules r = parseOk("allreduce:0-1M=ring,0-inf=" + o);
  CHECK(r.lookup(CollType::AllReduce, 0) == Algo::Ring);
  CHECK(r.lookup(CollType::AllReduce, (1 << 20) - 1) == Algo::Ring);
  CHECK(r.lookup(CollType::AllReduce, 1 << 20) == other);

  r = parseOk("allreduce:" + o + ";ring");
  CHECK(r.lookup(CollType::AllReduce, 5) == other);
  CHECK(r.lookup(CollType::AllGather, 5) == Algo::Ring);
  r = parseOk("ring;allreduce:" + o);
  CHECK(r.lookup(CollType::AllReduce, 5) == Algo::Ring);
}

TEST_CASE("select: auto in a rule hands the choice back to the model", "[select]") {
  AlgoRules r = parseOk("allreduce:0-1K=auto;ring");
  CHECK(r.lookup(CollType::AllReduce, 100) == Algo::Auto);
  CHECK(r.lookup(CollType::AllReduce, 1024) == Algo::Ring);
  CHECK(r.lookup(CollType::AllGather, 100) == Algo::Ring);
  r = parseOk("auto");
  for (CollType t : kAllTypes) CHECK(r.lookup(t, 1) == Algo::Auto);
}

TEST_CASE("select: algorithm aliases and case are accepted", "[select]") {
  AlgoRules r = parseOk("AllReduce:RING;Reduce_Scatter:0-1K=Ring");
  REQUIRE(r.rules.size() == 2);
  CHECK(r.rules[0].type == CollType::AllReduce);
  CHECK(r.rules[1].type == CollType::ReduceScatter);
  if (usable(Algo::HalvingDoubling, CollType::AllReduce)) {
    r = parseOk("allreduce:rabenseifner");
    CHECK(r.rules[0].algo == Algo::HalvingDoubling);
  }
  if (usable(Algo::RecursiveDoubling, CollType::AllReduce)) {
    r = parseOk("allreduce:recursive_doubling");
    CHECK(r.rules[0].algo == Algo::RecursiveDoubling);
  }
}

TEST_CASE("select: shm rules apply only with the arena", "[select]") {
  AlgoRules r = parseOk("shm;ring");
  for (CollType t : kColls) {
    INFO(collName(t));
    if (!algoImplements(Algo::Shm, t)) continue;
    CHECK(r.lookup(t, 100) == Algo::Shm);
    CHECK(r.lookup(t, 100, true) == Algo::Shm);
    CHECK(r.lookup(t, 100, false) == (usable(Algo::Ring, t) ? Algo::Ring : Algo::Auto));
  }
  CHECK(r.lookup(CollType::Send, 100) == Algo::Auto);
  CHECK_FALSE(algoImplements(Algo::Shm, CollType::Send));
  CHECK_FALSE(algoImplements(Algo::Shm, CollType::Recv));
  CHECK(algoImplements(Algo::Shm, CollType::AllReduce));  // the arena's contract
}

TEST_CASE("select: algoImplements follows the support table", "[select]") {
  for (Algo a : realAlgos())
    for (CollType t : kAllTypes)
      if (a != Algo::Shm) CHECK(algoImplements(a, t) == algoSupports(a, t));
}

TEST_CASE("select: every WEFT_ALGO error quotes the clause and says what was expected",
          "[select]") {
  expectError("foo:ring", "foo:ring", "unknown collective \"foo\"");
  expectError("foo:ring", "foo:ring", "allreduce, broadcast, reduce, allgather, reduce_scatter");
  expectError("send:ring", "send:ring", "unknown collective");
  expectError("allreduce:", "allreduce:", "nothing after ':'");
  expectError("allreduce: ", "allreduce:", "expected an algorithm name or <lo>-<hi>=<algo>");
  expectError("allreduce:ring:chain", "allreduce:ring:chain", "more than one ':'");
  expectError("allreduce:nosuch", "allreduce:nosuch", "unknown algorithm \"nosuch\"");
  expectError("allreduce:nosuch", "allreduce:nosuch", "expected one of auto, ring");
  expectError("allreduce:0-16K", "allreduce:0-16K", "needs '=<algo>'");
  expectError("ring,chain", "ring,chain", "neither an algorithm name");
  expectError("allreduce:0-16K=ring,", "allreduce:0-16K=ring,", "an empty range");
  expectError("allreduce:0=ring", "allreduce:0=ring", "is not <lo>-<hi>=<algo>");
  expectError("allreduce:0-1-2=ring", "allreduce:0-1-2=ring", "one '-' between the sizes");
  expectError("allreduce:-1-5=ring", "allreduce:-1-5=ring", "one '-' between the sizes");
  expectError("allreduce:0-1K==ring", "allreduce:0-1K==ring", "is not <lo>-<hi>=<algo>");
  expectError("allreduce:16Q-32K=ring", "allreduce:16Q-32K=ring", "\"16Q\" is not a size");
  expectError("allreduce:16Q-32K=ring", "allreduce:16Q-32K=ring", "16K, 4M or 1G");
  expectError("allreduce: +5-10=ring", "allreduce: +5-10=ring", "\"+5\" is not a size");
  expectError("allreduce:0-1T=ring", "allreduce:0-1T=ring", "\"1T\" is not a size");
  expectError("allreduce:inf-1K=ring", "allreduce:inf-1K=ring", "lower bound cannot be inf");
  expectError("allreduce:4K-4K=ring", "allreduce:4K-4K=ring", "is empty");
  expectError("allreduce:8K-4K=ring", "allreduce:8K-4K=ring", "is empty");
  expectError("allreduce:0-99999999999999999999=ring", "allreduce:0-99999999999999999999=ring",
              "too large");
  expectError("allreduce:0-99999999999G=ring", "allreduce:0-99999999999G=ring", "too large");
  expectError("allreduce:0-1K=", "allreduce:0-1K=", "algorithm name is missing");
  // One bad clause rejects the whole spec; the message quotes that clause.
  expectError("ring; allreduce:bogus ;chain", "allreduce:bogus", "unknown algorithm");
}

TEST_CASE("select: naming a collective the algorithm lacks is an error", "[select]") {
  for (CollType t : kColls)
    for (Algo a : realAlgos()) {
      if (algoImplements(a, t)) continue;
      const std::string clause = std::string(collName(t)) + ":" + algoName(a);
      expectError(clause, clause, std::string(algoName(a)) + " does not implement " + collName(t));
      expectError(clause, clause, std::string("algorithms for ") + collName(t) + ": ");
      const std::string ranged = std::string(collName(t)) + ":0-1K=" + algoName(a);
      expectError(ranged, ranged, "does not implement");
      // ... but not when no collective is named.
      parseOk(algoName(a));
      parseOk(std::string("all:") + algoName(a));
    }
  if (!algoImplements(Algo::Ring, CollType::Broadcast)) {
    const std::string msg = parseError("broadcast:ring");
    CHECK(msg.find("chain") != std::string::npos);  // lists what does implement it
  }
}

TEST_CASE("select: rules print back as WEFT_ALGO text", "[select]") {
  CHECK(formatByteSize(0) == "0");
  CHECK(formatByteSize(100) == "100");
  CHECK(formatByteSize(1025) == "1025");
  CHECK(formatByteSize(16384) == "16K");
  CHECK(formatByteSize(size_t{1536} << 20) == "1536M");
  CHECK(formatByteSize(size_t{1} << 30) == "1G");
  CHECK(formatByteSize(SIZE_MAX) == "inf");

  const std::string spec = "allreduce:0-16K=ring,16K-inf=ring;reduce_scatter:100-1M=ring;chain";
  AlgoRules r = parseOk(spec);
  std::string printed;
  for (const AlgoRule& rule : r.rules)
    printed += (printed.empty() ? "" : ";") + formatAlgoRule(rule);
  CHECK(printed == "allreduce:0-16K=ring;allreduce:16K-inf=ring;reduce_scatter:100-1M=ring;chain");
  AlgoRules again = parseOk(printed);
  REQUIRE(again.rules.size() == r.rules.size());
  for (size_t i = 0; i < r.rules.size(); ++i) {
    CHECK(again.rules[i].anyColl == r.rules[i].anyColl);
    CHECK(again.rules[i].lo == r.rules[i].lo);
    CHECK(again.rules[i].hi == r.rules[i].hi);
    CHECK(again.rules[i].algo == r.rules[i].algo);
  }
}

// ---------------------------------------------------------------- selection

TEST_CASE("select: choose invariants over collectives ranks sizes and hosts", "[select]") {
  const int ranks[] = {1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 32, 33, 64};
  const size_t sizes[] = {0,       1,       8,        100,       4096,           65536,
                          1 << 20, 3 << 20, 16 << 20, 256 << 20, size_t{1} << 30};
  int configs = 0;
  for (int n : ranks)
    for (int hosts : {1, 2, 4})
      for (bool arena : {false, true})
        for (int cores : {0, 2}) {
          if (hosts > n || (arena && hosts > 1)) continue;
          const CostModel m = model(n, hosts, arena, cores);
          const std::vector<size_t> chunks = chunkCandidates(m);
          for (CollType t : kAllTypes)
            for (size_t bytes : sizes) {
              ++configs;
              const CollArgs args = argsFor(t, bytes, n);
              const Choice c = choose(args, m, nullptr);
              INFO(collName(t) << " n=" << n << " hosts=" << hosts << " arena=" << arena
                               << " cores=" << cores << " bytes=" << bytes << " -> "
                               << algoName(c.algo) << " chunk=" << c.chunkBytes
                               << " est=" << c.estUs);
              if (c.chunkBytes < m.minChunk || c.chunkBytes > m.maxChunk || c.forced ||
                  !std::isfinite(c.estUs) || c.estUs < 0)
                FAIL_CHECK("chunk out of bounds, forced without rules, or bad estimate");
              if (isP2p(t)) {
                if (c.algo != Algo::Auto) FAIL_CHECK("send/recv must get Auto");
                continue;
              }
              if (c.algo == Algo::Auto || !algoUsable(c.algo, t, m) || !algoImplements(c.algo, t))
                FAIL_CHECK("chose an algorithm that does not implement the collective");
              if (c.algo == Algo::Shm && !m.shmArena) FAIL_CHECK("shm without the arena");
              if (c.algo != Algo::Shm && !algoSupports(c.algo, t))
                FAIL_CHECK("chose an algorithm the support table does not list");
              const double again = estimateUs(c.algo, args, m, c.chunkBytes);
              if (std::fabs(again - c.estUs) > 1e-9 * c.estUs)
                FAIL_CHECK("estUs differs from estimateUs");
              // No usable algorithm at any candidate chunk is estimated faster.
              // (Fold and GatherFold are the model's picks for reproducible calls alone.)
              for (Algo a : realAlgos()) {
                if (!algoUsable(a, t, m) || a == Algo::Fold || a == Algo::GatherFold) continue;
                for (size_t ch : chunks)
                  if (!nearlyLe(c.estUs, estimateUs(a, args, m, ch)))
                    FAIL_CHECK(std::string("a faster choice exists: ") + algoName(a));
              }
            }
        }
  CHECK(configs > 1000);
}

TEST_CASE("select: estimateUs is infinite exactly where an algorithm cannot run", "[select]") {
  for (bool arena : {false, true}) {
    const CostModel m = model(8, 1, arena);
    for (CollType t : kAllTypes) {
      const CollArgs args = argsFor(t, 4096, 8);
      INFO(collName(t) << " arena=" << arena);
      CHECK(std::isfinite(estimateUs(Algo::Auto, args, m, 1 << 20)));
      for (Algo a : realAlgos()) {
        INFO(algoName(a));
        const bool runs = !isP2p(t) && algoImplements(a, t) && (a != Algo::Shm || arena);
        CHECK(std::isfinite(estimateUs(a, args, m, 1 << 20)) == runs);
        CHECK(algoUsable(a, t, m) == runs);
        CHECK(std::isfinite(evaluate(a, args, m).estUs) == runs);
      }
    }
  }
}

TEST_CASE("select: the model is monotone non-decreasing in size for every algorithm", "[select]") {
  std::vector<size_t> sizes = {0, 1, 2, 3, 7, 8, 63, 64, 65};
  for (double s = 100; s < 2e9; s *= 1.37) sizes.push_back(static_cast<size_t>(s));
  for (size_t c : {size_t{64} << 10, size_t{1} << 20, size_t{4} << 20})
    for (size_t k : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{64}}) {
      sizes.push_back(c * k - 1);  // around chunk boundaries
      sizes.push_back(c * k);
      sizes.push_back(c * k + 1);
    }
  std::sort(sizes.begin(), sizes.end());
  for (int n : {1, 2, 3, 5, 8, 13, 16, 33, 64})
    for (int hosts : {1, 2, 4})
      for (int cores : {0, 4}) {
        if (hosts > n) continue;
        const CostModel m = model(n, hosts, hosts == 1, cores);
        for (CollType t : kAllTypes)
          for (Algo a : realAlgos())
            for (size_t chunk : {size_t{64} << 10, size_t{1} << 20}) {
              double prev = -1;
              for (size_t s : sizes) {
                const double us = modelUs(a, t, s, m, chunk);
                if (!std::isfinite(us) || us < 0 || !nearlyLe(prev, us)) {
                  std::ostringstream why;
                  why << algoName(a) << " " << collName(t) << " n=" << n << " hosts=" << hosts
                      << " cores=" << cores << " chunk=" << chunk << " size=" << s << ": " << us
                      << " us after " << prev << " us";
                  FAIL_CHECK(why.str());
                }
                prev = us;
              }
            }
        // The selector's estimate (a minimum of monotone functions) too.
        for (CollType t : kColls) {
          double prev = -1;
          for (size_t s : sizes) {
            const double us = chooseForBytes(t, s, m, nullptr).estUs;
            INFO(collName(t) << " n=" << n << " hosts=" << hosts << " size=" << s);
            if (!nearlyLe(prev, us)) FAIL_CHECK("choose() estimate decreases with size");
            prev = us;
          }
        }
      }
}

TEST_CASE("select: forced rules win with the model's chunk size", "[select]") {
  for (bool arena : {false, true}) {
    const CostModel m = model(8, 1, arena);
    for (CollType t : kColls)
      for (Algo a : realAlgos()) {
        if (!algoImplements(a, t)) continue;
        INFO(collName(t) << " " << algoName(a) << " arena=" << arena);
        for (const std::string& spec :
             {std::string(collName(t)) + ":" + algoName(a), std::string(algoName(a)),
              std::string(collName(t)) + ":0-1M=" + algoName(a)}) {
          const AlgoRules rules = parseOk(spec);
          const CollArgs args = argsFor(t, 4096, 8);
          const Choice c = choose(args, m, &rules);
          if (a == Algo::Shm && !arena) {
            CHECK_FALSE(c.forced);
            CHECK(c.algo != Algo::Shm);
            continue;
          }
          const Choice best = evaluate(a, args, m);
          CHECK(c.forced);
          CHECK(c.algo == a);
          CHECK(c.chunkBytes == best.chunkBytes);
          CHECK(c.estUs == best.estUs);
        }
        // Outside the rule's range the model chooses.
        if (t != CollType::Barrier) {
          const AlgoRules rules = parseOk(std::string(collName(t)) + ":0-1K=" + algoName(a));
          const CollArgs big = argsFor(t, 1 << 20, 8);
          const Choice c = choose(big, m, &rules);
          const Choice free = choose(big, m, nullptr);
          CHECK_FALSE(c.forced);
          CHECK(c.algo == free.algo);
        }
      }
  }
  // Send and recv ignore rules; null and empty rules are the model.
  const CostModel m = model(4);
  const AlgoRules ring = parseOk("ring;all:auto");
  const AlgoRules none;
  for (CollType t : {CollType::Send, CollType::Recv}) {
    const Choice c = choose(argsFor(t, 100, 4), m, &ring);
    CHECK(c.algo == Algo::Auto);
    CHECK_FALSE(c.forced);
  }
  for (CollType t : kColls) {
    const CollArgs args = argsFor(t, 12345, 4);
    CHECK(choose(args, m, &none).algo == choose(args, m, nullptr).algo);
  }
}

TEST_CASE("select: the model's shapes (latency vs bandwidth algorithms)", "[select]") {
  const CostModel one = model(8);
  const size_t small = 8, large = 64 << 20;
  auto best = [&](Algo a, CollType t, size_t s, const CostModel& m) {
    return bestModelUs(a, t, s, m);
  };
  // n = 8 on one host: rd and direct beat the ring on 8 bytes, lose on 64 MiB.
  for (Algo lat : {Algo::RecursiveDoubling, Algo::Direct}) {
    INFO(algoName(lat));
    CHECK(best(lat, CollType::AllReduce, small, one) <
          best(Algo::Ring, CollType::AllReduce, small, one));
    CHECK(best(Algo::Ring, CollType::AllReduce, large, one) <
          best(lat, CollType::AllReduce, large, one));
  }
  // Rabenseifner moves what the ring moves in fewer steps.
  CHECK(best(Algo::HalvingDoubling, CollType::AllReduce, large, one) <=
        best(Algo::Ring, CollType::AllReduce, large, one));
  // Broadcast: binomial tree for small, chain for large.
  CHECK(best(Algo::BinomialTree, CollType::Broadcast, small, one) <
        best(Algo::Chain, CollType::Broadcast, small, one));
  CHECK(best(Algo::Chain, CollType::Broadcast, large, one) <
        best(Algo::BinomialTree, CollType::Broadcast, large, one));
  // Several hosts: recursive doubling's whole-vector steps cross the network.
  const CostModel two = model(16, 2);
  CHECK(best(Algo::Ring, CollType::AllReduce, 1 << 30, two) <
        best(Algo::RecursiveDoubling, CollType::AllReduce, 1 << 30, two));
  // Crossing hosts costs more than staying on one.
  CHECK(best(Algo::Ring, CollType::AllReduce, large, two) >
        best(Algo::Ring, CollType::AllReduce, large, model(16)));
  // Oversubscription: 8 ranks on 2 cores multiply the per-step latency by 4.
  const double base = modelUs(Algo::Ring, CollType::AllReduce, 0, one, 1 << 20);
  const double over = modelUs(Algo::Ring, CollType::AllReduce, 0, model(8, 1, false, 2), 1 << 20);
  CHECK(over == Approx(4 * base));
  CHECK(modelUs(Algo::Ring, CollType::AllReduce, 0, model(8, 1, false, 8), 1 << 20) ==
        Approx(base));
  // The arena beats messages for small collectives.
  const CostModel arena = model(8, 1, true);
  CHECK(best(Algo::Shm, CollType::AllReduce, small, arena) <
        best(Algo::Direct, CollType::AllReduce, small, arena));
  CHECK(best(Algo::Shm, CollType::Barrier, 0, arena) <
        best(Algo::Dissemination, CollType::Barrier, 0, arena));
}

TEST_CASE("select: choose picks latency algorithms small and bandwidth algorithms large",
          "[select]") {
  const CostModel one = model(8);
  auto pick = [](CollType t, size_t bytes, const CostModel& m) {
    return choose(argsFor(t, bytes, m.nranks), m, nullptr).algo;
  };
  // allreduce, n = 8, one host, no arena.
  const bool latAr = algoUsable(Algo::RecursiveDoubling, CollType::AllReduce, one) ||
                     algoUsable(Algo::Direct, CollType::AllReduce, one);
  if (latAr)
    CHECK(pick(CollType::AllReduce, 8, one) != Algo::Ring);
  else
    WARN("neither rd nor direct implements allreduce yet: small-size check skipped");
  const Algo big = pick(CollType::AllReduce, 64 << 20, one);
  CHECK(big != Algo::RecursiveDoubling);
  CHECK(big != Algo::Direct);
  CHECK(big != Algo::Shm);
  // broadcast.
  if (algoUsable(Algo::BinomialTree, CollType::Broadcast, one) ||
      algoUsable(Algo::Direct, CollType::Broadcast, one))
    CHECK(pick(CollType::Broadcast, 8, one) != Algo::Chain);
  const Algo bigBcast = pick(CollType::Broadcast, 64 << 20, one);
  CHECK(bigBcast != Algo::BinomialTree);
  CHECK(bigBcast != Algo::Direct);
  // 64 ranks on 8 hosts: 1 GiB allreduce is not sent whole at every step.
  const CostModel many = model(64, 8);
  const Algo huge = pick(CollType::AllReduce, 1 << 30, many);
  CHECK(huge != Algo::RecursiveDoubling);
  CHECK(huge != Algo::Direct);
  // The arena, when there is one, wins small collectives.
  const CostModel arena = model(8, 1, true);
  for (CollType t : kColls)
    if (algoImplements(Algo::Shm, t)) CHECK(pick(t, 8, arena) == Algo::Shm);
  // One rank: nothing to exchange; the default algorithm is kept.
  for (CollType t : kColls) CHECK(pick(t, 1 << 20, model(1)) == defaultAlgo(t));
}

TEST_CASE("select: ranks sharing cores without the arena pace broadcasts by the busiest core",
          "[select]") {
  auto pick = [](size_t bytes, const CostModel& m) {
    return choose(argsFor(CollType::Broadcast, bytes, m.nranks), m, nullptr).algo;
  };
  // Round-robin on 2 cores, root 0: the binomial tree puts 4 of 6 message
  // ends on core 0 with 4 ranks and 10 of 14 with 8; the chain 3 and 7.
  const CostModel four = model(4, 1, false, 2), eight = model(8, 1, false, 2);
  CHECK(modelUs(Algo::BinomialTree, CollType::Broadcast, 64, four, 64 << 10) ==
        Approx(modelUs(Algo::Chain, CollType::Broadcast, 64, four, 64 << 10) * 4 / 3));
  CHECK(modelUs(Algo::BinomialTree, CollType::Broadcast, 64, eight, 64 << 10) ==
        Approx(modelUs(Algo::Chain, CollType::Broadcast, 64, eight, 64 << 10) * 10 / 7));
  // The root alone sends n-1 messages: the direct algorithm paces no better
  // than the tree (10 ends on core 0 with 8 ranks as well).
  CHECK(modelUs(Algo::Direct, CollType::Broadcast, 64, eight, 64 << 10) ==
        Approx(modelUs(Algo::BinomialTree, CollType::Broadcast, 64, eight, 64 << 10)));
  for (size_t bytes : {size_t{64}, size_t{16} << 10, size_t{64} << 20}) {
    CHECK(pick(bytes, four) == Algo::Chain);
    CHECK(pick(bytes, eight) == Algo::Chain);
  }
  // A core per rank: latency counts again (one round, or the tree's depth).
  CHECK(pick(64, model(4, 1, false, 4)) != Algo::Chain);
  // With the arena, it serves small broadcasts whatever the cores.
  CHECK(pick(64, model(4, 1, true, 2)) == Algo::Shm);
  // Other collectives keep the latency model.
  CHECK(modelUs(Algo::Chain, CollType::Reduce, 64, four, 64 << 10) ==
        Approx(modelUs(Algo::Chain, CollType::Reduce, 64, model(4, 1, false, 0), 64 << 10) * 2));
}

TEST_CASE("select: two ranks per core fold their pairs in recursive doubling", "[select]") {
  // 4 ranks on 2 cores, no arena: schedules over the intra-host links.
  CostModel plain = model(4, 1, false, 2), paired = plain;
  paired.pairedCores = true;
  // Folded: two handoffs on a core and one doubling step between the cores,
  // none of them shared with the core's other rank, against two doubling
  // steps with every message sharing a core.
  CostModel two = model(2, 1, false, 2);
  for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{1} << 20}) {
    INFO(bytes);
    const double folded = modelUs(Algo::RecursiveDoubling, CollType::AllReduce, bytes, paired, 1 << 20);
    CHECK(folded < modelUs(Algo::RecursiveDoubling, CollType::AllReduce, bytes, plain, 1 << 20));
    CHECK(folded > modelUs(Algo::RecursiveDoubling, CollType::AllReduce, bytes, two, 1 << 20));
  }
  // So recursive doubling reaches larger sizes before halving-doubling.
  auto lastRd = [](const CostModel& m) {
    size_t last = 0;
    for (size_t b = 8; b <= (size_t{64} << 20); b *= 2)
      if (choose(argsFor(CollType::AllReduce, b, m.nranks), m, nullptr).algo ==
          Algo::RecursiveDoubling)
        last = b;
    return last;
  };
  CHECK(lastRd(paired) > lastRd(plain));
  // Only allreduce folds; other rank counts and layouts keep the plain model.
  CHECK(modelUs(Algo::RecursiveDoubling, CollType::AllGather, 4096, paired, 1 << 20) ==
        Approx(modelUs(Algo::RecursiveDoubling, CollType::AllGather, 4096, plain, 1 << 20)));
  CostModel six = model(6, 1, false, 3);
  CostModel sixPaired = six;
  sixPaired.pairedCores = true;
  CHECK(modelUs(Algo::RecursiveDoubling, CollType::AllReduce, 4096, sixPaired, 1 << 20) ==
        Approx(modelUs(Algo::RecursiveDoubling, CollType::AllReduce, 4096, six, 1 << 20)));
}

TEST_CASE("select: chunk sizes pipeline large messages and stay in bounds", "[select]") {
  CostModel m = model(16);
  if (algoUsable(Algo::Chain, CollType::Broadcast, m)) {
    const Choice c = evaluate(Algo::Chain, argsFor(CollType::Broadcast, 64 << 20, 16), m);
    CHECK(c.chunkBytes >= m.minChunk);
    CHECK(c.chunkBytes < m.maxChunk);  // several chunks in flight down the chain
    CHECK((64u << 20) / c.chunkBytes >= 16);
  }
  // Messages below the smallest chunk: the smallest chunk (ties go small).
  for (CollType t : kColls) CHECK(choose(argsFor(t, 100, 16), m, nullptr).chunkBytes == m.minChunk);
  // Odd bounds are put in order; a chunk of 0 is not offered.
  m.minChunk = 1 << 20;
  m.maxChunk = 64 << 10;
  Choice c = choose(argsFor(CollType::AllReduce, 256 << 20, 16), m, nullptr);
  CHECK(c.chunkBytes >= (64u << 10));
  CHECK(c.chunkBytes <= (1u << 20));
  m.minChunk = 0;
  m.maxChunk = 4 << 20;
  c = choose(argsFor(CollType::AllReduce, 256 << 20, 16), m, nullptr);
  CHECK(c.chunkBytes >= 1);
  CHECK(c.chunkBytes <= m.maxChunk);
}

TEST_CASE("select: odd cost models still give finite choices", "[select]") {
  CostModel m;
  m.nranks = 0;  // treated as 1
  m.nhosts = 5;
  m.maxRanksPerHost = 0;
  m.intra.bandwidthGBs = 0;
  m.inter.latencyUs = -3;
  m.reduceGBs = 0;
  m.msgShare = 7;
  for (CollType t : kAllTypes) {
    const Choice c = choose(argsFor(t, 1 << 20, 1), m, nullptr);
    CHECK(std::isfinite(c.estUs));
    CHECK(c.estUs >= 0);
  }
  m = model(6, 3);
  m.maxRanksPerHost = 1;  // inconsistent with 6 ranks on 3 hosts: at least 2 per host
  CHECK(std::isfinite(choose(argsFor(CollType::AllReduce, 1 << 20, 6), m, nullptr).estUs));
}

TEST_CASE("select: the tuning table lists every collective and reads back as WEFT_ALGO",
          "[select]") {
  for (const CostModel& m : {model(8), model(8, 1, true), model(64, 8), model(32, 1, false, 8)}) {
    const std::string table = tuningTable(m);
    INFO(table);
    CHECK(table.back() != '\n');
    for (CollType t : kColls) CHECK(table.find(collName(t)) != std::string::npos);
    const size_t at = table.find("as WEFT_ALGO: ");
    REQUIRE(at != std::string::npos);
    const std::string spec = table.substr(at + 14);
    const AlgoRules rules = parseOk(spec);
    // The printed spec reproduces the model's choices at powers of two.
    for (CollType t : kColls)
      for (size_t s = 1; s <= (size_t{1} << 32); s *= 2) {
        const Choice c = chooseForBytes(t, s, m, nullptr);
        INFO(collName(t) << " " << s);
        CHECK(rules.lookup(t, s, m.shmArena) == c.algo);
        if (t == CollType::Barrier) break;
      }
  }
  const CostModel m = model(8);
  const AlgoRules forced = parseOk("allreduce:ring");
  const std::string table = tuningTable(m, &forced);
  CHECK(table.find("ring (WEFT_ALGO)") != std::string::npos);
  CHECK(tuningTable(m) == tuningTable(m, nullptr));
}

TEST_CASE("select: hierarchical allreduce wins across hosts with several ranks each", "[select][hier]") {
  auto pick = [](const CostModel& m, size_t bytes) {
    return chooseForBytes(CollType::AllReduce, bytes, m, nullptr).algo;
  };
  // Several hosts, several ranks each: the large allreduces go hierarchical.
  for (int hosts : {2, 3, 4, 8})
    for (int ppn : {2, 4, 8}) {
      const CostModel m = model(hosts * ppn, hosts);
      INFO(hosts << " hosts x " << ppn);
      CHECK(pick(m, 64u << 20) == Algo::Hierarchical);
      CHECK(modelUs(Algo::Hierarchical, CollType::AllReduce, 64u << 20, m, 1 << 20) <
            modelUs(Algo::Ring, CollType::AllReduce, 64u << 20, m, 1 << 20));
    }
  // Never without rails: one host, one rank per host, or uneven hosts.
  for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(256) << 20}) {
    CHECK(pick(model(8, 1), bytes) != Algo::Hierarchical);
    CHECK(pick(model(4, 4), bytes) != Algo::Hierarchical);
    CostModel uneven = model(7, 3);  // 3 + 3 + 1
    CHECK(pick(uneven, bytes) != Algo::Hierarchical);
  }
}

TEST_CASE("select: compressed calls run only on algorithms that carry the wire format",
          "[select][wire]") {
  const size_t sizes[] = {4, 4096, 1 << 20, 64 << 20};
  const AlgoRules rd = parseOk("rd");
  for (int n : {2, 3, 4, 8, 33})
    for (int hosts : {1, 2})
      for (bool arena : {false, true}) {
        if (hosts > n || (arena && hosts > 1)) continue;
        const CostModel m = model(n, hosts, arena);
        for (CollType t : {CollType::AllReduce, CollType::Reduce, CollType::ReduceScatter})
          for (size_t bytes : sizes) {
            CollArgs args = argsFor(t, bytes, n);
            args.wire = Wire::Bf16;
            for (const AlgoRules* rules : {static_cast<const AlgoRules*>(nullptr), &rd}) {
              const Choice c = choose(args, m, rules);
              INFO(collName(t) << " n=" << n << " hosts=" << hosts << " arena=" << arena
                               << " bytes=" << bytes << " -> " << algoName(c.algo));
              CHECK(algoCarriesWire(c.algo, t));
              CHECK_FALSE(c.forced);
            }
          }
      }
  // A rule naming one that carries it is followed.
  const AlgoRules fold = parseOk("allreduce:fold");
  CollArgs args = argsFor(CollType::AllReduce, 1 << 20, 4);
  args.wire = Wire::Fp16;
  const Choice c = choose(args, model(4, 1, false), &fold);
  CHECK(c.forced);
  CHECK(c.algo == Algo::Fold);
}
