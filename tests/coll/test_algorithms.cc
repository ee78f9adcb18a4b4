// Every schedule algorithm, forced with WEFT_ALGO, over each message
// transport (shm FIFOs and tcp), ranks as processes and as threads. The
// algorithm that ran is read back from the TRACE log, so a fallback to the
// default cannot pass unnoticed. (The simulator in tests/algo covers every
// rank count 1..33 without transports; the arena has its own tests.)
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "coll/check.h"

using namespace wtest;

namespace {

// Mirrors the support table of src/algo/schedule.cc (docs/algorithms.md).
struct AlgoCase {
  const char* name;
  std::vector<Coll> colls;
  bool barrier;
};
const AlgoCase kAlgoCases[] = {
    {"ring", {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather}, false},
    {"rd", {Coll::AllReduce, Coll::AllGather}, false},
    {"hd", {Coll::AllReduce, Coll::ReduceScatter}, false},
    {"dbt", {Coll::AllReduce}, false},
    {"direct",
     {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce,
      Coll::AllToAll},
     false},
    {"chain", {Coll::Broadcast, Coll::Reduce}, false},
    {"binomial", {Coll::Broadcast, Coll::Reduce}, false},
    {"bruck", {Coll::AllGather}, false},
    {"pairwise", {Coll::AllToAll}, false},
    {"dissemination", {}, true},
};

std::string body(const AlgoCase& a, weft_comm_t c, int r, int n) {
  for (Coll coll : a.colls) {
    const bool reduces =
        coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
    for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_INT8})
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG, WEFT_MAX}) {
        if (!reduces && op != WEFT_SUM) continue;
        // 9000 elements with 4 KiB chunks: several pipelined chunks per step.
        for (size_t count : {size_t(1), size_t(13), size_t(9000)})
          for (bool ip : {false, true}) {
            std::string e = runAndCheck(c, r, n, coll, dt, op, count, ip, n - 1);
            if (!e.empty()) return std::string(a.name) + ": " + e;
          }
      }
  }
  if (a.barrier)
    for (int i = 0; i < 3; ++i) TRY_WEFT(weft_barrier(c, nullptr));
  return "";
}

// Runs `a` on n ranks with the given transport settings; checks results and
// that the log shows the algorithm.
void runAlgo(const AlgoCase& a, int n, bool processes, const std::vector<std::string>& transport) {
  char tmpl[] = "/tmp/weft-algo-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  std::vector<std::string> env = transport;
  env.push_back(std::string("WEFT_ALGO=") + a.name);
  env.push_back("WEFT_CHUNK_BYTES=4K");
  env.push_back("WEFT_DEBUG=TRACE");
  env.push_back("WEFT_DEBUG_SUBSYS=COLL");
  env.push_back("WEFT_DEBUG_FILE=" + dir + "/log-%p");
  auto fn = [&a](weft_comm_t c, int r, int n) { return body(a, c, r, n); };
  std::string err;
  if (processes) {
    err = runProcesses(n, fn, env);
  } else {
    std::vector<std::unique_ptr<ScopedEnv>> set;
    for (const std::string& kv : env) {
      size_t eq = kv.find('=');
      set.emplace_back(new ScopedEnv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str()));
    }
    err = runThreads(n, fn);
  }
  std::string log = catFiles(dir + "/log-*");
  wtest::removeTree(dir);
  INFO(a.name << " n=" << n << (processes ? " processes " : " threads ") << transport[0]);
  REQUIRE(err == "");
  CHECK(log.find(std::string("algorithm ") + a.name + ",") != std::string::npos);
}

}  // namespace

TEST_CASE("algorithms: each one forced over shm FIFOs - processes",
          "[coll][algo][shm][processes]") {
  for (const AlgoCase& a : kAlgoCases) runAlgo(a, 3, true, {"WEFT_TRANSPORTS=shm"});
}

TEST_CASE("algorithms: each one forced over tcp - processes", "[coll][algo][tcp][processes]") {
  for (const AlgoCase& a : kAlgoCases)
    runAlgo(a, 3, true, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"});
}

TEST_CASE("algorithms: each one forced over shm FIFOs - 5 threads", "[coll][algo][threads]") {
  for (const AlgoCase& a : kAlgoCases) runAlgo(a, 5, false, {"WEFT_TRANSPORTS=shm"});
}

TEST_CASE("algorithms: each one forced over tcp - 4 threads", "[coll][algo][threads][tcp]") {
  for (const AlgoCase& a : kAlgoCases)
    runAlgo(a, 4, false, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"});
}

#ifdef WEFT_HAVE_UCX
TEST_CASE("algorithms: each one forced over ucx - 4 processes (UCX_TLS=tcp)",
          "[coll][algo][ucx][processes]") {
  for (const AlgoCase& a : kAlgoCases)
    runAlgo(a, 4, true, {"WEFT_TRANSPORTS=ucx", "UCX_TLS=tcp", "WEFT_TIMEOUT_S=30"});
}

TEST_CASE("algorithms: each one forced over ucx - 3 threads (UCX_TLS=sm)",
          "[coll][algo][threads][ucx]") {
  for (const AlgoCase& a : kAlgoCases)
    runAlgo(a, 3, false, {"WEFT_TRANSPORTS=ucx", "UCX_TLS=sm", "WEFT_TIMEOUT_S=30"});
}
#endif
