// The classic root bug on the shm arena: every rank passes its own rank as
// a broadcast's (or reduce's) root. No rank compares calls in such a
// broadcast (each thinks it is the root), so before the call history rode
// in the arena's descriptors it returned success everywhere, each rank's
// buffer holding its own data, and the next allreduce succeeded too
// (issue 29, defect 1). Now the next collective that compares calls fails
// on every rank, promptly, saying that the ranks' earlier calls differ; and
// a rank that finds a mismatch first (3 ranks, roots 0,0,1) makes the
// others fail at once instead of at WEFT_TIMEOUT_S.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "coll/harness.h"

using namespace wtest;

namespace {

using Clock = std::chrono::steady_clock;

// Each rank: a broadcast (or reduce) with the root `rootOf(rank)`, then an
// allreduce; reports "#failed <seconds> <message>" or "#succeeded".
std::string rootThenAllreduce(weft_comm_t c, int r, int n, size_t count, bool reduce,
                              int (*rootOf)(int, int)) {
  std::vector<float> a(count, static_cast<float>(r + 1)), b(count, 0.0f);
  const int root = rootOf(r, n);
  const auto t0 = Clock::now();
  weft_result_t res =
      reduce ? weft_reduce(a.data(), b.data(), count, WEFT_FLOAT32, WEFT_SUM, root, c, nullptr)
             : weft_broadcast(a.data(), b.data(), count, WEFT_FLOAT32, root, c, nullptr);
  if (res == WEFT_SUCCESS) {
    float x = 1;
    res = weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (res == WEFT_SUCCESS) return "#succeeded";
  return "#failed " + std::to_string(s) + " " + weft_get_error_string(res) + ": " +
         weft_get_last_error(c);
}

int ownRank(int r, int) { return r; }
int rootsZeroZeroOne(int r, int) { return r == 2 ? 1 : 0; }

// Every rank failed within `bound` seconds with INVALID_USAGE or (a rank
// that saw another stop) REMOTE naming that; at least one names the calls.
void expectAllFailed(const std::string& out, int n, double bound) {
  INFO(out);
  int named = 0;
  for (int r = 0; r < n; ++r) {
    const std::string tag = "rank " + std::to_string(r) + ": #failed ";
    const size_t at = out.find(tag);
    REQUIRE(at != std::string::npos);
    const double s = std::stod(out.substr(at + tag.size()));
    CHECK(s < bound);
    const std::string line = out.substr(at, out.find('\n', at) - at);
    CHECK((line.find("invalid usage") != std::string::npos ||
           line.find("found mismatched collectives") != std::string::npos));
    if (line.find("mismatched collectives") != std::string::npos) ++named;
  }
  CHECK(named >= 1);
}

const std::vector<std::string> kArena = {"WEFT_TRANSPORTS=shm", "WEFT_TIMEOUT_S=30"};

}  // namespace

TEST_CASE("root mismatch: broadcast with root = own rank fails on every rank at the next call",
          "[arena][mismatch][processes]") {
  for (int n : {2, 4}) {
    for (size_t count : {size_t{100}, size_t{1} << 20}) {  // a ring and a staged broadcast
      INFO(n << " ranks, " << count << " floats");
      std::string out = runProcesses(
          n,
          [count](weft_comm_t c, int r, int nr) {
            return rootThenAllreduce(c, r, nr, count, false, ownRank);
          },
          kArena, 60);
      expectAllFailed(out, n, 10);
      CHECK(out.find("#succeeded") == std::string::npos);
      CHECK(out.find("earlier collectives on this communicator differ") != std::string::npos);
    }
  }
}

TEST_CASE("root mismatch: reduce with root = own rank fails on every rank",
          "[arena][mismatch][processes]") {
  std::string out = runProcesses(
      3, [](weft_comm_t c, int r, int n) { return rootThenAllreduce(c, r, n, 100, true, ownRank); },
      kArena, 60);
  expectAllFailed(out, 3, 10);
}

TEST_CASE("root mismatch: roots 0 0 1 on 3 ranks fail every rank promptly - not at the timeout",
          "[arena][mismatch][processes]") {
  std::string out = runProcesses(
      3,
      [](weft_comm_t c, int r, int n) {
        return rootThenAllreduce(c, r, n, 100, false, rootsZeroZeroOne);
      },
      kArena, 60);
  expectAllFailed(out, 3, 10);  // WEFT_TIMEOUT_S is 30
}
