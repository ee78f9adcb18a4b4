// The shm arena (transports/shm/arena.h, src/exec/arena_op.h): what the
// collective matrix does not reach — rounds much smaller than the messages,
// parts that do not divide evenly, mixed blocking and nonblocking calls,
// mismatched calls, and a peer that stops.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "coll/check.h"

using namespace wtest;

TEST_CASE("arena: rounds of 4 KiB - every collective over many rounds (processes)",
          "[coll][arena][processes]") {
  // 4 KiB rounds split over 3 ranks: parts are 22 or 21 cache lines, the last
  // round is partial, and reduce_scatter / alltoall pieces are 1344 bytes.
  for (int n : {2, 3, 5}) {
    INFO("n=" << n);
    std::string err = runProcesses(
        n,
        [](weft_comm_t c, int r, int n) {
          for (Coll coll : kAllColls)
            for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_FLOAT16, WEFT_INT8, WEFT_FLOAT64})
              for (size_t count : {size_t(1), size_t(1000), size_t(7777)})
                for (bool ip : {false, true}) {
                  std::string e = runAndCheck(c, r, n, coll, dt, WEFT_SUM, count, ip, n - 1);
                  if (!e.empty()) return e;
                }
          return std::string();
        },
        {"WEFT_SHM_ARENA_CHUNK=4096", "WEFT_TRANSPORTS=shm"});
    REQUIRE(err == "");
  }
}

TEST_CASE("arena: AVG and PROD over many rounds - threads", "[coll][arena][threads]") {
  ScopedEnv chunk("WEFT_SHM_ARENA_CHUNK", "8K");
  std::string err = runThreads(4, [](weft_comm_t c, int r, int n) {
    for (weft_op_t op : {WEFT_AVG, WEFT_PROD, WEFT_MAX})
      for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter})
        for (size_t count : {size_t(3), size_t(5000)}) {
          std::string e = runAndCheck(c, r, n, coll, WEFT_INT32, op, count, false, 2);
          if (!e.empty()) return e;
        }
    return std::string();
  });
  REQUIRE(err == "");
}

TEST_CASE("arena: more than 16 ranks - one-shot and staged rounds", "[coll][arena][threads]") {
  // Above 16 ranks the one-shot reduction takes its source list from the
  // heap (ArenaOp::act).
  std::string err = runThreads(17, [](weft_comm_t c, int r, int n) {
    for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast})
      for (size_t count : {size_t(2), size_t(300)})
        for (bool ip : {false, true}) {
          std::string e = runAndCheck(c, r, n, coll, WEFT_FLOAT32, WEFT_SUM, count, ip, 16);
          if (!e.empty()) return e;
        }
    return std::string();
  });
  REQUIRE(err == "");
}

TEST_CASE("arena: nonblocking groups and blocking calls interleave in order", "[coll][arena][async]") {
  std::string err = runThreads(3, [](weft_comm_t c, int r, int n) -> std::string {
    std::vector<float> a(3000, static_cast<float>(r + 1)), b(3000, 0.0f), x(10, 1.0f);
    weft_request_t req = nullptr;
    TRY_WEFT(weft_group_start());
    TRY_WEFT(weft_allreduce(a.data(), b.data(), a.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr));
    TRY_WEFT(weft_broadcast(a.data(), a.data(), a.size(), WEFT_FLOAT32, 1, c, nullptr));
    TRY_WEFT(weft_group_end_async(&req));
    // Issued after the group: runs after it, through the engine.
    TRY_WEFT(weft_allreduce(x.data(), x.data(), x.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr));
    TRY_WEFT(weft_wait(req));
    weft_request_free(req);
    const float sum = n * (n + 1) / 2.0f;
    for (float v : b)
      if (v != sum) return "allreduce in the group: " + std::to_string(v);
    for (float v : a)
      if (v != 2.0f) return "broadcast in the group: " + std::to_string(v);
    for (float v : x)
      if (v != static_cast<float>(n)) return "allreduce after the group: " + std::to_string(v);
    return "";
  });
  REQUIRE(err == "");
}

TEST_CASE("arena: mismatched collectives name both calls on every rank", "[coll][arena][mismatch]") {
  ScopedEnv t("WEFT_TIMEOUT_S", "10");
  std::string out = runThreads(2, [](weft_comm_t c, int r, int) -> std::string {
    std::vector<int32_t> v(1000, 1);
    weft_result_t res = r == 0
        ? weft_allreduce(v.data(), v.data(), 1000, WEFT_INT32, WEFT_SUM, c, nullptr)
        : weft_broadcast(v.data(), v.data(), 1000, WEFT_INT32, 0, c, nullptr);
    std::string msg = weft_get_last_error(c);
    if (res != WEFT_ERR_INVALID_USAGE)
      return "expected INVALID_USAGE, got " + std::string(weft_get_error_string(res)) + ": " + msg;
    if (msg.find("allreduce") == std::string::npos || msg.find("broadcast") == std::string::npos)
      return "does not name both calls: " + msg;
    return "#ok";
  });
  INFO(out);
  CHECK(out.find("rank 0: #ok") != std::string::npos);
  CHECK(out.find("rank 1: #ok") != std::string::npos);
}

TEST_CASE("arena: different counts are a mismatch too", "[coll][arena][mismatch]") {
  std::string out = runThreads(3, [](weft_comm_t c, int r, int) -> std::string {
    std::vector<float> v(100, 1.0f);
    weft_result_t res =
        weft_allreduce(v.data(), v.data(), r == 2 ? 99 : 100, WEFT_FLOAT32, WEFT_SUM, c, nullptr);
    std::string msg = weft_get_last_error(c);
    if (res != WEFT_ERR_INVALID_USAGE) return "expected INVALID_USAGE: " + msg;
    if (msg.find("99 x float") == std::string::npos) return "does not show the count: " + msg;
    return "#ok";
  });
  INFO(out);
  CHECK(out.find("rank 0: #ok") != std::string::npos);
  CHECK(out.find("rank 2: #ok") != std::string::npos);
}

TEST_CASE("arena: tiny allreduces (data in the flag's line) check counts too",
          "[coll][arena][mismatch]") {
  // 8 and 12 bytes both take the inline mode (ArenaPlan::Mode::Inline).
  std::string out = runThreads(3, [](weft_comm_t c, int r, int) -> std::string {
    float v[3] = {1, 2, 3}, before[3] = {1, 2, 3};
    weft_result_t res = weft_allreduce(v, v, r == 1 ? 3 : 2, WEFT_FLOAT32, WEFT_SUM, c, nullptr);
    std::string msg = weft_get_last_error(c);
    if (res != WEFT_ERR_INVALID_USAGE) return "expected INVALID_USAGE: " + msg;
    if (msg.find("3 x float") == std::string::npos) return "does not show the count: " + msg;
    if (memcmp(v, before, sizeof v) != 0) return "the buffer changed";
    return "#ok";
  });
  INFO(out);
  for (int r = 0; r < 3; ++r)
    CHECK(out.find("rank " + std::to_string(r) + ": #ok") != std::string::npos);
}

TEST_CASE("arena: a rank that stops calling times out naming it", "[coll][arena][timeout]") {
  ScopedEnv t("WEFT_TIMEOUT_S", "2");
  std::string out = runThreads(3, [](weft_comm_t c, int r, int) -> std::string {
    float x = 1;
    TRY_WEFT(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr));
    if (r == 1) return "#idle";  // never calls the second allreduce
    auto t0 = std::chrono::steady_clock::now();
    weft_result_t res = weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string msg = weft_get_last_error(c);
    if (res != WEFT_ERR_TIMEOUT) return "expected TIMEOUT: " + msg;
    if (msg.find("rank 1") == std::string::npos) return "does not name rank 1: " + msg;
    if (secs > 8) return "took " + std::to_string(secs) + " s";
    return "#ok";
  });
  INFO(out);
  CHECK(out.find("rank 0: #ok") != std::string::npos);
  CHECK(out.find("rank 2: #ok") != std::string::npos);
}

TEST_CASE("arena: single-copy broadcast - allgather and alltoall - processes and threads",
          "[coll][arena][direct][processes]") {
  // WEFT_SHM_DIRECT_MIN=1: every broadcast and allgather reads the owners'
  // buffers in place (process_vm_readv between processes, memcpy between
  // threads), in place or not, from every root, odd sizes included.
  auto body = [](weft_comm_t c, int r, int n) {
    for (Coll coll : {Coll::Broadcast, Coll::AllGather, Coll::AllToAll})
      for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_INT8})
        // Outputs under half a chunk, between (staged), and from 4 chunks.
        for (size_t count : {size_t(1), size_t(1001), size_t(300007), size_t(1100007)})
          for (bool ip : {false, true})
            for (int root = 0; root < n; ++root) {
              std::string e = runAndCheck(c, r, n, coll, dt, WEFT_SUM, count, ip, root);
              if (!e.empty()) return e;
            }
    return std::string();
  };
  char dir[] = "/tmp/weft-direct-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string log = std::string(dir) + "/log";
  for (int n : {2, 3}) {
    INFO("processes, n=" << n);
    std::string err = runProcesses(
        n, body,
        {"WEFT_SHM_DIRECT_MIN=1", "WEFT_TRANSPORTS=shm", "WEFT_DEBUG=INFO",
         "WEFT_DEBUG_SUBSYS=TRANSPORT", "WEFT_DEBUG_FILE=" + log});
    REQUIRE(err == "");
  }
  // The mode really was on (rank 0 says so at init).
  std::ifstream f(log);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text.find("single-copy broadcast/allgather from 1 bytes") != std::string::npos);
  std::remove(log.c_str());
  rmdir(dir);
  ScopedEnv direct("WEFT_SHM_DIRECT_MIN", "1");
  REQUIRE(runThreads(3, body) == "");
}

TEST_CASE("arena: back-to-back small broadcasts pipeline through the root's ring, mixed with other calls",
          "[coll][arena][ring]") {
  // The root runs up to 64 broadcasts ahead of its readers: every reader
  // must still see each broadcast's own data, whoever the root is, with
  // other collectives (which use the parity buffers) in between.
  auto body = [](weft_comm_t c, int r, int n) -> std::string {
    std::vector<uint8_t> buf(4096);
    for (int i = 0; i < 3000; ++i) {
      // Runs of 100 from one root (more than the ring's 64 slots), then the
      // next; readers dawdle now and then so that the root gets far ahead.
      const int root = (i / 100) % n;
      if (r != root && i % 50 == 7) usleep(300);
      const size_t len = 1 + static_cast<size_t>(i * 37) % 4000;
      if (r == root)
        for (size_t k = 0; k < len; ++k) buf[k] = static_cast<uint8_t>(i * 7 + k);
      else
        std::fill(buf.begin(), buf.end(), 0xee);
      TRY_WEFT(weft_broadcast(buf.data(), buf.data(), len, WEFT_UINT8, root, c, nullptr));
      for (size_t k = 0; k < len; ++k)
        if (buf[k] != static_cast<uint8_t>(i * 7 + k))
          return "broadcast " + std::to_string(i) + " from rank " + std::to_string(root) +
                 ": byte " + std::to_string(k) + " is " + std::to_string(buf[k]);
      if (i % 97 == 0) {
        float x = static_cast<float>(r + i);
        TRY_WEFT(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr));
        const float want = static_cast<float>(n * i + n * (n - 1) / 2);
        if (x != want) return "allreduce after broadcast " + std::to_string(i) + " gave " + std::to_string(x);
      }
    }
    return std::string();
  };
  for (int n : {2, 3, 4}) {
    INFO("processes, n=" << n);
    REQUIRE(runProcesses(n, body, {"WEFT_TRANSPORTS=shm"}) == "");
  }
  INFO("threads, n=3");
  REQUIRE(runThreads(3, body) == "");
}

TEST_CASE("arena: a ring broadcast with a different count is a mismatch", "[coll][arena][ring][mismatch]") {
  std::string out = runThreads(3, [](weft_comm_t c, int r, int) -> std::string {
    std::vector<float> v(100, 1.0f);
    // Rank 0, the root, runs a few broadcasts ahead first.
    for (int i = 0; i < 5; ++i) TRY_WEFT(weft_broadcast(v.data(), v.data(), 100, WEFT_FLOAT32, 0, c, nullptr));
    weft_result_t res =
        weft_broadcast(v.data(), v.data(), r == 2 ? 99 : 100, WEFT_FLOAT32, 0, c, nullptr);
    std::string msg = weft_get_last_error(c);
    // The root does not wait, and a reader compares its call with the
    // root's: rank 1, which agrees with the root, completes; rank 2 fails
    // naming both counts.
    if (r < 2) return res == WEFT_SUCCESS ? "#done" : "unexpected failure: " + msg;
    if (res != WEFT_ERR_INVALID_USAGE) return "expected INVALID_USAGE: " + msg;
    if (msg.find("99 x float") == std::string::npos || msg.find("100 x float") == std::string::npos)
      return "does not show both counts: " + msg;
    return "#ok";
  });
  INFO(out);
  CHECK(out.find("rank 0: #done") != std::string::npos);
  CHECK(out.find("rank 1: #done") != std::string::npos);
  CHECK(out.find("rank 2: #ok") != std::string::npos);
}
