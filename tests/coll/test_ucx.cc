// Collectives over the ucx transport (WEFT_TRANSPORTS=ucx), ranks as
// processes, with UCX restricted to its tcp transport and to its
// shared-memory transports: every collective checked element by element, the
// INFO log proves every peer went through ucx, and a killed peer is named.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "coll/check.h"

using namespace wtest;

#ifdef WEFT_HAVE_UCX

namespace {

std::string allCollectives(weft_comm_t c, int r, int n) {
  for (Coll coll : kAllColls)
    for (weft_datatype_t dt : {WEFT_INT32, WEFT_FLOAT32, WEFT_FLOAT64})
      for (size_t count : {size_t(0), size_t(1), size_t(3000), size_t(300000)})
        for (bool inPlace : {false, true}) {
          weft_op_t op = dt == WEFT_INT32 ? WEFT_MAX : WEFT_SUM;
          std::string e =
              runAndCheck(c, r, n, coll, dt, op, count, inPlace, static_cast<int>(count % n));
          if (!e.empty()) return std::string(collName(coll)) + ": " + e;
        }
  return "";
}

// Counts the INFO lines "transports per peer ..." and whether any names a
// transport other than self and ucx.
void checkAllUcx(const std::string& log, int n) {
  int lines = 0;
  bool other = false;
  size_t pos = 0;
  while ((pos = log.find("transports per peer ", pos)) != std::string::npos) {
    size_t end = log.find('\n', pos);
    std::string line = log.substr(pos, end - pos);
    ++lines;
    for (const char* t : {":shm", ":tcp", ":ibverbs"}) other |= line.find(t) != std::string::npos;
    pos = end;
  }
  CHECK(lines == n);
  CHECK_FALSE(other);
}

}  // namespace

TEST_CASE("ucx: every collective over processes - UCX_TLS tcp and sm - 2 and 4 ranks",
          "[coll][processes][ucx]") {
  // The last variant: large payloads on the bulk endpoint (WEFT_UCX_FAST_RNDV).
  for (const char* tls : {"UCX_TLS=tcp", "UCX_TLS=sm", "UCX_TLS=tcp WEFT_UCX_FAST_RNDV=1"}) {
    for (int n : {2, 4}) {
      const std::string t = tls;
      const bool fast = t.find("FAST") != std::string::npos;
      if (fast && n == 4) continue;
      char tmpl[] = "/tmp/weft-ucx-XXXXXX";
      REQUIRE(mkdtemp(tmpl) != nullptr);
      const std::string dir = tmpl;
      std::string err = runProcesses(
          n, allCollectives,
          {"WEFT_TRANSPORTS=ucx", t.substr(0, t.find(' ')), "WEFT_DEBUG=INFO",
           "WEFT_DEBUG_SUBSYS=INIT", "WEFT_DEBUG_FILE=" + dir + "/log-%p", "WEFT_TIMEOUT_S=60",
           fast ? "WEFT_UCX_FAST_RNDV=1" : "WEFT_UCX_FAST_RNDV=0"});
      std::string log = catFiles(dir + "/log-*");
      wtest::removeTree(dir);
      INFO(tls << " n=" << n << "\n" << log);
      REQUIRE(err == "");
      checkAllUcx(log, n);
    }
  }
}

TEST_CASE("ucx: a peer killed mid-job fails the others with its name",
          "[failure][processes][ucx]") {
  for (const char* tls : {"UCX_TLS=tcp", "UCX_TLS=sm"}) {
    INFO(tls);
    std::string out = runProcesses(
        3,
        [](weft_comm_t c, int r, int) -> std::string {
          // A send completes once UCX holds the data, so the victim's part
          // of the first allreduce may die with it: the survivors may fail
          // in either call, but must fail, naming it, within the timeout.
          std::vector<float> v(1 << 16, 1.0f);
          weft_result_t res =
              weft_allreduce(v.data(), v.data(), v.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr);
          if (r == 2) raise(SIGKILL);
          if (res == WEFT_SUCCESS)
            res = weft_allreduce(v.data(), v.data(), v.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr);
          std::string msg = weft_get_last_error(c);
          if (res != WEFT_ERR_REMOTE) return "expected REMOTE, got " + describe(res, c);
          // The killed rank, or a survivor that gave up on it first and
          // closed its endpoints.
          if (msg.find("rank 2") == std::string::npos && msg.find("rank 1") == std::string::npos &&
              msg.find("rank 0 (") == std::string::npos)
            return "no peer named: " + msg;
          weft_comm_abort(c);
          return "#aborted";
        },
        {"WEFT_TRANSPORTS=ucx", tls, "WEFT_TIMEOUT_S=20"}, 60);
    INFO(out);
    CHECK(out.find("rank 0: #aborted") != std::string::npos);
    CHECK(out.find("rank 1: #aborted") != std::string::npos);
    CHECK(out.find("rank 2:  (killed by signal 9)") != std::string::npos);
    CHECK(out.find("expected") == std::string::npos);
  }
}

#else

TEST_CASE("ucx: collectives (not built)", "[coll][ucx]") {
  WARN("skipped: the ucx transport is not built (UCX not found at configure time)");
}

#endif
