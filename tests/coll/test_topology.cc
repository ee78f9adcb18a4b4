// Communicator init uses the topology (src/topo/comm_topo.h): with a
// topology file whose ring is not rank order (the DGX-1's NVLink ring
// 0 3 2 1 5 6 7 4), ring allreduce runs in that order and still gives every
// rank the exact sum; ranks in separate processes agree on the order; a bad
// WEFT_TOPO_FILE fails init with an error naming it; WEFT_TOPO_DUMP_FILE
// writes the system used.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>

#include "harness.h"

using namespace wtest;

namespace {

std::string topologyFile(const char* name) {
  std::string f = __FILE__;
  return f.substr(0, f.rfind("/tests/")) + "/docs/topologies/" + name;
}

// Sum allreduce of int32 values that depend on rank and index, in several
// sizes (not multiples of 8 ranks, several chunks), checked exactly.
std::string sumBody(weft_comm_t comm, int rank, int nranks) {
  for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(12345)}) {
    std::vector<int32_t> buf(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(rank * 1000 + i % 97);
    TRY_WEFT(weft_allreduce(buf.data(), out.data(), count, WEFT_INT32, WEFT_SUM, comm, nullptr));
    for (size_t i = 0; i < count; ++i) {
      const int32_t want =
          static_cast<int32_t>(1000 * nranks * (nranks - 1) / 2 + nranks * (i % 97));
      if (out[i] != want)
        return "count " + std::to_string(count) + " index " + std::to_string(i) + ": got " +
               std::to_string(out[i]) + ", want " + std::to_string(want);
    }
  }
  return "";
}

std::vector<std::unique_ptr<ScopedEnv>> setAll(const std::vector<std::string>& env) {
  std::vector<std::unique_ptr<ScopedEnv>> set;
  for (const std::string& kv : env) {
    const size_t eq = kv.find('=');
    set.emplace_back(new ScopedEnv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str()));
  }
  return set;
}

}  // namespace

TEST_CASE("topology: ring allreduce follows the file's NVLink ring - threads and processes",
          "[coll][topo][processes]") {
  char tmpl[] = "/tmp/weft-topo-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::vector<std::string> common = {"WEFT_TOPO_FILE=" + topologyFile("dgx1-v100.xml"),
                                           "WEFT_ALGO=allreduce:ring",
                                           "WEFT_CHUNK_BYTES=4K",
                                           "WEFT_TIMEOUT_S=60",
                                           "WEFT_DEBUG=INFO",
                                           "WEFT_DEBUG_SUBSYS=INIT"};
  for (int processes = 0; processes < 2; ++processes) {
    std::vector<std::string> env = common;
    env.push_back("WEFT_DEBUG_FILE=" + dir + "/log-%p");
    if (processes) {
      env.push_back("WEFT_TRANSPORTS=tcp");
      env.push_back("WEFT_SOCKET_IFNAME=lo");
    } else {
      env.push_back("WEFT_SHM_ARENA_CHUNK=0");  // FIFOs: the schedule runs, not the arena
    }
    std::string err;
    if (processes) {
      err = runProcesses(8, sumBody, env);
    } else {
      auto set = setAll(env);
      err = runThreads(8, sumBody);
    }
    INFO((processes ? "processes" : "threads") << "\n" << err);
    REQUIRE(err.empty());
    const std::string all = catFiles(dir + "/log-*");
    INFO(all);
    CHECK(all.find("topology (WEFT_TOPO_FILE=") != std::string::npos);
    CHECK(all.find("\"DGX-1 V100\"") != std::string::npos);
    CHECK(all.find("ring order 0 3 2 1 5 6 7 4") != std::string::npos);
    // Transports per peer still come out as before: self, then shm or tcp.
    CHECK(all.find(processes ? "0:tcp 1:tcp 2:self" : "0:shm 1:shm 2:self") != std::string::npos);
    wtest::removeFiles(dir, "log-");
  }
  wtest::removeTree(dir);
}

TEST_CASE("topology: ranks pinned two per core chain by core and fold their pairs - processes",
          "[coll][topo][processes]") {
  // Two CPUs this process may use; 4 ranks pinned round-robin to them.
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) {
    WARN("skipped: this process may run on one CPU only");
    return;
  }
  char tmpl[] = "/tmp/weft-cores-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // Forced recursive doubling (folded: 2 ranks per core, 4 ranks) and chain
  // broadcasts from every root, over tcp so that schedules run.
  const std::vector<std::string> env = {"WEFT_TRANSPORTS=tcp",
                                        "WEFT_SOCKET_IFNAME=lo",
                                        "WEFT_ALGO=allreduce:rd;broadcast:chain",
                                        "WEFT_CHUNK_BYTES=4K",
                                        "WEFT_TIMEOUT_S=60",
                                        "WEFT_DEBUG=INFO",
                                        "WEFT_DEBUG_SUBSYS=INIT",
                                        "WEFT_DEBUG_FILE=" + dir + "/log-%p"};
  auto body = [](weft_comm_t comm, int rank, int nranks) -> std::string {
    std::string err = sumBody(comm, rank, nranks);
    if (!err.empty()) return "allreduce: " + err;
    for (int root = 0; root < nranks; ++root)
      for (size_t count : {size_t(3), size_t(5000)}) {
        std::vector<int32_t> buf(count);
        for (size_t i = 0; i < count; ++i)
          buf[i] = rank == root ? static_cast<int32_t>(root * 7 + i) : -1;
        TRY_WEFT(weft_broadcast(buf.data(), buf.data(), count, WEFT_INT32, root, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          if (buf[i] != static_cast<int32_t>(root * 7 + i))
            return "broadcast from " + std::to_string(root) + ": index " + std::to_string(i);
      }
    return "";
  };
  const std::string err = runProcesses(4, body, env, 120, [&cpus](int rank) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[rank % 2], &one);
    sched_setaffinity(0, sizeof one, &one);
  });
  INFO(err);
  REQUIRE(err.empty());
  const std::string all = catFiles(dir + "/log-*");
  INFO(all);
  CHECK(all.find("ring order 0 2 1 3") != std::string::npos);
  wtest::removeTree(dir);
}

TEST_CASE("topology: a bad WEFT_TOPO_FILE fails init with a clear error", "[coll][topo]") {
  char tmpl[] = "/tmp/weft-topo-bad-XXXXXX";
  const int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  const std::string bad = "<?xml version=\"1.0\"?>\n<!DOCTYPE x [<!ENTITY a \"b\">]>\n<system/>\n";
  REQUIRE(write(fd, bad.data(), bad.size()) == static_cast<ssize_t>(bad.size()));
  close(fd);
  for (const std::string& file : {std::string(tmpl), std::string("/nonexistent/topo.xml")}) {
    ScopedEnv e("WEFT_TOPO_FILE", file.c_str());
    std::vector<weft_comm_t> comms(2, nullptr);
    const weft_result_t r = weft_comm_init_all(comms.data(), 2);
    const std::string msg = weft_get_last_error(nullptr);
    INFO(msg);
    // Malformed: invalid argument; missing: the system error of open().
    REQUIRE(r == (file == tmpl ? WEFT_ERR_INVALID_ARGUMENT : WEFT_ERR_SYSTEM));
    CHECK(msg.find("WEFT_TOPO_FILE") != std::string::npos);
    CHECK(msg.find(file) != std::string::npos);
  }
  unlink(tmpl);
}

TEST_CASE("topology: WEFT_TOPO_DUMP_FILE writes the system in use", "[coll][topo]") {
  char tmpl[] = "/tmp/weft-topo-dump-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string path = std::string(tmpl) + "/topo-%h.xml";
  ScopedEnv f("WEFT_TOPO_FILE", topologyFile("pcie-2s-4gpu-2nic.xml").c_str());
  ScopedEnv d("WEFT_TOPO_DUMP_FILE", path.c_str());
  const std::string err = runThreads(2, sumBody);
  REQUIRE(err.empty());
  const std::string all = catFiles(std::string(tmpl) + "/topo-*.xml");
  wtest::removeTree(std::string(tmpl));
  CHECK(all.find("<system version=\"1\" name=\"2-socket PCIe server, 4 GPUs, 2 NICs\">") !=
        std::string::npos);
  CHECK(all.find("<gpu id=\"gpu3\"") != std::string::npos);
}
