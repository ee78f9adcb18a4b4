// The transport conformance suite: every transport (self, shm, tcp, and ucx
// over UCX_TLS=tcp and UCX_TLS=sm when built), ranks as threads and as
// processes, must pass these. Transport-specific checks
// (garbage on the tcp port, /dev/shm hygiene) live in tcp_test.cc and
// shm_test.cc.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "core/clock.h"
#include "transport/harness.h"

using namespace weft;
using namespace weft::tpt;

namespace {

// 12,000 and 200,000 bytes: messages that a transport may split into
// fragments below its rendezvous size (UCX's eager multi-fragment protocol).
const size_t kSizes[] = {0, 1, 7, 4096, 12000, 200000, (1u << 20) + 3, 64u << 20};

// Where a rank's receive comes: before its send, after it, or after its send
// and a few milliseconds of progress, so that what the partner sent has
// already been taken in by the transport (UCX: its unexpected queue, where a
// receive of several eager fragments completes inside the posting call).
enum class Order { RecvFirst, SendFirst, RecvLate };
const char* orderName(Order o) {
  switch (o) {
    case Order::RecvFirst:
      return "recv first";
    case Order::SendFirst:
      return "send first";
    case Order::RecvLate:
      return "recv late";
  }
  return "?";
}

// Order::RecvLate's pause: both ranks progress for 20 ms (sends go out,
// arrivals are taken in), then meet.
Status settle(Rank& r) {
  const uint64_t end = nowNs() + 20000000ull;
  while (nowNs() < end) WEFT_RETURN_IF_ERROR(r.transport->progress());
  return r.barrier() ? Status::ok() : Status(WEFT_ERR_TIMEOUT, "barrier after the pause");
}

// Each rank sends every size to its partner and receives the partner's, in
// `order`, with a barrier in between so the other side's posts really come
// first.
Body sizesBody(Order order, size_t maxSize) {
  return [=](Rank& r) -> std::string {
    TP_OK(r.setup());
    int p = r.partner();
    for (size_t len : kSizes) {
      if (len > maxSize) continue;
      Buffer sb(len), rb(len);
      fillPattern(sb.data(), len, seedOf(r.rank, p, len));
      memset(rb.data(), 0xee, len);
      Completion cs, cr;
      uint64_t tag = 0x1000 + len;
      if (order == Order::RecvFirst) {
        TP_POST(r.ep(p).postRecv(rb.data(), len, tag, MemType::Host, &cr));
        TP_CHECK(r.barrier(), "barrier");
        TP_POST(r.ep(p).postSend(sb.data(), len, tag, MemType::Host, &cs));
      } else {
        TP_POST(r.ep(p).postSend(sb.data(), len, tag, MemType::Host, &cs));
        TP_CHECK(r.barrier(), "barrier");
        if (order == Order::RecvLate) TP_OK(settle(r));
        TP_POST(r.ep(p).postRecv(rb.data(), len, tag, MemType::Host, &cr));
      }
      TP_OK(r.drive({&cs, &cr}));
      size_t bad = checkPattern(rb.data(), len, seedOf(p, r.rank, len));
      TP_CHECK(bad == len, "message of %zu bytes differs at byte %zu", len, bad);
      TP_CHECK(r.barrier(), "barrier");
    }
    return "";
  };
}

// 100 messages of mixed sizes (0 B .. 300 KiB) each way, all posted before
// any progress() call, or (RecvLate) the receives only once the sends were
// taken in.
Body manyInFlightBody(Order order) {
  const bool recvFirst = order == Order::RecvFirst;
  return [=](Rank& r) -> std::string {
    TP_OK(r.setup());
    int p = r.partner();
    const int n = 100;
    auto sizeOf = [](int i) -> size_t {
      if (i % 10 == 0) return 0;
      if (i % 17 == 3) return 300000 + static_cast<size_t>(i);
      return static_cast<size_t>(i) * 977 % 20000;
    };
    std::vector<Buffer> sb, rb;
    std::vector<Completion> cs(n), cr(n);
    for (int i = 0; i < n; ++i) {
      sb.emplace_back(sizeOf(i));
      rb.emplace_back(sizeOf(i));
      fillPattern(sb[i].data(), sizeOf(i), seedOf(r.rank, p, i));
    }
    auto postSends = [&]() -> std::string {
      for (int i = 0; i < n; ++i)
        TP_POST(r.ep(p).postSend(sb[i].data(), sizeOf(i), 7000 + i, MemType::Host, &cs[i]));
      return "";
    };
    auto postRecvs = [&]() -> std::string {
      for (int i = 0; i < n; ++i)
        TP_POST(r.ep(p).postRecv(rb[i].data(), sizeOf(i), 7000 + i, MemType::Host, &cr[i]));
      return "";
    };
    std::string err = recvFirst ? postRecvs() : postSends();
    if (!err.empty()) return err;
    if (order == Order::RecvLate) TP_OK(settle(r));
    err = recvFirst ? postSends() : postRecvs();
    if (!err.empty()) return err;
    std::vector<Completion*> all;
    for (int i = 0; i < n; ++i) {
      all.push_back(&cs[i]);
      all.push_back(&cr[i]);
    }
    TP_OK(r.drive(all));
    for (int i = 0; i < n; ++i) {
      size_t bad = checkPattern(rb[i].data(), sizeOf(i), seedOf(p, r.rank, i));
      TP_CHECK(bad == sizeOf(i), "message %d (%zu bytes) differs at byte %zu", i, sizeOf(i), bad);
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  };
}

// Rank 0 sends (sendTag, sendLen) to the partner, which expects (recvTag,
// recvLen) and must get INVALID_USAGE naming the peer and both values.
Body mismatchBody(uint64_t sendTag, size_t sendLen, uint64_t recvTag, size_t recvLen) {
  return [=](Rank& r) -> std::string {
    TP_OK(r.setup());
    int p = r.partner();
    Buffer sb(sendLen), rb(recvLen);
    fillPattern(sb.data(), sendLen, 1);
    Completion cs, cr;
    std::vector<int> none;
    if (r.rank == 0) {
      Status st = r.ep(p).postSend(sb.data(), sendLen, sendTag, MemType::Host, &cs);
      if (r.kind != Kind::Self) {
        // The sender may or may not learn of the mismatch; it must not hang.
        if (!st.isError()) r.drive({&cs}, 3, &none);
        TP_CHECK(r.barrier(), "barrier");
        return "";
      }
    }
    if (r.rank == p || r.rank == 1) {
      Status st = r.ep(p).postRecv(rb.data(), recvLen, recvTag, MemType::Host, &cr);
      if (!st.isError()) st = r.drive({&cr}, 10, &none);
      const std::string why = mismatchProblem(st, p, sendTag, sendLen, recvTag, recvLen);
      TP_CHECK(why.empty(), "%s", why.c_str());
      TP_CHECK(cr.done && cr.status.code() == WEFT_ERR_INVALID_USAGE, "completion not failed");
      if (r.kind != Kind::Self) TP_CHECK(r.barrier(), "barrier");
    }
    return "";
  };
}

}  // namespace

TEST_CASE("transport: every message size with the recv posted before or after the send",
          "[transport]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Self, Kind::Shm, Kind::Tcp})));
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  Order order = GENERATE(Order::RecvFirst, Order::SendFirst, Order::RecvLate);
  INFO(kindName(kind) << " / " << modeName(mode) << " / " << orderName(order));
  expectPass(runGroup(groupSpec(kind, mode, 2), sizesBody(order, 64u << 20)));
}

TEST_CASE("transport: tcp with 1 and 4 sockets per peer", "[transport][tcp]") {
  int nsocks = GENERATE(1, 4);
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(nsocks << " sockets / " << modeName(mode));
  GroupSpec s = groupSpec(Kind::Tcp, mode, 2);
  s.config.nsocksPerPeer = nsocks;
  expectPass(runGroup(
      s, sizesBody(mode == Mode::Threads ? Order::RecvFirst : Order::SendFirst, 64u << 20)));
  expectPass(
      runGroup(s, manyInFlightBody(mode == Mode::Procs ? Order::RecvFirst : Order::SendFirst)));
}

TEST_CASE("transport: shm with small slots (messages span many slots)", "[transport][shm]") {
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(modeName(mode));
  GroupSpec s = groupSpec(Kind::Shm, mode, 2);
  s.config.shmSlots = 3;
  s.config.shmSlotBytes = 4096;
  expectPass(runGroup(s, sizesBody(Order::SendFirst, 2u << 20)));
  expectPass(runGroup(s, manyInFlightBody(Order::RecvFirst)));
}

TEST_CASE("transport: 100 messages in flight before any progress - or received late",
          "[transport]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Self, Kind::Shm, Kind::Tcp})));
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  Order order = GENERATE(Order::RecvFirst, Order::SendFirst, Order::RecvLate);
  INFO(kindName(kind) << " / " << modeName(mode) << " / " << orderName(order));
  expectPass(runGroup(groupSpec(kind, mode, 2), manyInFlightBody(order)));
}

TEST_CASE("transport: activity() grows while a long message moves and never goes back",
          "[transport]") {
  // tcp counts reads and writes that moved bytes, shm the slots pushed and
  // pulled, ucx the events its worker handled; self reports none (0), which
  // the engine reads as "only completions count".
  Kind kind = GENERATE(from_range(withOptional({Kind::Shm, Kind::Tcp, Kind::UcxTcp})));
  INFO(kindName(kind));
  expectPass(runGroup(groupSpec(kind, Mode::Threads, 2), [](Rank& r) -> std::string {
    TP_OK(r.setup());
    const int p = r.partner();
    const size_t len = 16u << 20;
    Buffer sb(len), rb(len);
    fillPattern(sb.data(), len, seedOf(r.rank, p, len));
    Completion cs, cr;
    TP_POST(r.ep(p).postRecv(rb.data(), len, 0x77, MemType::Host, &cr));
    TP_CHECK(r.barrier(), "barrier");
    const uint64_t before = r.transport->activity();
    TP_POST(r.ep(p).postSend(sb.data(), len, 0x77, MemType::Host, &cs));
    uint64_t last = before, rounds = 0;
    Deadline dl(20);
    while (!(cs.done && cr.done) && !dl.expired()) {
      TP_OK(r.transport->progress());
      const uint64_t a = r.transport->activity();
      TP_CHECK(a >= last, "activity went back from %llu to %llu",
               static_cast<unsigned long long>(last), static_cast<unsigned long long>(a));
      last = a;
      ++rounds;
    }
    TP_CHECK(cs.done && cr.done, "16 MiB exchange did not finish in 20 s");
    TP_OK(cr.status);
    TP_CHECK(checkPattern(rb.data(), len, seedOf(p, r.rank, len)) == len, "payload differs");
    // 16 MiB cannot cross a socket in one read and one write.
    TP_CHECK(last - before >= 2, "activity grew by %llu over %llu rounds",
             static_cast<unsigned long long>(last - before),
             static_cast<unsigned long long>(rounds));
    TP_CHECK(r.barrier(), "barrier");
    return "";
  }));
}

TEST_CASE("transport: tag and length mismatches are reported with both values", "[transport]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Self, Kind::Shm, Kind::Tcp})));
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(kindName(kind) << " / " << modeName(mode));
  SECTION("tag") {
    expectPass(runGroup(groupSpec(kind, mode, 2), mismatchBody(0x5a5, 100, 0x6b6, 100)));
  }
  SECTION("length") {
    expectPass(runGroup(groupSpec(kind, mode, 2), mismatchBody(0x77, 100, 0x77, 200)));
  }
  SECTION("large length") {
    GroupSpec s = groupSpec(kind, mode, 2);
    s.config.nsocksPerPeer = 4;
    expectPass(runGroup(s, mismatchBody(0x88, 1u << 20, 0x88, 2u << 20)));
  }
}

TEST_CASE("transport: groups of 3 ranks with everyone sending to everyone", "[transport]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Shm, Kind::Tcp})));
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(kindName(kind) << " / " << modeName(mode));
  expectPass(runGroup(groupSpec(kind, mode, 3), [](Rank& r) -> std::string {
    TP_OK(r.setup());
    auto sizeOf = [](int src, int dst, int i) -> size_t {
      return i == 0   ? 0
             : i == 1 ? (1u << 20) + 3 + static_cast<size_t>(src)
                      : 1000u * (src + 1) + dst;
    };
    const int msgs = 3;
    std::vector<Buffer> sb, rb;
    std::vector<Completion> cs(r.nranks * msgs), cr(r.nranks * msgs);
    std::vector<Completion*> all;
    sb.reserve(r.nranks * msgs);
    rb.reserve(r.nranks * msgs);
    for (int p = 0; p < r.nranks; ++p)
      for (int i = 0; i < msgs; ++i) {
        sb.emplace_back(sizeOf(r.rank, p, i));
        rb.emplace_back(sizeOf(p, r.rank, i));
      }
    for (int p : r.peers())
      for (int i = 0; i < msgs; ++i) {
        int k = p * msgs + i;
        fillPattern(sb[k].data(), sb[k].len, seedOf(r.rank, p, i));
        TP_POST(r.ep(p).postRecv(rb[k].data(), rb[k].len, 40 + i, MemType::Host, &cr[k]));
        TP_POST(r.ep(p).postSend(sb[k].data(), sb[k].len, 40 + i, MemType::Host, &cs[k]));
        all.push_back(&cs[k]);
        all.push_back(&cr[k]);
      }
    TP_OK(r.drive(all));
    for (int p : r.peers())
      for (int i = 0; i < msgs; ++i) {
        int k = p * msgs + i;
        size_t bad = checkPattern(rb[k].data(), rb[k].len, seedOf(p, r.rank, i));
        TP_CHECK(bad == rb[k].len, "message %d from rank %d differs at byte %zu", i, p, bad);
      }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  }));
}

TEST_CASE("transport: a peer killed with SIGKILL is reported and never hangs the survivor",
          "[transport][processes]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Shm, Kind::Tcp})));
  bool bigSend = GENERATE(true, false);
  INFO(kindName(kind) << (bigSend ? " / survivor blocked in a 64 MiB send"
                                  : " / survivor in a recv"));
  GroupSpec s = groupSpec(kind, Mode::Procs, 2);
  s.mayDieBySigkill = 1;
  expectPass(runGroup(s, [bigSend](Rank& r) -> std::string {
    TP_OK(r.setup());
    TP_CHECK(r.barrier(), "barrier");
    if (r.rank == 1) raise(SIGKILL);
    Buffer big(64u << 20), small(4096);
    Completion c;
    double t0 = nowSeconds();
    Status st;
    if (bigSend) {
      fillPattern(big.data(), big.len, 3);
      st = r.ep(1).postSend(big.data(), big.len, 1, MemType::Host, &c);
    } else {
      st = r.ep(1).postRecv(small.data(), small.len, 1, MemType::Host, &c);
    }
    if (!st.isError()) st = r.drive({&c}, 15);
    double took = nowSeconds() - t0;
    TP_CHECK(st.code() == WEFT_ERR_REMOTE, "got code %d: %s", static_cast<int>(st.code()),
             st.message().c_str());
    TP_CHECK(contains(st.message(), "rank 1"), "peer not named: %s", st.message().c_str());
    TP_CHECK(took < 5, "took %.1f s to notice", took);
    // Later posts fail at once instead of hanging.
    Completion c2;
    Status again = r.ep(1).postRecv(small.data(), small.len, 2, MemType::Host, &c2);
    if (!again.isError()) again = r.drive({&c2}, 5);
    TP_CHECK(again.isError(), "a post after the loss did not fail");
    return "";
  }));
}

TEST_CASE("transport: shutdown drops pending work and later posts fail", "[transport]") {
  Kind kind = GENERATE(from_range(withOptional({Kind::Self, Kind::Shm, Kind::Tcp})));
  INFO(kindName(kind));
  expectPass(runGroup(groupSpec(kind, Mode::Threads, 2), [](Rank& r) -> std::string {
    TP_OK(r.setup());
    TP_CHECK(r.barrier(), "barrier");
    char buf[64];
    Completion c;
    TP_POST(r.ep(r.partner()).postRecv(buf, sizeof buf, 9, MemType::Host, &c));
    r.transport->shutdown();
    TP_OK(r.transport->progress());
    TP_CHECK(!c.done, "a dropped completion fired");
    Completion c2;
    Status st = r.ep(r.partner()).postSend(buf, sizeof buf, 9, MemType::Host, &c2);
    TP_CHECK(st.isError(), "post after shutdown returned %d", static_cast<int>(st.code()));
    TP_CHECK(r.barrier(), "barrier");
    r.eps.clear();
    r.transport.reset();
    return "";
  }));
}

TEST_CASE("transport: canReach and device memory", "[transport]") {
  TransportContext ctx;
  ctx.rank = 0;
  ctx.nranks = 3;
  ctx.peers.resize(3);
  for (int i = 0; i < 3; ++i) {
    ctx.peers[i].rank = i;
    ctx.peers[i].hostHash = i < 2 ? 11 : 22;
  }
  auto self = makeSelfTransport(ctx);
  auto shm = makeShmTransport(ctx);
  auto tcp = makeTcpTransport(ctx);
  CHECK(std::string(self->name()) == "self");
  CHECK(std::string(shm->name()) == "shm");
  CHECK(std::string(tcp->name()) == "tcp");
  CHECK(self->canReach(ctx.peers[0]));
  CHECK_FALSE(self->canReach(ctx.peers[1]));
  CHECK_FALSE(shm->canReach(ctx.peers[0]));
  CHECK(shm->canReach(ctx.peers[1]));
  CHECK_FALSE(shm->canReach(ctx.peers[2]));
  CHECK_FALSE(tcp->canReach(ctx.peers[0]));
  CHECK(tcp->canReach(ctx.peers[1]));
  CHECK(tcp->canReach(ctx.peers[2]));
  CHECK(tcp->pollFd() == -1);  // nothing to wait on before connect
  std::string blob;
  REQUIRE(self->localAddress(&blob).isOk());
  std::vector<std::unique_ptr<Endpoint>> eps;
  REQUIRE(self->connect({0}, {blob}, &eps).isOk());
  char buf[8];
  Completion c;
  CHECK(eps[0]->postSend(buf, 8, 1, MemType::Cuda, &c).code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(self->connect({1}, {blob, blob}, &eps).isError());
}
