// tcp-specific checks: strangers on the listening port are refused while the
// real peers still connect; a connect timeout names the missing ranks;
// garbage from an established peer is reported; pollFd() wakes up.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "net/socket.h"
#include "transport/harness.h"
#include "transports/tcp/tcp_connect.h"
#include "transports/tcp/tcp_wire.h"

using namespace weft;
using namespace weft::tpt;

namespace {

net::Address blobAddress(const std::string& blob) {
  tcp::Blob b;
  memcpy(&b, blob.data(), sizeof b);
  net::Address a;
  net::Address::unpack(b.addr, &a);
  return a;
}

int connectTo(const net::Address& a) {
  int fd = -1;
  Status st = net::connectTo(a, Deadline(5), &fd);
  return st.isOk() ? fd : -1;
}

// Rank `rank`'s hello to rank 1 on stream `sock`.
tcp::Hello hello(const TransportContext& ctx, int rank, int sock) {
  return tcp::makeHello(ctx.key, ctx.commId, rank, 1, sock, ctx.config.nsocksPerPeer);
}

// True when the other end closed (EOF or reset) within `s` seconds.
bool closedByPeer(int fd, double s) {
  Deadline dl(s);
  char buf[256];
  while (!dl.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, dl.remainingMs()) <= 0) return false;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("tcp: strangers on the listening port are refused while real peers connect",
          "[transport][tcp]") {
  Mode mode = GENERATE(Mode::Threads, Mode::Procs);
  INFO(modeName(mode));
  GroupSpec s = groupSpec(Kind::Tcp, mode);
  expectPass(runGroup(s, [](Rank& r) -> std::string {
    std::vector<int> junk;
    std::string why;
    Status st = r.setup([&](const std::string& blob) {
      if (r.rank != 1) return;  // rank 1 accepts (rank 0 connects to it)
      net::Address a = blobAddress(blob);
      // Random bytes.
      int fd = connectTo(a);
      char noise[200];
      for (size_t i = 0; i < sizeof noise; ++i) noise[i] = static_cast<char>(randomU64());
      if (fd >= 0) send(fd, noise, sizeof noise, MSG_NOSIGNAL);
      junk.push_back(fd);
      // Silence.
      junk.push_back(connectTo(a));
      // Good magic: another job's key; another communicator; a rank that
      // does not connect here; a field changed under a good MAC (a forgery
      // of stream 1 from stream 0's hello); a truncated hello.
      TransportContext other = r.ctx;
      other.key = jobKey(randomU64());
      tcp::Hello bad[5] = {hello(other, 0, 0), hello(r.ctx, 0, 1), hello(r.ctx, 1, 0),
                           hello(r.ctx, 0, 0), hello(r.ctx, 0, 0)};
      bad[1].commId ^= 1;
      bad[3].sockIndex = 1;
      for (int i = 0; i < 5; ++i) {
        fd = connectTo(a);
        if (fd >= 0) send(fd, &bad[i], i == 4 ? 12 : sizeof bad[i], MSG_NOSIGNAL);
        if (fd >= 0 && i == 4) shutdown(fd, SHUT_WR);
        junk.push_back(fd);
      }
    });
    TP_OK(st);
    for (int fd : junk) TP_CHECK(fd >= 0, "could not connect a stranger");
    // The real connection works.
    int p = r.partner();
    char out[100], in[100];
    memset(out, r.rank, sizeof out);
    Completion cs, cr;
    TP_POST(r.ep(p).postRecv(in, sizeof in, 3, MemType::Host, &cr));
    TP_POST(r.ep(p).postSend(out, sizeof out, 3, MemType::Host, &cs));
    TP_OK(r.drive({&cs, &cr}));
    TP_CHECK(in[0] == p && in[99] == p, "wrong contents");
    for (size_t i = 0; i < junk.size(); ++i) {
      TP_CHECK(closedByPeer(junk[i], 5), "stranger %zu was not closed", i);
      close(junk[i]);
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  }));
}

TEST_CASE("tcp: a connect timeout names the ranks still missing", "[transport][tcp]") {
  int absent = GENERATE(0, 1);
  INFO("absent rank " << absent);
  GroupSpec s = groupSpec(Kind::Tcp);
  s.config.bootstrapTimeoutS = 1;
  expectPass(runGroup(s, [absent](Rank& r) -> std::string {
    r.transport = makeTransport(r.kind, r.ctx);
    std::string blob;
    TP_OK(r.transport->localAddress(&blob));
    std::vector<std::string> blobs;
    TP_CHECK(r.allgather(blob, &blobs), "exchange");
    if (r.rank != absent) {
      double t0 = nowSeconds();
      Status st = r.transport->connect(r.peers(), blobs, &r.eps);
      TP_CHECK(st.code() == WEFT_ERR_TIMEOUT, "got %d: %s", static_cast<int>(st.code()),
               st.message().c_str());
      TP_CHECK(contains(st.message(), strFormat("still missing: %d ", absent)), "%s",
               st.message().c_str());
      TP_CHECK(nowSeconds() - t0 < 3, "timeout took %.1f s", nowSeconds() - t0);
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  }));
}

TEST_CASE("tcp: garbage from a connected peer is reported and pollFd wakes up",
          "[transport][tcp]") {
  // The test plays rank 0 by hand against a real rank 1.
  TransportContext ctx;
  ctx.rank = 1;
  ctx.nranks = 2;
  ctx.key = jobKey(randomU64());
  ctx.commId = randomU64();
  ctx.config = GroupSpec::defaultConfig();
  ctx.config.nsocksPerPeer = 2;
  ctx.peers.resize(2);
  for (int i = 0; i < 2; ++i) ctx.peers[i].rank = i;
  auto t = makeTcpTransport(ctx);
  std::string blob;
  REQUIRE(t->localAddress(&blob).isOk());
  net::Address a = blobAddress(blob);
  int fds[2];
  for (int s = 0; s < 2; ++s) {
    fds[s] = connectTo(a);
    REQUIRE(fds[s] >= 0);
    tcp::Hello h = hello(ctx, 0, s);
    REQUIRE(send(fds[s], &h, sizeof h, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof h));
  }
  std::vector<std::unique_ptr<Endpoint>> eps;
  REQUIRE(t->connect({0}, {blob, blob}, &eps).isOk());
  REQUIRE(t->pollFd() >= 0);
  for (int s = 0; s < 2; ++s) {
    tcp::Hello reply;
    REQUIRE(recv(fds[s], &reply, sizeof reply, MSG_WAITALL) == static_cast<ssize_t>(sizeof reply));
    CHECK(reply.rank == 1);
    CHECK(reply.sockIndex == s);
    CHECK(reply.to == 0);
    CHECK(macEqual(reply.mac, tcp::helloMac(ctx.key, reply).data()));
  }
  // A well-formed first message on stream 0 (message 0 -> stream 0).
  char in[16];
  Completion c1;
  REQUIRE(eps[0]->postRecv(in, sizeof in, 0x42, MemType::Host, &c1).code() == WEFT_IN_PROGRESS);
  tcp::PartHeader h{tcp::kDataMagic, 0, 0x42, 16, 16, 0};
  char payload[16] = "fifteen chars..";
  send(fds[0], &h, sizeof h, MSG_NOSIGNAL);
  send(fds[0], payload, sizeof payload, MSG_NOSIGNAL);
  pollfd pfd{t->pollFd(), POLLIN, 0};
  CHECK(poll(&pfd, 1, 5000) == 1);
  Deadline dl(5);
  while (!c1.done && !dl.expired()) REQUIRE(t->progress().isOk());
  REQUIRE(c1.done);
  CHECK(c1.status.isOk());
  CHECK(memcmp(in, payload, 16) == 0);
  // Then garbage on stream 1: message 1, of 64 KiB, goes there (smaller
  // messages all take stream 0; larger ones rotate, starting at seq % 2).
  Completion c2;
  std::vector<char> big(tcp::kMinPartBytes);
  REQUIRE(tcp::firstStream(big.size(), 1, 2) == 1);
  REQUIRE(tcp::firstStream(16, 1, 2) == 0);
  REQUIRE(eps[0]->postRecv(big.data(), big.size(), 0x43, MemType::Host, &c2).code() ==
          WEFT_IN_PROGRESS);
  char junk[64];
  memset(junk, 0x99, sizeof junk);
  send(fds[1], junk, sizeof junk, MSG_NOSIGNAL);
  Status st;
  Deadline dl2(5);
  while (!c2.done && !dl2.expired() && st.isOk()) st = t->progress();
  CHECK(st.code() == WEFT_ERR_REMOTE);
  CHECK(contains(st.message(), "garbage from rank 0"));
  CHECK(c2.done);
  CHECK(c2.status.code() == WEFT_ERR_REMOTE);
  CHECK(t->checkPeer(0).isError());
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("tcp: a closed connection is reported with the peer's address", "[transport][tcp]") {
  GroupSpec s = groupSpec(Kind::Tcp);
  expectPass(runGroup(s, [](Rank& r) -> std::string {
    TP_OK(r.setup());
    TP_CHECK(r.barrier(), "barrier");
    if (r.rank == 1) {
      r.eps.clear();
      r.transport.reset();  // closes every socket
      TP_CHECK(r.barrier(), "barrier");
      return "";
    }
    TP_CHECK(r.barrier(), "barrier");
    char buf[32];
    Completion c;
    TP_POST(r.ep(1).postRecv(buf, sizeof buf, 1, MemType::Host, &c));
    Status st = r.drive({&c}, 5);
    TP_CHECK(st.code() == WEFT_ERR_REMOTE, "got %d: %s", static_cast<int>(st.code()),
             st.message().c_str());
    TP_CHECK(contains(st.message(), "connection to rank 1 (127.0.0.1:"), "%s",
             st.message().c_str());
    TP_CHECK(contains(st.message(), "lost"), "%s", st.message().c_str());
    return "";
  }));
}
