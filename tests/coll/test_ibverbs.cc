// Collectives over the ibverbs transport (WEFT_TRANSPORTS=ibverbs): 2 and 4
// ranks as processes on this host, talking through the RDMA device's
// loopback, every collective checked element by element, and the INFO log
// proving every peer went through ibverbs. It needs an RDMA device; without
// one it says so and checks nothing (the machines this project is built on
// have none, so this has not run yet: see docs/architecture.md).
#include <dirent.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "coll/net_transport.h"

using namespace wtest;

namespace {

// Why the test cannot run here, or "" when it can. The verbs library lists
// the devices of /sys/class/infiniband (ibv_get_device_list).
std::string rdmaMissing() {
#ifndef WEFT_HAVE_IBVERBS
  return "the ibverbs transport is not built (rdma-core not found at configure time)";
#else
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return "no RDMA device (/sys/class/infiniband does not exist)";
  int devices = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++devices;
  closedir(d);
  return devices ? "" : "no RDMA device (/sys/class/infiniband is empty)";
#endif
}

}  // namespace

TEST_CASE("ibverbs: every collective over processes - 2 and 4 ranks (needs an RDMA device)",
          "[coll][processes][ibverbs]") {
  const std::string why = rdmaMissing();
  if (!why.empty()) {
    WARN("ibverbs collectives skipped: " + why);
    return;
  }
  for (int n : {2, 4}) {
    char tmpl[] = "/tmp/weft-ib-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    const std::string dir = tmpl;
    std::string err = runProcesses(
        n, allCollectives,
        {"WEFT_TRANSPORTS=ibverbs", "WEFT_DEBUG=INFO", "WEFT_DEBUG_SUBSYS=INIT,TRANSPORT",
         "WEFT_DEBUG_FILE=" + dir + "/log-%p", "WEFT_TIMEOUT_S=60"});
    std::string log = catFiles(dir + "/log-*");
    wtest::removeTree(dir);
    INFO("n=" << n << "\n" << log);
    REQUIRE(err == "");
    checkAllOn(log, n, "ibverbs");
  }
}
