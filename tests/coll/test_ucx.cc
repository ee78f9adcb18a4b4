// Collectives over the ucx transport (WEFT_TRANSPORTS=ucx), ranks as
// processes, with UCX restricted to its tcp transport and to its
// shared-memory transports: every collective checked element by element, the
// INFO log proves every peer went through ucx, and a killed peer is named.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "coll/net_transport.h"

using namespace wtest;

#ifdef WEFT_HAVE_UCX

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
      checkAllOn(log, n, "ucx");
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
