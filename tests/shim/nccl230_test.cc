// What NCCL 2.30's nccl.h added, on the shim (ranks as threads): windows
// and the one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal) on
// host memory, suspend / resume / memory statistics, the parameter API and
// ncclCommQueryProperties. Built only against a 2.30+ header.
#include <catch2/catch.hpp>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "shim/shim_util.h"

#if NCCL_VERSION_CODE >= 23000

using shimtest::expectError;
using shimtest::onThreads;
using shimtest::ThreadRanks;

namespace {

std::string at(const char* what, size_t i, float got, float want) {
  return std::string(what) + " [" + std::to_string(i) + "] = " + std::to_string(got) + ", want " +
         std::to_string(want);
}

}  // namespace

TEST_CASE("windows: puts land in the target's window, signals count per index and context",
          "[shim][window]") {
  const int n = 3;
  ThreadRanks t(n);
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(n, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    std::vector<float> win(64, -1.0f);
    ncclWindow_t w = nullptr;
    SHIM_TRY(ncclCommWindowRegister(c, win.data(), win.size() * sizeof(float), &w, NCCL_WIN_DEFAULT));
    void* user = nullptr;
    SHIM_TRY(ncclWinGetUserPtr(c, w, &user));
    if (user != win.data()) return "ncclWinGetUserPtr gave another pointer";
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    // Two puts (signal indices 0 and 1) and a bare signal (index 2) to the
    // next rank; the source is overwritten at once (the put copied it).
    std::vector<float> src(16);
    for (int i = 0; i < 16; ++i) src[i] = static_cast<float>(r * 100 + i);
    SHIM_TRY(ncclPutSignal(src.data(), 16, ncclFloat, next, w, r * 16 * sizeof(float), 0, 0, 0, c,
                           nullptr));
    for (float& x : src) x = -7.0f;
    const double two[2] = {r + 0.5, r + 0.25};
    SHIM_TRY(ncclPutSignal(two, 2, ncclDouble, next, w, 52 * sizeof(float), 1, 3, 0, c, nullptr));
    SHIM_TRY(ncclSignal(next, 2, 0, 0, c, nullptr));
    // Wait for the previous rank's three, the bare signal first.
    ncclWaitSignalDesc_t d[3] = {{1, prev, 2, 0}, {1, prev, 0, 0}, {1, prev, 1, 3}};
    SHIM_TRY(ncclWaitSignal(3, d, c, nullptr));
    for (size_t i = 0; i < win.size(); ++i) {
      float want = -1.0f;
      if (i >= static_cast<size_t>(prev * 16) && i < static_cast<size_t>(prev * 16 + 16))
        want = static_cast<float>(prev * 100 + static_cast<int>(i) - prev * 16);
      if (i >= 52 && i < 56) continue;  // the doubles
      if (win[i] != want) return at("window", i, win[i], want);
    }
    double got[2];
    memcpy(got, &win[52], sizeof got);
    if (got[0] != prev + 0.5 || got[1] != prev + 0.25) return "the doubles did not land";
    // Nothing more is pending: a wait for zero signals returns at once.
    ncclWaitSignalDesc_t none{0, prev, 0, 0};
    SHIM_TRY(ncclWaitSignal(1, &none, c, nullptr));
    // Two puts under one signal index, waited for as opCnt 2.
    float one = static_cast<float>(r);
    SHIM_TRY(ncclPutSignal(&one, 1, ncclFloat, next, w, 60 * sizeof(float), 5, 0, 0, c, nullptr));
    SHIM_TRY(ncclPutSignal(&one, 1, ncclFloat, next, w, 61 * sizeof(float), 5, 0, 0, c, nullptr));
    ncclWaitSignalDesc_t twice{2, prev, 5, 0};
    SHIM_TRY(ncclWaitSignal(1, &twice, c, nullptr));
    if (win[60] != prev || win[61] != prev) return at("opCnt 2", 60, win[60], prev);
    SHIM_TRY(ncclCommWindowDeregister(c, w));
    return expectError(ncclWinGetUserPtr(c, w, &user), ncclInvalidArgument, "not a window",
                       "a deregistered window");
  });
  CHECK(errs == "");
}

TEST_CASE("one-sided calls refuse bad arguments before sending anything", "[shim][window]") {
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(2, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    float buf[8] = {};
    std::string e = expectError(ncclSignal(1 - r, 0, 0, 0, c, nullptr), ncclInvalidUsage,
                                "register a window first", "a signal before any window");
    if (!e.empty()) return e;
    ncclWaitSignalDesc_t d{1, 1 - r, 0, 0};
    e = expectError(ncclWaitSignal(1, &d, c, nullptr), ncclInvalidUsage, "no window",
                    "a wait before any window");
    if (!e.empty()) return e;
    ncclWindow_t w = nullptr;
    SHIM_TRY(ncclCommWindowRegister(c, buf, sizeof buf, &w, NCCL_WIN_DEFAULT));
    const int peer = 1 - r;
    e = expectError(ncclPutSignal(buf, 4, ncclFloat, peer, w, 5 * sizeof(float), 0, 0, 0, c, nullptr),
                    ncclInvalidArgument, "do not fit", "a put past the window");
    if (!e.empty()) return e;
    e = expectError(ncclPutSignal(buf, 1, ncclFloat, 2, w, 0, 0, 0, 0, c, nullptr),
                    ncclInvalidArgument, "peer 2", "a peer outside the comm");
    if (!e.empty()) return e;
    e = expectError(ncclPutSignal(buf, 1, ncclFloat, peer, w, 0, 0, 0, 1, c, nullptr),
                    ncclInvalidArgument, "flags", "reserved flags");
    if (!e.empty()) return e;
    e = expectError(ncclPutSignal(buf, 1, ncclFloat, peer, nullptr, 0, 0, 0, 0, c, nullptr),
                    ncclInvalidArgument, "peerWin", "no window");
    if (!e.empty()) return e;
    ncclWaitSignalDesc_t bad{1, 7, 0, 0};
    e = expectError(ncclWaitSignal(1, &bad, c, nullptr), ncclInvalidArgument, "peer 7",
                    "a wait on a peer outside the comm");
    if (!e.empty()) return e;
    SHIM_TRY(ncclGroupStart());
    e = expectError(ncclSignal(peer, 0, 0, 0, c, nullptr), ncclInvalidUsage, "ncclGroupStart",
                    "a signal inside a group");
    ncclGroupEnd();
    if (!e.empty()) return e;
    // The channel is still in step: one real put goes through.
    float v = 40.0f + static_cast<float>(r);
    SHIM_TRY(ncclPutSignal(&v, 1, ncclFloat, peer, w, 0, 0, 0, 0, c, nullptr));
    ncclWaitSignalDesc_t ok{1, peer, 0, 0};
    SHIM_TRY(ncclWaitSignal(1, &ok, c, nullptr));
    if (buf[0] != 40.0f + static_cast<float>(peer)) return at("after the refusals", 0, buf[0], 40.0f + peer);
    return "";
  });
  CHECK(errs == "");
}

TEST_CASE("a suspended communicator refuses operations until it is resumed", "[shim][suspend]") {
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(2, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    std::vector<float> x(1 << 18, 1.0f);  // large enough to leave scratch behind
    SHIM_TRY(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, c, nullptr));
    uint64_t v = 7;
    SHIM_TRY(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v));
    if (v != 0) return "suspended before ncclCommSuspend";
    SHIM_TRY(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
    SHIM_TRY(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v));
    if (v != 1) return "not suspended after ncclCommSuspend";
    SHIM_TRY(ncclCommMemStats(c, ncclStatGpuMemSuspend, &v));
    if (v != 0) return "GPU memory left after NCCL_SUSPEND_MEM: " + std::to_string(v);
    std::string e = expectError(
        ncclAllReduce(x.data(), x.data(), 4, ncclFloat, ncclSum, c, nullptr), ncclInvalidUsage,
        "suspended", "an allreduce while suspended");
    if (!e.empty()) return e;
    if (x[0] != 2.0f) return at("a refused call wrote", 0, x[0], 2.0f);
    e = expectError(ncclCommSuspend(c, 0), ncclInvalidUsage, "already suspended", "twice");
    if (!e.empty()) return e;
    SHIM_TRY(ncclCommResume(c));
    e = expectError(ncclCommResume(c), ncclInvalidUsage, "not suspended", "resume twice");
    if (!e.empty()) return e;
    e = expectError(ncclCommSuspend(c, 0x10), ncclInvalidArgument, "flags", "unknown flags");
    if (!e.empty()) return e;
    e = expectError(ncclCommMemStats(c, static_cast<ncclCommMemStat_t>(9), &v), ncclInvalidArgument,
                    "stat 9", "an unknown stat");
    if (!e.empty()) return e;
    SHIM_TRY(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat, ncclSum, c, nullptr));
    if (x[5] != 4.0f) return at("after resume", 5, x[5], 4.0f);
    return "";
  });
  CHECK(errs == "");
}

TEST_CASE("the parameter API reads NCCL's variables and weft's settings", "[shim][param]") {
  setenv("WEFT_STALL_WARN_S", "42", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  const char** keys = nullptr;
  int nkeys = 0;
  REQUIRE(ncclParamGetAllParameterKeys(&keys, &nkeys) == ncclSuccess);
  std::set<std::string> all(keys, keys + nkeys);
  CHECK(all.count("NCCL_DEBUG") == 1);
  CHECK(all.count("NCCL_SOCKET_IFNAME") == 1);
  CHECK(all.count("WEFT_TIMEOUT_S") == 1);
  CHECK(all.count("WEFT_STALL_WARN_S") == 1);

  ncclParamHandle_t h = nullptr;
  REQUIRE(ncclParamBind(&h, "WEFT_STALL_WARN_S") == ncclSuccess);
  int32_t i32 = 0;
  REQUIRE(ncclParamGetI32(h, &i32) == ncclSuccess);
  CHECK(i32 == 42);
  setenv("WEFT_STALL_WARN_S", "300", 1);  // live: the next read sees it
  uint64_t u64 = 0;
  REQUIRE(ncclParamGetU64(h, &u64) == ncclSuccess);
  CHECK(u64 == 300);
  int8_t i8 = 0;
  CHECK(ncclParamGetI8(h, &i8) == ncclInvalidArgument);  // 300 does not fit
  CHECK(std::string(ncclGetLastError(nullptr)).find("WEFT_STALL_WARN_S") != std::string::npos);
  const char* s = nullptr;
  REQUIRE(ncclParamGetStr(h, &s) == ncclSuccess);
  CHECK(std::string(s) == "300");
  char raw[8];
  int len = 0;
  REQUIRE(ncclParamGet(h, raw, sizeof raw, &len) == ncclSuccess);
  CHECK(len == 4);
  CHECK(std::string(raw) == "300");
  CHECK(ncclParamGet(h, raw, 2, &len) == ncclInvalidArgument);

  ncclParamHandle_t again = nullptr;
  REQUIRE(ncclParamBind(&again, "WEFT_STALL_WARN_S") == ncclSuccess);
  CHECK(again == h);
  REQUIRE(ncclParamBind(&h, "NCCL_SOCKET_IFNAME") == ncclSuccess);
  REQUIRE(ncclParamGetStr(h, &s) == ncclSuccess);
  CHECK(std::string(s) == "lo");
  CHECK(ncclParamGetI32(h, &i32) == ncclInvalidArgument);  // "lo" is no number
  int vlen = 0;
  REQUIRE(ncclParamGetParameter("NCCL_SOCKET_IFNAME", &s, &vlen) == ncclSuccess);
  CHECK(std::string(s, static_cast<size_t>(vlen)) == "lo");
  ncclParamHandle_t none = nullptr;
  CHECK(ncclParamBind(&none, "NCCL_NO_SUCH_THING") == ncclInvalidArgument);
  CHECK(none == nullptr);
  CHECK(ncclParamGetParameter("NCCL_NO_SUCH_THING", &s, &vlen) == ncclInvalidArgument);
  unsetenv("WEFT_STALL_WARN_S");
  unsetenv("NCCL_SOCKET_IFNAME");
}

TEST_CASE("ncclCommQueryProperties says what the communicator offers", "[shim][comm]") {
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  REQUIRE(ncclCommQueryProperties(t.comms[1], &p) == ncclSuccess);
  CHECK(p.rank == 1);
  CHECK(p.nRanks == 2);
  CHECK_FALSE(p.deviceApiSupport);
  CHECK(p.hostRmaSupport);
  CHECK(p.size == sizeof p);
  CHECK(ncclCommQueryProperties(t.comms[0], nullptr) == ncclInvalidArgument);
}

#endif  // NCCL_VERSION_CODE >= 23000
