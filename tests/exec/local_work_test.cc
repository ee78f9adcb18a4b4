// Local steps that finish later (exec/local_work.h), on the CPU: the async
// host backend runs every reduce, copy and divide of a schedule on a worker
// thread after a delay, as a GPU backend runs them on a stream, and the
// collectives must still be right: dependencies, scratch reuse, chunk
// pipelining, several ops in flight, timeouts and teardown. Links weft's
// layers (not libweft.so) to read the process-wide counters.
#include "exec/local_work.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coll/check.h"

using namespace wtest;

namespace {

// The local-step counters of this process.
uint64_t steps() { return weft::localWorkCounters().steps.load(); }
uint64_t overlapped() { return weft::localWorkCounters().overlapped.load(); }

// Sets env for threads (ScopedEnv each), or passes it to processes.
std::string runWith(int n, bool processes, const std::vector<std::string>& env, const Body& body) {
  if (processes) return runProcesses(n, body, env);
  std::vector<std::unique_ptr<ScopedEnv>> set;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    set.emplace_back(new ScopedEnv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str()));
  }
  return runThreads(n, body);
}

// Every collective the algorithm implements, a few types, ops and counts
// (9000 elements over 4 KiB chunks: several chunks per step), in and out of
// place; then checks that this process ran local steps through the backend.
std::string matrix(weft_comm_t c, int r, int n, const std::vector<Coll>& colls) {
  const uint64_t before = steps();
  for (Coll coll : colls) {
    const bool reduces =
        coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
    for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT8})
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_MIN}) {
        if (!reduces && op != WEFT_SUM) continue;
        for (size_t count : {size_t(0), size_t(13), size_t(9000)})
          for (bool ip : {false, true}) {
            std::string e = runAndCheck(c, r, n, coll, dt, op, count, ip, n - 1);
            if (!e.empty()) return e;
          }
      }
  }
  // The root (n - 1) of a reduce reduces whatever the algorithm.
  if (r == n - 1 && n > 1 && steps() == before)
    return "no local step ran through the async backend";
  return "";
}

struct AlgoColls {
  const char* algo;
  std::vector<Coll> colls;
};
const AlgoColls kAlgos[] = {
    {"ring", {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather}},
    {"hd", {Coll::AllReduce, Coll::ReduceScatter}},
    {"rd", {Coll::AllReduce, Coll::AllGather}},
    {"dbt", {Coll::AllReduce}},
    {"direct", {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllToAll}},
    {"chain", {Coll::Broadcast, Coll::Reduce}},
    {"binomial", {Coll::Broadcast, Coll::Reduce}},
};

void runAlgos(int n, bool processes, const std::vector<std::string>& transport, long delayUs) {
  for (const AlgoColls& a : kAlgos) {
    std::vector<std::string> env = transport;
    env.push_back(std::string("WEFT_ALGO=") + a.algo);
    env.push_back("WEFT_CHUNK_BYTES=4K");
    env.push_back("WEFT_TEST_ASYNC_LOCAL_US=" + std::to_string(delayUs));
    const std::vector<Coll> colls = a.colls;
    std::string err = runWith(n, processes, env, [&colls](weft_comm_t c, int r, int n) {
      return matrix(c, r, n, colls);
    });
    INFO(a.algo << " n=" << n << (processes ? " processes " : " threads ") << transport[0]
                << " delay " << delayUs << " us");
    REQUIRE(err == "");
  }
}

}  // namespace

TEST_CASE("local work: the async host backend finishes in order, later", "[local-work]") {
  auto lw = weft::makeAsyncHostLocalWork(20000);  // 20 ms per job
  std::vector<float> a(1000, 1.5f), b(1000, 2.0f), dst(1000, 0.0f), cp(1000, 0.0f);
  uint64_t t1 = 0, t2 = 0, t3 = 0;
  REQUIRE(lw->submitReduce(dst.data(), a.data(), b.data(), a.size(), WEFT_FLOAT32, WEFT_SUM, &t1)
              .isOk());
  REQUIRE(lw->submitCopy(cp.data(), dst.data(), cp.size() * 4, &t2).isOk());
  REQUIRE(lw->submitDivide(cp.data(), cp.size(), WEFT_FLOAT32, 2, &t3).isOk());
  CHECK(t1 < t2);
  CHECK(t2 < t3);
  bool done = true;
  REQUIRE(lw->done(t1, &done).isOk());
  CHECK_FALSE(done);  // submitted, not run: the delay has not passed
  CHECK(lw->drain(10));
  REQUIRE(lw->done(t3, &done).isOk());
  CHECK(done);
  CHECK(dst[999] == 3.5f);
  CHECK(cp[0] == 1.75f);  // copied after the reduce, divided after the copy
  // drain is bounded: a job that takes longer than the limit says so.
  auto slow = weft::makeAsyncHostLocalWork(500000);
  uint64_t t = 0;
  REQUIRE(slow->submitCopy(cp.data(), a.data(), 4, &t).isOk());
  CHECK_FALSE(slow->drain(0.01));
  CHECK(slow->drain(10));
}

TEST_CASE("local work: async local steps - every algorithm, 4 threads over shm FIFOs",
          "[local-work][threads]") {
  const uint64_t before = steps();
  runAlgos(4, false, {"WEFT_TRANSPORTS=shm"}, 0);
  CHECK(steps() > before);
}

TEST_CASE("local work: async local steps, 200 us each - every algorithm, 3 threads over tcp",
          "[local-work][threads][tcp]") {
  runAlgos(3, false, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"}, 200);
}

TEST_CASE("local work: async local steps - every algorithm, 3 processes over shm FIFOs",
          "[local-work][processes]") {
  runAlgos(3, true, {"WEFT_TRANSPORTS=shm"}, 0);
}

TEST_CASE("local work: async local steps - every algorithm, 4 processes over tcp",
          "[local-work][processes][tcp]") {
  runAlgos(4, true, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"}, 50);
}

TEST_CASE("local work: many ops in flight at once (async requests) with async local steps",
          "[local-work][threads]") {
  wtest::ScopedEnv a("WEFT_TEST_ASYNC_LOCAL_US", "100");
  wtest::ScopedEnv c("WEFT_CHUNK_BYTES", "4K");
  wtest::ScopedEnv t("WEFT_TRANSPORTS", "shm");
  std::string err = runThreads(3, [](weft_comm_t comm, int r, int n) -> std::string {
    // 8 allreduces in one async group: their steps interleave in the engine.
    const size_t count = 5000;
    std::vector<std::vector<float>> bufs(8, std::vector<float>(count));
    for (int k = 0; k < 8; ++k)
      for (size_t i = 0; i < count; ++i) bufs[k][i] = static_cast<float>(r + k + (i % 7));
    TRY_WEFT(weft_group_start());
    for (int k = 0; k < 8; ++k)
      TRY_WEFT(weft_allreduce(bufs[k].data(), bufs[k].data(), count, WEFT_FLOAT32, WEFT_SUM, comm,
                              nullptr));
    weft_request_t req = nullptr;
    TRY_WEFT(weft_group_end_async(&req));
    TRY_WEFT(weft_wait(req));
    TRY_WEFT(weft_request_free(req));
    for (int k = 0; k < 8; ++k)
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(n * (n - 1) / 2 + n * (k + static_cast<int>(i % 7)));
        if (bufs[k][i] != want)
          return "op " + std::to_string(k) + " element " + std::to_string(i) + ": " +
                 std::to_string(bufs[k][i]) + " != " + std::to_string(want);
      }
    return std::string();
  });
  REQUIRE(err == "");
}

// The pipeline: over tcp, a ring allreduce of many chunks reduces chunk i
// (on the worker thread) while other chunks are on the wire. The counter
// says how many local steps were still running while a transfer of another
// chunk was posted and not complete; a backend that ran steps at once, or
// an engine that waited for each step before posting more, would count 0.
TEST_CASE("local work: reductions overlap transfers of other chunks (ring over tcp)",
          "[local-work][processes][tcp][overlap]") {
  std::string err = runProcesses(
      3,
      [](weft_comm_t c, int r, int n) -> std::string {
        const uint64_t s0 = steps(), o0 = overlapped();
        std::string e =
            runAndCheck(c, r, n, Coll::AllReduce, WEFT_FLOAT32, WEFT_SUM, 1u << 20, false, 0);
        if (!e.empty()) return e;
        const uint64_t s = steps() - s0, o = overlapped() - o0;
        if (s == 0) return "no local step ran through the backend";
        if (o == 0) return "no local step overlapped a transfer (" + std::to_string(s) + " steps)";
        if (o > s) return "more overlapped steps than steps";
        return std::string();
      },
      {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_ALGO=ring", "WEFT_CHUNK_BYTES=64K",
       "WEFT_TEST_ASYNC_LOCAL_US=100"});
  REQUIRE(err == "");
}

// A rank that never joins: the others fail naming a peer (a timeout, or the
// other survivor's exit), with local work in flight or done, and abort
// without touching freed memory.
TEST_CASE("local work: a missing rank times out, no hang, with async local steps",
          "[local-work][processes][failure]") {
  std::string out = runProcesses(
      3,
      [](weft_comm_t c, int r, int) -> std::string {
        if (r == 2) {
          std::this_thread::sleep_for(std::chrono::seconds(5));
          weft_comm_abort(c);
          return "#slept";
        }
        std::vector<float> buf(200000, 1.0f);
        weft_result_t res =
            weft_allreduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr);
        const std::string why = weft_get_last_error(c);
        weft_comm_abort(c);
        // The first to time out aborts and exits: the other may see that first.
        if (res != WEFT_ERR_TIMEOUT && res != WEFT_ERR_REMOTE)
          return std::string("expected TIMEOUT or REMOTE, got ") + weft_get_error_string(res) +
                 ": " + why;
        if (why.find("rank 2") == std::string::npos &&
            why.find("rank " + std::to_string(1 - r)) == std::string::npos)
          return "the error names no peer: " + why;
        return "#ok";
      },
      {"WEFT_TRANSPORTS=shm", "WEFT_ALGO=ring", "WEFT_CHUNK_BYTES=16K", "WEFT_TIMEOUT_S=2",
       "WEFT_TEST_ASYNC_LOCAL_US=50"},
      60);
  INFO(out);
  CHECK(out.find("rank 0: #ok") != std::string::npos);
  CHECK(out.find("rank 1: #ok") != std::string::npos);
}
