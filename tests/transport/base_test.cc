// transports/base: the pieces every transport shares, on their own (the
// conformance suite runs them inside the transports).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/harness.h"
#include "transports/base/blob.h"
#include "transports/base/posted_ops.h"
#include "transports/base/ring_queue.h"

using namespace weft;

namespace {

struct Head {
  uint32_t magic;
  int32_t n;
};

}  // namespace

TEST_CASE("base: a blob reads back what was written and refuses short blobs", "[transport][base]") {
  std::vector<std::string> blobs(3);
  BlobWriter(&blobs[1])
      .put(Head{0x57, 3})
      .putArray(std::vector<uint64_t>{10, 11, 12})
      .bytes("xy", 2);
  BlobReader in("tcp", blobs, 1);
  Head h{};
  REQUIRE(in.get(&h));
  CHECK(h.magic == 0x57);
  CHECK(h.n == 3);
  CHECK(in.left() == 3 * sizeof(uint64_t) + 2);
  CHECK(in.skip(sizeof(uint64_t)));
  uint64_t two[2] = {0, 0};
  REQUIRE(in.getArray(two, 2));
  CHECK(two[0] == 11);
  CHECK(two[1] == 12);
  const char* rest = in.take(2);
  REQUIRE(rest != nullptr);
  CHECK(std::string(rest, 2) == "xy");
  CHECK(in.atEnd());
  CHECK_FALSE(in.get(&h));  // nothing left: never reads past the end

  BlobReader empty("tcp", blobs, 0), outside("tcp", blobs, -1);
  CHECK_FALSE(empty.get(&h));
  CHECK_FALSE(outside.get(&h));
  CHECK_FALSE(outside.atEnd());
  uint64_t many[4];
  BlobReader shortArray("tcp", blobs, 1);
  CHECK(shortArray.skip(sizeof(Head)));
  CHECK_FALSE(shortArray.getArray(many, 4));
  const Status bad = outside.bad();
  CHECK(bad.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(bad.message() == "tcp transport: bad address blob of rank -1");
}

TEST_CASE("base: a peer refuses posts in order: shut down, failed, memory", "[transport][base]") {
  PeerState s("tcp", 0);
  CHECK(s.checkPost(MemType::Host).isOk());
  CHECK_FALSE(s.refuses(MemType::Host));
  CHECK(s.refuses(MemType::Cuda));
  CHECK(s.checkPost(MemType::Cuda).message() == "tcp transport: device memory is not supported");

  PeerState dev("cuda_ipc", 0);
  dev.setMemory(false, true, "cuda_ipc transport: host memory is not supported (use shm)");
  CHECK(dev.checkPost(MemType::Cuda).isOk());
  CHECK(dev.checkPost(MemType::Host).code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(dev.checkPost(MemType::Host).message() ==
        "cuda_ipc transport: host memory is not supported (use shm)");

  CHECK(s.fail(Status(WEFT_ERR_REMOTE, "first")));
  CHECK_FALSE(s.fail(Status(WEFT_ERR_REMOTE, "second")));  // the first error stays
  CHECK(s.checkPost(MemType::Host).message() == "first");
  CHECK(s.refuses(MemType::Host));
  s.abort();
  CHECK(s.checkPost(MemType::Host).code() == WEFT_ERR_ABORTED);
  CHECK(s.checkPost(MemType::Host).message() == "tcp transport: shut down");
}

TEST_CASE("base: finishAll completes every pending op with the error", "[transport][base]") {
  struct Op {
    Completion* c;
  };
  Completion a, b;
  RingQueue<Op> q;
  q.push_back({&a});
  q.push_back({nullptr});  // a part without a completion of its own
  q.push_back({&b});
  finishAll(q, Status(WEFT_ERR_REMOTE, "lost"));
  CHECK(q.empty());
  CHECK((a.done && a.status.message() == "lost"));
  CHECK((b.done && b.status.message() == "lost"));
}

TEST_CASE("base: a mismatch names both ranks, both calls and both lengths", "[transport][base]") {
  const Status st = mismatchError("tcp", 1, 0, "rank 0 (10.0.0.2:4567)", 3, MsgSig{0x6b6, 200},
                                  MsgSig{0x5a5, 100});
  CHECK(st.code() == WEFT_ERR_INVALID_USAGE);
  CHECK(st.message() ==
        "mismatched collectives between rank 1 and rank 0 (10.0.0.2:4567), tcp message #3: "
        "rank 1 called tag 0x6b6 (200 bytes), rank 0 called tag 0x5a5 (100 bytes)");
  CHECK(mismatchError("ucx", 1, 0, "", 0, MsgSig{1, 1}, MsgSig{1, 2})
            .message()
            .find("between rank 1 and rank 0, ucx message #0") != std::string::npos);
  const Status self = mismatchError("self", 2, 2, "", 5, MsgSig{0x77, 200}, MsgSig{0x77, 100});
  CHECK(self.message() ==
        "mismatched messages of rank 2 to itself, self message #5: receive of tag 0x77 "
        "(200 bytes), send of tag 0x77 (100 bytes)");
}

TEST_CASE("base: every transport says which link class it is", "[transport][base]") {
  TransportContext ctx;
  ctx.nranks = 2;
  ctx.peers.resize(2);
  struct Want {
    tpt::Kind kind;
    LinkScope scope;
    bool hostArena;
  };
  const Want wants[] = {{tpt::Kind::Self, LinkScope::Self, false},
                        {tpt::Kind::Shm, LinkScope::IntraHost, true},
                        {tpt::Kind::CudaIpc, LinkScope::IntraHost, false},
                        {tpt::Kind::Tcp, LinkScope::InterHost, false},
                        {tpt::Kind::UcxTcp, LinkScope::InterHost, false},
                        {tpt::Kind::Ibverbs, LinkScope::InterHost, false}};
  for (const Want& w : wants) {
    INFO(tpt::kindName(w.kind));
    std::unique_ptr<Transport> t = tpt::makeTransport(w.kind, ctx);
    if (!t) continue;  // not built here
    CHECK(t->caps().scope == w.scope);
    CHECK(t->caps().hostArena == w.hostArena);
  }
}
