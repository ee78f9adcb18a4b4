// Tensor fusion through the C API's edges: the config field (and configs
// of the older size), errors in and around fused groups, and groups in
// flight together (weft_group_end_async). Threads of one process.
#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "coll/harness.h"

namespace {

// Ranks as threads, each joining with weft_comm_init_rank_config(cfg).
std::string runWithConfig(int n, const weft_config_t& cfg, const wtest::Body& body) {
  weft_unique_id_t id;
  weft_result_t r = weft_get_unique_id(&id);
  if (r != WEFT_SUCCESS) return "weft_get_unique_id: " + wtest::describe(r, nullptr);
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      weft_comm_t comm = nullptr;
      weft_result_t rr = weft_comm_init_rank_config(&comm, n, id, i, &cfg);
      if (rr != WEFT_SUCCESS) {
        errs[i] = "init: " + wtest::describe(rr, nullptr);
        return;
      }
      errs[i] = body(comm, i, n);
      weft_result_t d = weft_comm_destroy(comm);
      if (d != WEFT_SUCCESS && errs[i].empty()) errs[i] = "destroy: " + wtest::describe(d, nullptr);
    });
  for (auto& t : ts) t.join();
  std::string all;
  for (int i = 0; i < n; ++i)
    if (!errs[i].empty()) all += "rank " + std::to_string(i) + ": " + errs[i] + "\n";
  return all;
}

// A group of `calls` int32 sums of 100 elements; checks the results.
std::string smallGroup(weft_comm_t comm, int rank, int n, int calls) {
  std::vector<std::vector<int32_t>> b(calls, std::vector<int32_t>(100));
  for (int k = 0; k < calls; ++k)
    for (int i = 0; i < 100; ++i) b[k][i] = rank * k + i;
  TRY_WEFT(weft_group_start());
  for (auto& v : b)
    TRY_WEFT(weft_allreduce(v.data(), v.data(), 100, WEFT_INT32, WEFT_SUM, comm, nullptr));
  TRY_WEFT(weft_group_end());
  for (int k = 0; k < calls; ++k)
    for (int i = 0; i < 100; ++i)
      if (b[k][i] != k * n * (n - 1) / 2 + n * i) return "call " + std::to_string(k) + " differs";
  return "";
}

// The fused ops of rank r's timeline (WEFT_TIMELINE in `dir`).
int fusedOps(const std::string& dir, int r) {
  const std::string all = wtest::catFiles(dir + "/tl-" + std::to_string(r) + ".json");
  int k = 0;
  for (size_t at = all.find("\"fused_calls\":"); at != std::string::npos;
       at = all.find("\"fused_calls\":", at + 1))
    ++k;
  return k;
}

struct TimelineDir {
  std::string dir;
  wtest::ScopedEnv env;
  static std::string make() {
    char t[] = "/tmp/weft-fusion-api-XXXXXX";
    return mkdtemp(t) ? t : "/tmp";
  }
  TimelineDir() : dir(make()), env("WEFT_TIMELINE", (dir + "/tl-%r.json").c_str()) {}
  ~TimelineDir() { wtest::removeTree(dir); }
};

}  // namespace

TEST_CASE("fusion config: WEFT_FUSION_OFF turns fusion off whatever the environment says",
          "[coll][fusion]") {
  TimelineDir tl;
  wtest::ScopedEnv e("WEFT_FUSION_THRESHOLD", "64K");
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.fusion_threshold = WEFT_FUSION_OFF;
  CHECK(runWithConfig(2, cfg,
                      [](weft_comm_t c, int r, int n) { return smallGroup(c, r, n, 30); }) == "");
  CHECK(fusedOps(tl.dir, 0) == 0);
  CHECK(fusedOps(tl.dir, 1) == 0);
}

TEST_CASE("fusion config: a threshold in the config overrides WEFT_FUSION_THRESHOLD=0",
          "[coll][fusion]") {
  TimelineDir tl;
  wtest::ScopedEnv e("WEFT_FUSION_THRESHOLD", "0");
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.fusion_threshold = 4000;  // 10 calls of 400 bytes per fused op: 3 ops for 30 calls
  CHECK(runWithConfig(2, cfg,
                      [](weft_comm_t c, int r, int n) { return smallGroup(c, r, n, 30); }) == "");
  CHECK(fusedOps(tl.dir, 0) == 3);
  CHECK(fusedOps(tl.dir, 1) == 3);
}

TEST_CASE("fusion config: a config of the older size is accepted and takes the environment",
          "[coll][fusion]") {
  TimelineDir tl;
  wtest::ScopedEnv e("WEFT_FUSION_THRESHOLD", "0");
  weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
  cfg.size = offsetof(weft_config_t, fusion_threshold);  // built before the field existed
  cfg.fusion_threshold = 4000;                           // not read: past its size
  CHECK(runWithConfig(2, cfg,
                      [](weft_comm_t c, int r, int n) { return smallGroup(c, r, n, 30); }) == "");
  CHECK(fusedOps(tl.dir, 0) == 0);
}

TEST_CASE("fusion errors: a bad call in the group issues nothing and writes no buffer",
          "[coll][fusion][errors]") {
  const std::string err = wtest::runThreads(2, [](weft_comm_t comm, int rank, int n) {
    std::vector<std::vector<int32_t>> send(20, std::vector<int32_t>(50, 1)),
        recv(20, std::vector<int32_t>(50, -5));
    TRY_WEFT(weft_group_start());
    for (int k = 0; k < 20; ++k) {
      const auto dt = k == 13 ? static_cast<weft_datatype_t>(99) : WEFT_INT32;
      weft_result_t r =
          weft_allreduce(send[k].data(), recv[k].data(), 50, dt, WEFT_SUM, comm, nullptr);
      if ((r == WEFT_SUCCESS) != (k != 13))
        return "call " + std::to_string(k) + ": " + std::to_string(r);
    }
    weft_result_t r = weft_group_end();
    if (r != WEFT_ERR_INVALID_ARGUMENT) return "group_end gave " + std::to_string(r);
    const std::string msg = weft_get_last_error(nullptr);
    if (msg.find("datatype 99") == std::string::npos) return "message: " + msg;
    for (auto& v : recv)
      for (int32_t x : v)
        if (x != -5) return std::string("a recvbuf was written");
    // The comm is fine: the next fused group works.
    return smallGroup(comm, rank, n, 40);
  });
  CHECK(err == "");
}

TEST_CASE("fusion errors: a peer running another collective fails the fused op on every rank",
          "[coll][fusion][errors]") {
  wtest::ScopedEnv t("WEFT_TIMEOUT_S", "3");
  const std::string err = wtest::runThreads(2, [](weft_comm_t comm, int rank, int) {
    std::vector<std::vector<int32_t>> b(20, std::vector<int32_t>(100, 3)),
        out(20, std::vector<int32_t>(100, -5));
    std::vector<int32_t> whole(2000, 1);
    TRY_WEFT(weft_group_start());
    if (rank == 0) {
      for (int k = 0; k < 20; ++k)
        TRY_WEFT(
            weft_allreduce(b[k].data(), out[k].data(), 100, WEFT_INT32, WEFT_SUM, comm, nullptr));
    } else {
      TRY_WEFT(weft_broadcast(whole.data(), whole.data(), 2000, WEFT_INT32, 0, comm, nullptr));
    }
    if (weft_group_end() == WEFT_SUCCESS) return std::string("mismatch not detected");
    // A failed fused op writes no recvbuf.
    for (auto& v : out)
      for (int32_t x : v)
        if (x != -5) return std::string("a recvbuf was written");
    return std::string();
  });
  INFO(err);
  CHECK(err.find("mismatch not detected") == std::string::npos);
  CHECK(err.find("recvbuf was written") == std::string::npos);
}

TEST_CASE("fusion: nonblocking groups in flight together each get their own buffers",
          "[coll][fusion]") {
  const std::string err = wtest::runThreads(3, [](weft_comm_t comm, int rank, int n) {
    const int groups = 4, calls = 25, count = 64;
    std::vector<std::vector<float>> b(groups * calls, std::vector<float>(count));
    std::vector<weft_request_t> reqs(groups);
    for (int g = 0; g < groups; ++g) {
      TRY_WEFT(weft_group_start());
      for (int k = 0; k < calls; ++k) {
        auto& v = b[g * calls + k];
        for (int i = 0; i < count; ++i) v[i] = static_cast<float>(rank + g * 100 + k + i);
        TRY_WEFT(weft_allreduce(v.data(), v.data(), count, WEFT_FLOAT32, WEFT_SUM, comm, nullptr));
      }
      TRY_WEFT(weft_group_end_async(&reqs[g]));
    }
    for (int g = groups - 1; g >= 0; --g) TRY_WEFT(weft_request_free(reqs[g]));
    for (int g = 0; g < groups; ++g)
      for (int k = 0; k < calls; ++k)
        for (int i = 0; i < count; ++i) {
          const float want = static_cast<float>(n * (n - 1) / 2 + n * (g * 100 + k + i));
          if (b[g * calls + k][i] != want)
            return "group " + std::to_string(g) + " call " + std::to_string(k) + " differs";
        }
    return std::string();
  });
  CHECK(err == "");
}
