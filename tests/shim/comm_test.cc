// The shim's communicators and everything around them, in process: creation
// (in groups, nonblocking, configs of other sizes), split and shrink, errors
// and unsupported functions, memory and registration, the device API's host
// functions, the NCCL environment variables, and a CUDA runtime loaded in a
// process without a GPU.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <nccl_device.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shim/shim_util.h"

using shimtest::expectError;
using shimtest::onThreads;
using shimtest::ThreadRanks;

namespace {

// Polls ncclCommGetAsyncError until no comm is in progress (bounded).
std::string waitReady(const std::vector<ncclComm_t>& comms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (ncclComm_t c : comms) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      if (ncclCommGetAsyncError(c, &state) != ncclSuccess) return "ncclCommGetAsyncError failed";
      if (std::chrono::steady_clock::now() > end) return "still in progress after 120 s";
      if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state != ncclSuccess) return std::string("async error: ") + ncclGetLastError(c);
  }
  return "";
}

// Every comm allreduces its rank + 1 on its own thread; each must see the
// sum over the comm (size n: n (n + 1) / 2).
std::string allreduceRanks(const std::vector<ncclComm_t>& comms) {
  return onThreads(static_cast<int>(comms.size()), [&](int i) -> std::string {
    int rank = -1, n = 0;
    SHIM_TRY(ncclCommUserRank(comms[i], &rank));
    SHIM_TRY(ncclCommCount(comms[i], &n));
    int v = rank + 1, sum = 0;
    SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comms[i], nullptr));
    return sum == n * (n + 1) / 2 ? "" : "sum " + std::to_string(sum);
  });
}

// A TCP port on 127.0.0.1 that was free a moment ago.
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

}  // namespace

TEST_CASE("version and the library in use", "[shim][comm]") {
  int v = 0;
  REQUIRE(ncclGetVersion(&v) == ncclSuccess);
  CHECK(v == NCCL_VERSION_CODE);
  CHECK(ncclGetVersion(nullptr) == ncclInvalidArgument);
  // The test must run against the shim, not a libnccl.so.2 found elsewhere.
  Dl_info info;
  REQUIRE(dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info) != 0);
  char a[4096], b[4096];
  REQUIRE(realpath(info.dli_fname, a) != nullptr);
  REQUIRE(realpath(WEFT_SHIM_PATH, b) != nullptr);
  CHECK(std::string(a) == std::string(b));
  for (int r = ncclSuccess; r < ncclNumResults; ++r)
    CHECK(std::string(ncclGetErrorString(static_cast<ncclResult_t>(r))).size() > 3);
}

TEST_CASE("unsupported functions return ncclInvalidUsage and say why", "[shim][comm]") {
  ThreadRanks t(1);
  REQUIRE(t.init == ncclSuccess);
  ncclComm_t c = t.comms[0];
  auto check = [&](ncclResult_t r, const char* fn) {
    INFO(fn << ": " << ncclGetLastError(nullptr));
    CHECK(r == ncclInvalidUsage);
    CHECK(std::string(ncclGetLastError(nullptr))
              .find(std::string(fn) + " is not supported by weft") != std::string::npos);
  };
#if NCCL_VERSION_CODE >= 23000
  // Device pointers into windows (weft's are host memory: window_test.cc).
  ncclUniqueId id;
  void* p = &id;
  check(ncclGetPeerDevicePointer(nullptr, 0, 0, &p), "ncclGetPeerDevicePointer");
  CHECK(p == nullptr);
  check(ncclGetLsaMultimemDevicePointer(nullptr, 0, &p), "ncclGetLsaMultimemDevicePointer");
#endif
  ncclDevComm_t* devComm = nullptr;
  check(ncclDevCommCreate(c, nullptr, devComm), "ncclDevCommCreate");
  check(ncclDevCommDestroy(c, devComm), "ncclDevCommDestroy");
  ncclTeam_t world = ncclTeamWorld(c);
  check(ncclLsaBarrierCreateRequirement(world, 1, nullptr, nullptr),
        "ncclLsaBarrierCreateRequirement");
  check(ncclGinBarrierCreateRequirement(c, world, 1, nullptr, nullptr),
        "ncclGinBarrierCreateRequirement");
  check(ncclLLA2ACreateRequirement(1, 1, nullptr, nullptr), "ncclLLA2ACreateRequirement");
  CHECK(ncclLLA2ACalcSlots(128, 8) == 0);
  // A simulated group end is refused and leaves the group open.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  check(ncclGroupSimulateEnd(&sim), "ncclGroupSimulateEnd");
  CHECK(ncclGroupEnd() == ncclSuccess);
  // The comm is unharmed.
  float x = 2.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr) == ncclSuccess);
}

TEST_CASE("bad arguments give ncclInvalidArgument and a sentence", "[shim][comm]") {
  ThreadRanks t(1);
  REQUIRE(t.init == ncclSuccess);
  ncclComm_t c = t.comms[0];
  float a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
  CHECK(expectError(ncclAllReduce(a, b, 4, ncclFloat, ncclSum, nullptr, nullptr),
                    ncclInvalidArgument, "comm is NULL", "NULL comm") == "");
  CHECK(expectError(ncclAllReduce(a, b, 4, static_cast<ncclDataType_t>(12), ncclSum, c, nullptr),
                    ncclInvalidArgument, "datatype 12", "datatype") == "");
  CHECK(expectError(ncclAllReduce(a, b, 4, ncclFloat, static_cast<ncclRedOp_t>(9), c, nullptr),
                    ncclInvalidArgument, "op 9", "op") == "");
  CHECK(expectError(ncclBroadcast(a, b, 4, ncclFloat, 1, c, nullptr), ncclInvalidArgument, "root",
                    "root") == "");
  CHECK(expectError(ncclGather(a, b, 1, ncclFloat, -1, c, nullptr), ncclInvalidArgument, "root",
                    "gather root") == "");
  CHECK(expectError(ncclSend(a, 4, ncclFloat, 5, c, nullptr), ncclInvalidArgument, "peer",
                    "peer") == "");
  CHECK(expectError(ncclAllReduce(nullptr, b, 4, ncclFloat, ncclSum, c, nullptr),
                    ncclInvalidArgument, "NULL", "NULL sendbuff") == "");
  CHECK(b[0] == 0.0f);  // nothing written
  CHECK(expectError(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart", "lone group end") == "");
  int n = 0;
  CHECK(expectError(ncclCommCount(reinterpret_cast<ncclComm_t>(a), &n), ncclInvalidArgument,
                    "not a live communicator", "made-up comm") == "");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t bad = nullptr;
  CHECK(expectError(ncclCommInitRank(&bad, 2, id, 2), ncclInvalidArgument, "rank 2", "rank") == "");
  CHECK(expectError(ncclCommInitRank(&bad, 0, id, 0), ncclInvalidArgument, "nranks", "nranks") ==
        "");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CHECK(expectError(ncclCommInitRankConfig(&bad, 1, id, 0, &cfg), ncclInvalidArgument,
                    "NCCL_CONFIG_INITIALIZER", "config magic") == "");
  ncclConfig_t cfg2 = NCCL_CONFIG_INITIALIZER;
  cfg2.blocking = 2;
  CHECK(expectError(ncclCommInitRankConfig(&bad, 1, id, 0, &cfg2), ncclInvalidArgument, "blocking",
                    "config blocking") == "");
  CHECK(bad == nullptr);
  // ncclGetLastError(comm) gives the last error too.
  CHECK(std::string(ncclGetLastError(c)).size() > 0);
}

TEST_CASE("one thread creates 4 ranks inside a group", "[shim][comm]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(4, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 4; ++r) CHECK(ncclCommInitRank(&comms[r], 4, id, r) == ncclSuccess);
  int n = 0;
  // Not usable before the group ends (a query, so the group is not failed).
  CHECK(ncclCommCount(comms[0], &n) == ncclInvalidUsage);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(allreduceRanks(comms) == "");
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("a group of nonblocking creations returns ncclInProgress", "[shim][comm]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  std::vector<ncclComm_t> comms(3, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 3; ++r)
    CHECK(ncclCommInitRankConfig(&comms[r], 3, id, r, &cfg) == ncclSuccess);
  ncclResult_t end = ncclGroupEnd();
  CHECK((end == ncclInProgress || end == ncclSuccess));
  CHECK(waitReady(comms) == "");
  CHECK(allreduceRanks(comms) == "");
  // Splits recorded in a group by one thread run together at its end.
  std::vector<ncclComm_t> subs(3, nullptr);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 3; ++r)
    CHECK(ncclCommSplit(comms[r], 0, -r, &subs[r], nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  int rank = -1;
  CHECK(ncclCommUserRank(subs[0], &rank) == ncclSuccess);
  CHECK(rank == 2);
  CHECK(allreduceRanks(subs) == "");
  for (ncclComm_t c : subs) CHECK(ncclCommDestroy(c) == ncclSuccess);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("ncclCommAbort from another thread ends a blocked collective", "[shim][comm]") {
  // Rank 1 never joins the allreduce; a watchdog thread aborts rank 0's
  // comm, whose call must then return an error (and not crash).
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  std::vector<float> a(1024, 1.0f), b(1024, 0.0f);
  ncclResult_t got = ncclSuccess;
  std::thread caller([&] {
    got = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, t.comms[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  CHECK(ncclCommAbort(t.comms[0]) == ncclSuccess);
  caller.join();
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("abort and the blocked call took " << waited << " s");
  CHECK(got != ncclSuccess);
  CHECK(waited < 30.0);
  t.comms[0] = nullptr;
  ncclResult_t state = ncclSuccess;
  CHECK(ncclCommGetAsyncError(t.comms[0], &state) == ncclInvalidArgument);
}

TEST_CASE("nonblocking configs create in the background", "[shim][comm]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nb";
  std::vector<ncclComm_t> comms(4, nullptr);
  // One thread, no group: each creation must return before the others join.
  for (int r = 0; r < 4; ++r) {
    ncclResult_t res = ncclCommInitRankConfig(&comms[r], 4, id, r, &cfg);
    CHECK((res == ncclInProgress || res == ncclSuccess));
    CHECK(comms[r] != nullptr);
  }
  CHECK(waitReady(comms) == "");
  CHECK(allreduceRanks(comms) == "");
  // A split of a nonblocking comm completes before it returns.
  std::vector<ncclComm_t> halves(4, nullptr);
  std::string errs = onThreads(4, [&](int r) -> std::string {
    SHIM_TRY(ncclCommSplit(comms[r], r / 2, r, &halves[r], nullptr));
    return "";
  });
  CHECK(errs == "");
  CHECK(waitReady(halves) == "");
  CHECK(allreduceRanks(halves) == "");
  for (ncclComm_t c : halves) CHECK(ncclCommDestroy(c) == ncclSuccess);
  for (ncclComm_t c : comms) {
    CHECK(ncclCommFinalize(c) == ncclSuccess);
    ncclResult_t state = ncclInProgress;
    CHECK(ncclCommGetAsyncError(c, &state) == ncclSuccess);
    CHECK(state == ncclSuccess);
    int n = 0;
    CHECK(ncclCommCount(c, &n) == ncclSuccess);  // queries still answer
    float x = 1.0f;
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr) == ncclInvalidUsage);
    CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
}

TEST_CASE("ncclConfig_t of older and newer sizes", "[shim][comm]") {
  // An older struct: it ends before trafficClass. The fields past its size
  // hold garbage that must not be read (commName would crash).
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, trafficClass);
  old.blocking = 0;
  old.commName = reinterpret_cast<const char*>(0x1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, &old);
  CHECK((r == ncclInProgress || r == ncclSuccess));
  CHECK(waitReady({c}) == "");
  CHECK(ncclCommDestroy(c) == ncclSuccess);

  // A newer, larger struct: the fields it adds are ignored.
  std::vector<unsigned char> big(sizeof(ncclConfig_t) + 64, 0xff);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  init.size = big.size();
  init.commName = "newer";
  memcpy(big.data(), &init, sizeof init);
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  c = nullptr;
  CHECK(ncclCommInitRankConfig(&c, 1, id, 0, reinterpret_cast<ncclConfig_t*>(big.data())) ==
        ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);

  // Too small to even hold `blocking`.
  ncclConfig_t tiny = NCCL_CONFIG_INITIALIZER;
  tiny.size = 8;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  CHECK(expectError(ncclCommInitRankConfig(&c, 1, id, 0, &tiny), ncclInvalidArgument, "size",
                    "tiny config") == "");
}

TEST_CASE("split, NOCOLOR and shrink on 4 ranks", "[shim][comm]") {
  ThreadRanks t(4);
  REQUIRE(t.init == ncclSuccess);
  std::vector<ncclComm_t> split(4, nullptr), odd(4, nullptr), shrunk(4, nullptr);
  std::string errs = onThreads(4, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    // Colors by parity, keys reversed: the new rank order is descending.
    SHIM_TRY(ncclCommSplit(c, r % 2, 10 - r, &split[r], nullptr));
    int rank = -1, n = 0;
    SHIM_TRY(ncclCommUserRank(split[r], &rank));
    SHIM_TRY(ncclCommCount(split[r], &n));
    if (n != 2 || rank != (r < 2 ? 1 : 0)) return "split rank " + std::to_string(rank);
    int v = r, sum = -1;
    SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, split[r], nullptr));
    if (sum != (r % 2 == 0 ? 2 : 4)) return "split sum " + std::to_string(sum);
    // Rank 3 opts out.
    SHIM_TRY(ncclCommSplit(c, r == 3 ? NCCL_SPLIT_NOCOLOR : 0, r, &odd[r], nullptr));
    if ((odd[r] == nullptr) != (r == 3)) return "NOCOLOR";
    if (r != 3) {
      SHIM_TRY(ncclCommCount(odd[r], &n));
      if (n != 3) return "NOCOLOR split size " + std::to_string(n);
    }
    // Ranks 0, 1 and 3 shrink rank 2 away; rank 2 does not call.
    if (r != 2) {
      int excluded[] = {2};
      SHIM_TRY(ncclCommShrink(c, excluded, 1, &shrunk[r], nullptr, NCCL_SHRINK_DEFAULT));
      SHIM_TRY(ncclCommUserRank(shrunk[r], &rank));
      SHIM_TRY(ncclCommCount(shrunk[r], &n));
      if (n != 3 || rank != (r == 3 ? 2 : r)) return "shrink rank " + std::to_string(rank);
      SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, shrunk[r], nullptr));
      if (sum != 4) return "shrink sum " + std::to_string(sum);
    }
    // The parent still works.
    SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, c, nullptr));
    if (sum != 6) return "parent sum " + std::to_string(sum);
    // This rank excluding itself is refused.
    int self[] = {r};
    ncclComm_t none = nullptr;
    std::string e = expectError(ncclCommShrink(c, self, 1, &none, nullptr, NCCL_SHRINK_DEFAULT),
                                ncclInvalidArgument, "excludeRanksList", "self-exclusion");
    if (!e.empty()) return e;
    return "";
  });
  CHECK(errs == "");
  for (auto* v : {&split, &odd, &shrunk})
    for (ncclComm_t c : *v) CHECK(ncclCommAbort(c) == ncclSuccess);
}

// ncclCommGrow and ncclCommGetUniqueId are in nccl.h from 2.30 on (the
// toolkit's may be older; the shim has them whichever header it was built with).
#if NCCL_VERSION_CODE >= 23000
TEST_CASE("revoke then shrink with a rank gone and grow back with a new one", "[shim][comm]") {
  ThreadRanks t(3);
  REQUIRE(t.init == ncclSuccess);
  std::vector<ncclComm_t> shrunk(3, nullptr), grown(3, nullptr);
  ncclUniqueId id;
  std::atomic<bool> idReady{false};
  std::string errs = onThreads(3, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    int v = r + 1, sum = -1, n = 0, rank = -1;
    if (r == 2) {  // leaves, then comes back as a new rank of the grown comm
      while (!idReady) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      SHIM_TRY(ncclCommGrow(nullptr, 3, &id, 2, &grown[r], nullptr));
    } else {
      SHIM_TRY(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
      ncclResult_t async = ncclInternalError;
      SHIM_TRY(ncclCommGetAsyncError(c, &async));
      if (async != ncclSuccess) return "a revoked comm is quiescent: " + std::to_string(async);
      if (ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, c, nullptr) == ncclSuccess)
        return "an allreduce on a revoked comm succeeded";
      int excluded[] = {2};
      SHIM_TRY(ncclCommShrink(c, excluded, 1, &shrunk[r], nullptr, NCCL_SHRINK_ABORT));
      SHIM_TRY(ncclCommCount(shrunk[r], &n));
      SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, shrunk[r], nullptr));
      if (n != 2 || sum != 3) return "shrunk: " + std::to_string(n) + " ranks, sum " + std::to_string(sum);
      if (r == 0) {
        SHIM_TRY(ncclCommGetUniqueId(shrunk[r], &id));
        idReady = true;
      }
      SHIM_TRY(ncclCommGrow(shrunk[r], 3, r == 0 ? &id : nullptr, -1, &grown[r], nullptr));
    }
    SHIM_TRY(ncclCommUserRank(grown[r], &rank));
    SHIM_TRY(ncclCommCount(grown[r], &n));
    SHIM_TRY(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, grown[r], nullptr));
    if (rank != r || n != 3 || sum != 6)
      return "grown: rank " + std::to_string(rank) + " of " + std::to_string(n) + ", sum " +
             std::to_string(sum);
    return "";
  });
  CHECK(errs == "");
  for (auto* v : {&shrunk, &grown})
    for (ncclComm_t c : *v)
      if (c) CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclCommRevoke(t.comms[0], 3) == ncclInvalidArgument);
}
#endif

TEST_CASE("memory, registration, async error, device and teams", "[shim][comm]") {
  void* p = nullptr;
  REQUIRE(ncclMemAlloc(&p, 1 << 20) == ncclSuccess);
  CHECK(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  memset(p, 1, 1 << 20);  // host memory without CUDA in the process
  CHECK(ncclMemFree(p) == ncclSuccess);
  int stack = 0;
  CHECK(expectError(ncclMemFree(&stack), ncclInvalidArgument, "ncclMemAlloc", "foreign ptr") == "");
  CHECK(ncclMemAlloc(&p, 0) == ncclInvalidArgument);

  std::vector<ncclComm_t> comms(2, nullptr);
  const int devs[] = {5, 3};
  REQUIRE(ncclCommInitAll(comms.data(), 2, devs) == ncclSuccess);
  int dev = -1;
  CHECK(ncclCommCuDevice(comms[1], &dev) == ncclSuccess);
  CHECK(dev == 3);
  float buf[16];
  void* h = nullptr;
  CHECK(ncclCommRegister(comms[0], buf, sizeof buf, &h) == ncclSuccess);
  CHECK(h != nullptr);
  CHECK(ncclCommDeregister(comms[0], h) == ncclSuccess);
  CHECK(ncclCommDeregister(comms[0], h) == ncclInvalidArgument);
  ncclResult_t state = ncclInternalError;
  CHECK(ncclCommGetAsyncError(comms[0], &state) == ncclSuccess);
  CHECK(state == ncclSuccess);
  ncclTeam_t world = ncclTeamWorld(comms[1]);
  CHECK((world.nRanks == 2 && world.rank == 1 && world.stride == 1));
  ncclTeam_t lsa = ncclTeamLsa(comms[1]);
  CHECK((lsa.nRanks == 1 && lsa.rank == 0));
  ncclTeam_t rail = ncclTeamRail(comms[1]);
  CHECK((rail.nRanks == 2 && rail.rank == 1));
  CHECK(ncclTeamRankToWorld(comms[1], world, 0) == 0);
  CHECK(ncclTeamRankToWorld(comms[1], rail, 1) == 1);
  CHECK(ncclTeamRankToLsa(comms[1], lsa, 0) == 0);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclCommDestroy(nullptr) == ncclSuccess);
  CHECK(ncclCommAbort(nullptr) == ncclSuccess);
}

TEST_CASE("NCCL environment variables map onto WEFT ones", "[shim][env]") {
  ncclUniqueId id;
  auto apply = [&] { REQUIRE(ncclGetUniqueId(&id) == ncclSuccess); };
  auto env = [](const char* n) {
    const char* v = getenv(n);
    return v ? std::string(v) : std::string("(unset)");
  };
  unsetenv("WEFT_TRANSPORTS");
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ALLOC", 1);
  setenv("NCCL_BUFFSIZE", "4194304", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  apply();
  CHECK(env("WEFT_TRANSPORTS") == "^shm");
  CHECK(env("WEFT_DEBUG_SUBSYS") == "INIT,TRANSPORT");
  CHECK(env("WEFT_SHM_SLOT_BYTES") == "524288");
  CHECK(env("WEFT_ALGO") == "ring");
  setenv("NCCL_DEBUG_SUBSYS", "^GRAPH", 1);
  apply();
  CHECK(env("WEFT_DEBUG_SUBSYS") == "^TUNING");
  // What the shim set follows its source; unset source, unset variable.
  unsetenv("NCCL_SHM_DISABLE");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("NCCL_ALGO");
  apply();
  CHECK(env("WEFT_TRANSPORTS") == "(unset)");
  CHECK(env("WEFT_DEBUG_SUBSYS") == "(unset)");
  CHECK(env("WEFT_SHM_SLOT_BYTES") == "(unset)");
  CHECK(env("WEFT_ALGO") == "(unset)");
  // A WEFT_* variable the user set wins over its NCCL_* source.
  setenv("WEFT_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_IFNAME", "eth", 1);
  apply();
  CHECK(env("WEFT_SOCKET_IFNAME") == "lo");
  unsetenv("NCCL_SOCKET_IFNAME");
  apply();
  CHECK(env("WEFT_SOCKET_IFNAME") == "lo");
  unsetenv("WEFT_SOCKET_IFNAME");
  // NCCL_COMM_BLOCKING=0: nonblocking unless the config says otherwise.
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  apply();
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRank(&c, 1, id, 0);
  unsetenv("NCCL_COMM_BLOCKING");
  CHECK((r == ncclInProgress || r == ncclSuccess));
  CHECK(waitReady({c}) == "");
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("NCCL_COMM_ID gives every rank the same id and rank 0 starts the root", "[shim][env]") {
  const std::string addr = "127.0.0.1:" + std::to_string(freePort());
  setenv("NCCL_COMM_ID", addr.c_str(), 1);
  ncclUniqueId a, b;
  REQUIRE(ncclGetUniqueId(&a) == ncclSuccess);
  REQUIRE(ncclGetUniqueId(&b) == ncclSuccess);
  CHECK(memcmp(&a, &b, sizeof a) == 0);
  std::vector<ncclComm_t> comms(3, nullptr);
  std::string errs = onThreads(3, [&](int r) -> std::string {
    ncclUniqueId id;
    SHIM_TRY(ncclGetUniqueId(&id));
    SHIM_TRY(ncclCommInitRank(&comms[r], 3, id, r));
    return "";
  });
  unsetenv("NCCL_COMM_ID");
  CHECK(errs == "");
  CHECK(allreduceRanks(comms) == "");
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  setenv("NCCL_COMM_ID", "not an address", 1);
  CHECK(expectError(ncclGetUniqueId(&a), ncclInvalidArgument, "NCCL_COMM_ID", "bad NCCL_COMM_ID") ==
        "");
  unsetenv("NCCL_COMM_ID");
}

TEST_CASE("a CUDA runtime in a process without a GPU keeps the host path", "[shim][cuda]") {
  void* rt = nullptr;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (!rt) rt = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (!rt) {
    WARN("no libcudart here; the CUDA-runtime case is not exercised");
    return;
  }
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  // cudaStreamLegacy: a valid stream handle with or without a GPU.
  cudaStream_t legacy = reinterpret_cast<cudaStream_t>(0x1);
  std::string errs = onThreads(2, [&](int r) -> std::string {
    std::vector<double> a(100, r + 1.0), b(100, 0.0);
    SHIM_TRY(ncclAllReduce(a.data(), b.data(), 100, ncclDouble, ncclSum, t.comms[r], legacy));
    return b[99] == 3.0 ? "" : "sum " + std::to_string(b[99]);
  });
  CHECK(errs == "");
  void* p = nullptr;
  REQUIRE(ncclMemAlloc(&p, 4096) == ncclSuccess);  // device memory on a GPU, host memory here
  CHECK(ncclMemFree(p) == ncclSuccess);
}
