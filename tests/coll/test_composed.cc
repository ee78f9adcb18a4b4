// gather, scatter, alltoallv (src/api/api_composed.cc), the per-comm config
// and timeout: threads and processes, every element checked, and bad
// arguments refused without touching a buffer.
#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>

#include "coll/harness.h"

using wtest::runProcesses;
using wtest::runThreads;

namespace {

std::string gatherScatter(weft_comm_t comm, int rank, int n) {
  const size_t count = 1000;
  for (int root = 0; root < n; ++root) {
    std::vector<int32_t> mine(count), all(count * n, -1);
    for (size_t i = 0; i < count; ++i) mine[i] = rank * 100000 + static_cast<int32_t>(i);
    TRY_WEFT(weft_gather(mine.data(), rank == root ? all.data() : nullptr, count, WEFT_INT32, root,
                         comm, nullptr));
    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i)
          if (all[r * count + i] != r * 100000 + static_cast<int32_t>(i))
            return "gather root " + std::to_string(root) + ": block " + std::to_string(r) +
                   " element " + std::to_string(i) + " is " + std::to_string(all[r * count + i]);
    // Scatter back what the root holds, block r to rank r, and in place on the root.
    std::vector<int32_t> src(count * n), got(count, -7);
    for (size_t i = 0; i < src.size(); ++i) src[i] = root * 7 + static_cast<int32_t>(i);
    void* recv = rank == root ? static_cast<void*>(src.data() + rank * count) : got.data();
    TRY_WEFT(weft_scatter(rank == root ? src.data() : nullptr, recv, count, WEFT_INT32, root, comm,
                          nullptr));
    const int32_t* have = rank == root ? src.data() + rank * count : got.data();
    for (size_t i = 0; i < count; ++i)
      if (have[i] != root * 7 + static_cast<int32_t>(rank * count + i))
        return "scatter root " + std::to_string(root) + ": element " + std::to_string(i) + " is " +
               std::to_string(have[i]);
  }
  return "";
}

// Rank r sends (r + j + 1) elements to rank j, valued 1000 r + j.
std::string alltoallv(weft_comm_t comm, int rank, int n) {
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = rank + j + 1;
    sd[j] = st;
    st += sc[j] + 3;  // gaps between blocks
    rc[j] = j + rank + 1;
    rd[j] = rt;
    rt += rc[j];
  }
  std::vector<double> send(st), recv(rt, -1);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < sc[j]; ++i) send[sd[j] + i] = 1000.0 * rank + j;
  TRY_WEFT(weft_alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                          WEFT_FLOAT64, comm, nullptr));
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < rc[j]; ++i)
      if (recv[rd[j] + i] != 1000.0 * j + rank)
        return "alltoallv: from rank " + std::to_string(j) + " element " + std::to_string(i) +
               " is " + std::to_string(recv[rd[j] + i]);
  return "";
}

}  // namespace

TEST_CASE("gather and scatter from every root - threads and processes", "[composed]") {
  CHECK(runThreads(3, gatherScatter) == "");
  CHECK(runProcesses(4, gatherScatter) == "");
}

TEST_CASE("alltoallv with uneven counts and gaps - threads and processes", "[composed]") {
  CHECK(runThreads(3, alltoallv) == "");
  CHECK(runProcesses(4, alltoallv) == "");
}

TEST_CASE("composed calls refuse bad arguments and write nothing", "[composed][errors]") {
  CHECK(runThreads(2, [](weft_comm_t comm, int rank, int n) -> std::string {
    std::vector<float> buf(8 * n, 5.0f), out(8 * n, 9.0f);
    auto untouched = [&] {
      for (float v : out)
        if (v != 9.0f) return false;
      return true;
    };
    if (weft_gather(buf.data(), out.data(), 8, WEFT_FLOAT32, n, comm, nullptr) !=
            WEFT_ERR_INVALID_ARGUMENT ||
        std::string(weft_get_last_error(comm)).find("root") == std::string::npos)
      return "gather with root n was not refused naming the root";
    if (weft_scatter(buf.data(), out.data(), 8, static_cast<weft_datatype_t>(99), 0, comm,
                     nullptr) != WEFT_ERR_INVALID_ARGUMENT)
      return "scatter with datatype 99 was not refused";
    if (weft_gather(buf.data(), nullptr, 8, WEFT_FLOAT32, rank, comm, nullptr) !=
        WEFT_ERR_INVALID_ARGUMENT)
      return "gather with a NULL recvbuf on the root was not refused";
    std::vector<size_t> c(n, 1), d(n, 0);
    if (weft_alltoallv(out.data(), c.data(), d.data(), out.data(), c.data(), d.data(), WEFT_FLOAT32,
                       comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
        std::string(weft_get_last_error(comm)).find("overlap") == std::string::npos)
      return "alltoallv in place was not refused naming the overlap";
    if (weft_alltoallv(buf.data(), nullptr, d.data(), out.data(), c.data(), d.data(), WEFT_FLOAT32,
                       comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT)
      return "alltoallv with NULL sendcounts was not refused";
    if (!untouched()) return "a refused call wrote the output buffer";
    // The comm still works after the refusals (no half-recorded group).
    return alltoallv(comm, rank, n);
  }) == "");
}

TEST_CASE("config: a per-comm timeout, and weft_comm_set_timeout between calls", "[config]") {
  weft_unique_id_t id;
  REQUIRE(weft_get_unique_id(&id) == WEFT_SUCCESS);
  weft_config_t bad = WEFT_CONFIG_INITIALIZER;
  bad.timeout_s = -1;
  weft_comm_t comm = nullptr;
  CHECK(weft_comm_init_rank_config(&comm, 1, id, 0, &bad) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(nullptr)).find("timeout_s") != std::string::npos);
  weft_config_t zero{};
  CHECK(weft_comm_init_rank_config(&comm, 1, id, 0, &zero) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(nullptr)).find("WEFT_CONFIG_INITIALIZER") !=
        std::string::npos);

  // Two ranks with a 1 s timeout: rank 1 never joins the allreduce, rank 0
  // fails in about a second instead of WEFT_TIMEOUT_S (300 by default).
  REQUIRE(weft_get_unique_id(&id) == WEFT_SUCCESS);
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.timeout_s = 1.0;
  std::vector<weft_comm_t> comms(2, nullptr);
  std::vector<weft_result_t> init(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] { init[r] = weft_comm_init_rank_config(&comms[r], 2, id, r, &cfg); });
  for (auto& t : ts) t.join();
  REQUIRE(init[0] == WEFT_SUCCESS);
  REQUIRE(init[1] == WEFT_SUCCESS);
  float x = 1;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comms[0], nullptr) == WEFT_ERR_TIMEOUT);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took < 30);
  CHECK(std::string(weft_get_last_error(comms[0])).find("rank 1") != std::string::npos);
  for (weft_comm_t c : comms) weft_comm_abort(c);

  // Without a config (300 s), then weft_comm_set_timeout(0.5) on rank 0.
  REQUIRE(weft_get_unique_id(&id) == WEFT_SUCCESS);
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] { init[r] = weft_comm_init_rank_config(&comms[r], 2, id, r, nullptr); });
  for (auto& t : ts) t.join();
  REQUIRE(init[0] == WEFT_SUCCESS);
  REQUIRE(init[1] == WEFT_SUCCESS);
  CHECK(weft_comm_set_timeout(comms[0], 0) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_comm_set_timeout(comms[0], 0.5) == WEFT_SUCCESS);
  t0 = std::chrono::steady_clock::now();
  CHECK(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comms[0], nullptr) == WEFT_ERR_TIMEOUT);
  took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took < 30);
  for (weft_comm_t c : comms) weft_comm_abort(c);
}
