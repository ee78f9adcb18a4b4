// Reproducible reductions end to end (WEFT_REPRO, docs/reproducibility.md):
// real ranks (processes and threads) over the shm arena, shm FIFOs and tcp,
// with WEFT_ALGO and WEFT_CHUNK_BYTES set to everything a user might, and
// every result compared bit for bit with the serial reference each rank
// computes from every rank's inputs (which it can generate itself).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "coll/harness.h"
#include "kernels/cpu/fold.h"
#include "repro/repro_ref.h"

namespace {

using weft::Arith;

enum class Coll { AllReduce, Reduce, ReduceScatter };

// Every rank's inputs for one call (order-exposing, repro_ref.h).
template <typename T>
std::vector<std::vector<T>> inputs(int n, size_t count, uint64_t seed, bool prod) {
  std::vector<std::vector<T>> in(n, std::vector<T>(count));
  for (int r = 0; r < n; ++r) repro::fillOrderExposing(in[r].data(), count, r, seed, prod);
  return in;
}

// One call and its check on this rank. `exact`: the exact mode's reference
// (the exact-sum kernel over the element's n values, itself checked against
// MPFR in tests/kernels), else the ordered fold's.
template <typename T>
std::string callAndCheck(weft_comm_t comm, int rank, int n, Coll coll, weft_datatype_t dt,
                         weft_op_t op, size_t count, bool inPlace, uint64_t seed, bool exact) {
  const size_t inCount = coll == Coll::ReduceScatter ? count * n : count;
  const auto in = inputs<T>(n, inCount, seed, op == WEFT_PROD);
  std::vector<T> send(in[rank]), recv(count);
  std::memset(recv.data(), 0x5A, recv.size() * sizeof(T));
  const int root = static_cast<int>(seed % n);
  weft_result_t r = WEFT_SUCCESS;
  T* out = recv.data();
  switch (coll) {
    case Coll::AllReduce:
      if (inPlace) out = send.data();
      r = weft_allreduce(send.data(), out, count, dt, op, comm, nullptr);
      break;
    case Coll::Reduce:
      if (inPlace) out = send.data();
      r = weft_reduce(send.data(), out, count, dt, op, root, comm, nullptr);
      break;
    case Coll::ReduceScatter:
      if (inPlace) out = send.data() + rank * count;
      r = weft_reduce_scatter(send.data(), out, count, dt, op, comm, nullptr);
      break;
  }
  if (r != WEFT_SUCCESS) return "call failed: " + wtest::describe(r, comm);
  if (coll == Coll::Reduce && rank != root) return "";
  const size_t first = coll == Coll::ReduceScatter ? rank * count : 0;
  std::vector<T> vals(n);
  std::vector<const void*> ptrs(n);
  for (size_t i = 0; i < count; ++i) {
    for (int q = 0; q < n; ++q) vals[q] = in[q][first + i];
    T want;
    if (exact) {
      for (int q = 0; q < n; ++q) ptrs[q] = &vals[q];
      weft::foldHost(&want, ptrs.data(), n, 1, dt, op, true);
    } else {
      want = repro::orderedFold(vals.data(), n, op);
    }
    if (std::memcmp(&out[i], &want, sizeof(T)) != 0)
      return "element " + std::to_string(i) + " of " + std::to_string(count) + " differs";
  }
  return "";
}

// The body every configuration runs: every float type, SUM / AVG / PROD,
// the three reductions, counts from 1 up (and one large call), in and out
// of place.
std::string body(weft_comm_t comm, int rank, int n, bool exact, size_t large) {
  weft_repro_t mode = WEFT_REPRO_OFF;
  if (weft_comm_repro(comm, &mode) != WEFT_SUCCESS ||
      mode != (exact ? WEFT_REPRO_EXACT : WEFT_REPRO_ORDERED))
    return "weft_comm_repro does not report the mode";
  uint64_t seed = 1;
  int turn = 0;
  for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter}) {
    for (weft_datatype_t dt : repro::kFloatTypes) {
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_PROD}) {
        for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{30001}}) {
          std::string err;
          const bool inPlace = (turn++ % 2) == 1;
          repro::withType(dt, [&](auto v) {
            err = callAndCheck<decltype(v)>(comm, rank, n, coll, dt, op, count, inPlace, ++seed,
                                            exact);
          });
          if (!err.empty())
            return std::string("coll ") + std::to_string(static_cast<int>(coll)) + " dt " +
                   std::to_string(dt) + " op " + std::to_string(op) + " count " +
                   std::to_string(count) + (inPlace ? " in place" : "") + ": " + err;
        }
      }
    }
  }
  // One large call: over a million elements, many chunks and arena rounds.
  if (large) {
    std::string err = callAndCheck<float>(comm, rank, n, Coll::AllReduce, WEFT_FLOAT32, WEFT_SUM,
                                          large, false, 99, exact);
    if (err.empty())
      err = callAndCheck<weft::bf16_t>(comm, rank, n, Coll::AllReduce, WEFT_BFLOAT16, WEFT_AVG,
                                       large, true, 98, exact);
    if (!err.empty()) return "large: " + err;
  }
  return "";
}

struct Config {
  const char* what;
  int n;
  std::vector<std::string> env;
  size_t large;
};

const Config kConfigs[] = {
    {"shm arena", 3, {"WEFT_TRANSPORTS=shm"}, (1 << 20) + 3},
    {"shm arena, small rounds, WEFT_ALGO=ring",
     4,
     {"WEFT_TRANSPORTS=shm", "WEFT_SHM_ARENA_CHUNK=4096", "WEFT_ALGO=ring"},
     0},
    {"shm FIFOs (no arena), WEFT_ALGO=rd, 4K chunks",
     5,
     {"WEFT_TRANSPORTS=shm", "WEFT_SHM_ARENA_CHUNK=0", "WEFT_ALGO=rd", "WEFT_CHUNK_BYTES=4096"},
     0},
    {"tcp, WEFT_ALGO=hd",
     3,
     {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_ALGO=hd"},
     (1 << 20) + 3},
    {"tcp, WEFT_ALGO=direct, 64K chunks",
     6,
     {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_ALGO=direct", "WEFT_CHUNK_BYTES=65536"},
     0},
    {"tcp, 8 ranks, WEFT_ALGO=gather_fold",
     8,
     {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_ALGO=allreduce:gather_fold"},
     0},
    {"ucx over tcp, WEFT_ALGO=ring",
     3,
     {"WEFT_TRANSPORTS=ucx", "UCX_TLS=tcp", "WEFT_ALGO=ring"},
     0},
};

void runConfig(const Config& c, bool exact) {
  {
    std::vector<std::string> env = c.env;
    env.push_back(exact ? "WEFT_REPRO=exact" : "WEFT_REPRO=ordered");
    env.push_back("WEFT_TIMEOUT_S=120");
    INFO(c.what << ", " << c.n << " processes");
    const size_t large = c.large;
    CHECK(wtest::runProcesses(
              c.n, [&](weft_comm_t comm, int r, int n) { return body(comm, r, n, exact, large); },
              env, 600) == "");
  }
}

}  // namespace

TEST_CASE("repro: ordered over the shm arena", "[coll][repro]") { runConfig(kConfigs[0], false); }
TEST_CASE("repro: ordered over small arena rounds", "[coll][repro]") {
  runConfig(kConfigs[1], false);
}
TEST_CASE("repro: ordered over shm FIFOs", "[coll][repro]") { runConfig(kConfigs[2], false); }
TEST_CASE("repro: ordered over tcp with WEFT_ALGO=hd", "[coll][repro]") {
  runConfig(kConfigs[3], false);
}
TEST_CASE("repro: ordered over tcp with 64K chunks", "[coll][repro]") {
  runConfig(kConfigs[4], false);
}
TEST_CASE("repro: ordered over tcp with 8 ranks", "[coll][repro]") {
  runConfig(kConfigs[5], false);
}
TEST_CASE("repro: ordered over ucx", "[coll][repro]") { runConfig(kConfigs[6], false); }

TEST_CASE("repro: exact over the shm arena", "[coll][repro]") { runConfig(kConfigs[0], true); }
TEST_CASE("repro: exact over shm FIFOs", "[coll][repro]") { runConfig(kConfigs[2], true); }
TEST_CASE("repro: exact over tcp with WEFT_ALGO=hd", "[coll][repro]") {
  runConfig(kConfigs[3], true);
}

// The exact mode's result depends on the multiset of values alone: the
// same values spread over the ranks in another order, or over one more
// rank that adds -0 (which changes no exact sum, signed zeros included),
// give the same bits. Threads; each run's rank 0 result is kept.
TEST_CASE("repro: exact sums do not depend on rank order or rank count", "[coll][repro]") {
  const size_t count = 50001;
  const int base = 3;
  auto run = [&](int n, bool reversed, std::vector<float>* out) {
    return wtest::runThreads(n, [&](weft_comm_t comm, int rank, int nr) -> std::string {
      std::vector<float> x(count, -0.0f);
      const int from = reversed ? base - 1 - rank : rank;  // whose values this rank holds
      if (from >= 0 && from < base) repro::fillOrderExposing(x.data(), count, from, 5, false);
      std::vector<float> y(count);
      weft_result_t r =
          weft_allreduce(x.data(), y.data(), count, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
      if (r != WEFT_SUCCESS) return wtest::describe(r, comm);
      if (rank == 0) *out = y;
      (void)nr;
      return "";
    });
  };
  setenv("WEFT_REPRO", "exact", 1);
  std::vector<float> inOrder, backwards, padded;
  CHECK(run(base, false, &inOrder) == "");
  CHECK(run(base, true, &backwards) == "");
  CHECK(run(base + 1, false, &padded) == "");
  unsetenv("WEFT_REPRO");
  REQUIRE(inOrder.size() == count);
  CHECK(std::memcmp(inOrder.data(), backwards.data(), count * 4) == 0);
  CHECK(std::memcmp(inOrder.data(), padded.data(), count * 4) == 0);
  // The ordered mode's folds of the same values in the two orders differ
  // somewhere (the data exposes order), so the equalities above say something.
  setenv("WEFT_REPRO", "ordered", 1);
  std::vector<float> o1, o2;
  CHECK(run(base, false, &o1) == "");
  CHECK(run(base, true, &o2) == "");
  unsetenv("WEFT_REPRO");
  CHECK(std::memcmp(o1.data(), o2.data(), count * 4) != 0);
}

TEST_CASE("repro: ordered results as threads of one process", "[coll][repro]") {
  setenv("WEFT_REPRO", "ordered", 1);
  const std::string err = wtest::runThreads(
      4, [](weft_comm_t comm, int r, int n) { return body(comm, r, n, false, 0); });
  unsetenv("WEFT_REPRO");
  CHECK(err == "");
}

TEST_CASE("repro: ranks with different modes fail at init on every rank",
          "[coll][repro][processes]") {
  const std::string err = wtest::runProcesses(
      3, [](weft_comm_t, int, int) { return std::string("init should have failed"); },
      {"WEFT_TRANSPORTS=shm"}, 60,
      [](int rank) { setenv("WEFT_REPRO", rank == 1 ? "off" : "ordered", 1); });
  for (int r = 0; r < 3; ++r) {
    INFO(err);
    CHECK(err.find("rank " + std::to_string(r) + ": init:") != std::string::npos);
  }
  CHECK(err.find("every rank must use the same") != std::string::npos);
  CHECK(err.find("init should have failed") == std::string::npos);
}

TEST_CASE("repro: a value that is not a mode is refused at init", "[coll][repro][processes]") {
  const std::string err = wtest::runProcesses(
      2, [](weft_comm_t, int, int) { return std::string("init should have failed"); },
      {"WEFT_TRANSPORTS=shm", "WEFT_REPRO=orderd", "WEFT_BOOTSTRAP_TIMEOUT_S=20"}, 60);
  INFO(err);
  CHECK(err.find("WEFT_REPRO=orderd: expected off, ordered or exact") != std::string::npos);
}
