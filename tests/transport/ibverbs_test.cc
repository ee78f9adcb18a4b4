// The ibverbs transport on this machine: with an RDMA device the
// conformance suite (conformance.cc) includes it; without one it must say
// so, clearly, instead of failing obscurely. Which of the two ran is
// printed, so nobody mistakes a skip for a run.
#include <catch2/catch.hpp>

#include "transport/harness.h"

using namespace weft;
using namespace weft::tpt;

TEST_CASE("ibverbs: runs where ibv_get_device_list finds a device, else says why not",
          "[transport][ibverbs]") {
  const std::string why = ibverbsUnavailable();
  if (why.empty()) {
    WARN("ibverbs: RDMA device present; the conformance suite includes ibverbs");
    SUCCEED();
    return;
  }
  WARN("ibverbs conformance skipped: " + why);
#ifdef WEFT_HAVE_IBVERBS
  TransportContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.peers.resize(2);
  auto t = makeIbverbsTransport(ctx);
  std::string blob;
  Status st = t->localAddress(&blob);
  CHECK(st.isError());
  CHECK(st.message().find("found no RDMA device") != std::string::npos);
  CHECK(blob.empty());
#endif
}
