// The ring under attack: the test plays rank 1 of 2 by hand against a real
// rank 0, throwing scanners and bad hellos at rank 0's ring port before the
// right one, then a frame from the wrong round.
#include <catch2/catch.hpp>
#include <cstring>

#include "bootstrap/wire.h"
#include "test_util.h"

using namespace weft;
using namespace weft::test;

namespace {

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

int dial(const net::Address& a) {
  int fd = -1;
  REQUIRE(net::connectTo(a, Deadline(5), &fd).isOk());
  return fd;
}

}  // namespace

TEST_CASE("hostile: garbage at a rank's ring port - then a frame of the wrong round") {
  Config cfg = loConfig(10);
  weft_unique_id_t id;
  REQUIRE(createUniqueId(cfg, &id).isOk());
  const uint64_t secret = secretOf(id);

  // The real rank 0.
  Status createSt, gatherSt;
  std::thread rank0([&] {
    std::unique_ptr<Bootstrap> b;
    createSt = Bootstrap::create(id, 0, 2, cfg, &b);
    if (!createSt.isOk()) return;
    std::vector<std::string> all;
    gatherSt = b->allgather("hello", &all, 5);
  });

  // Fake rank 1: its own ring port, a hello to the root, the table.
  net::Address lo;
  REQUIRE(net::Address::parse("127.0.0.1:0", &lo).isOk());
  int lfd = -1;
  net::Address mine;
  REQUIRE(net::listenOn(lo, 8, &lfd, &mine).isOk());
  int rootFd = dial(rootOf(id));
  Nonce rootNonce{}, myNonce{};
  boot::RootHello h =
      helloFor(rootFd, secret, 1, 2, mine.toString().c_str(), &rootNonce, &myNonce);
  REQUIRE(net::sendAll(rootFd, &h, sizeof h, Deadline(5)).isOk());
  boot::RootReply r{};
  REQUIRE(net::recvAll(rootFd, &r, sizeof r, Deadline(5)).isOk());
  REQUIRE(r.code == 0);
  REQUIRE(r.nranks == 2);
  std::string payload(r.payloadBytes, '\0');
  REQUIRE(net::recvAll(rootFd, payload.data(), payload.size(), Deadline(5)).isOk());
  // The root's MAC answers our nonce: it holds the secret.
  uint8_t rmac[kMacBytes];
  REQUIRE(net::recvAll(rootFd, rmac, sizeof rmac, Deadline(5)).isOk());
  std::string frame(reinterpret_cast<const char*>(&r), sizeof r);
  frame += payload;
  CHECK(macEqual(rmac, boot::rootReplyMac(jobKey(secret), myNonce.data(), rootNonce.data(),
                                          frame.data(), frame.size())
                           .data()));
  net::closeFd(&rootFd);
  Nonce session{};
  memcpy(session.data(), payload.data(), kNonceBytes);
  const std::string table = payload.substr(kNonceBytes);
  net::Address addr0;
  REQUIRE(net::Address::unpack(table.data(), &addr0));
  net::Address back;
  REQUIRE(net::Address::unpack(table.data() + 32, &back));
  CHECK(back.toString() == mine.toString());

  double t0 = nowSeconds();
  // Rank 0's ring port: a silent scanner, garbage, a wrong secret, the
  // wrong rank, and finally the right hello.
  int silent = dial(addr0);
  int garbage = dial(addr0);
  std::string junk(100, 'z');
  net::sendAll(garbage, junk.data(), junk.size(), Deadline(2));
  auto ringHello = [&](uint64_t s, const Nonce& sess, int rank) {
    boot::RingHello rh{boot::kRingHelloMagic, boot::kWireVersion, rank, 2, {}};
    const Mac m = boot::ringHelloMac(jobKey(s), sess, rank, 2);
    memcpy(rh.mac, m.data(), kMacBytes);
    return rh;
  };
  int wrongSecret = dial(addr0);
  boot::RingHello rh = ringHello(secret + 1, session, 1);
  net::sendAll(wrongSecret, &rh, sizeof rh, Deadline(2));
  // A hello of another ring (a replay from another rendezvous).
  Nonce otherSession = session;
  otherSession[0] ^= 1;
  int replay = dial(addr0);
  rh = ringHello(secret, otherSession, 1);
  net::sendAll(replay, &rh, sizeof rh, Deadline(2));
  int wrongRank = dial(addr0);
  rh = ringHello(secret, session, 0);
  net::sendAll(wrongRank, &rh, sizeof rh, Deadline(2));
  int toRank0 = dial(addr0);
  rh = ringHello(secret, session, 1);
  REQUIRE(net::sendAll(toRank0, &rh, sizeof rh, Deadline(2)).isOk());

  // Rank 0 connects to us (its next) with its own hello.
  int fromRank0 = -1;
  REQUIRE(net::acceptOne(lfd, Deadline(5), &fromRank0, nullptr).isOk());
  boot::RingHello got{};
  REQUIRE(net::recvAll(fromRank0, &got, sizeof got, Deadline(5)).isOk());
  CHECK(got.magic == boot::kRingHelloMagic);
  CHECK(got.rank == 0);
  CHECK(macEqual(got.mac, boot::ringHelloMac(jobKey(secret), session, 0, 2).data()));

  // The bad ones were closed by rank 0.
  char c;
  CHECK(net::recvAll(garbage, &c, 1, Deadline(5)).code() == WEFT_ERR_REMOTE);
  CHECK(net::recvAll(wrongSecret, &c, 1, Deadline(5)).code() == WEFT_ERR_REMOTE);
  CHECK(net::recvAll(replay, &c, 1, Deadline(5)).code() == WEFT_ERR_REMOTE);
  CHECK(net::recvAll(wrongRank, &c, 1, Deadline(5)).code() == WEFT_ERR_REMOTE);

  // Rank 0's allgather frame arrives; we answer with the wrong round.
  boot::FrameHeader fh{};
  REQUIRE(net::recvAll(fromRank0, &fh, sizeof fh, Deadline(5)).isOk());
  CHECK(fh.magic == boot::kFrameMagic);
  CHECK(fh.origin == 0);
  CHECK(fh.round == 1);
  REQUIRE(fh.len == 5);
  std::string blob(5, '\0');
  REQUIRE(net::recvAll(fromRank0, blob.data(), blob.size(), Deadline(5)).isOk());
  CHECK(blob == "hello");
  boot::FrameHeader bad{boot::kFrameMagic, 1, 7, 0};
  REQUIRE(net::sendAll(toRank0, &bad, sizeof bad, Deadline(5)).isOk());

  rank0.join();
  CHECK(nowSeconds() - t0 < 3);  // the silent scanner held nothing up
  INFO(createSt.message());
  REQUIRE(createSt.isOk());
  INFO(gatherSt.message());
  CHECK(gatherSt.code() == WEFT_ERR_INTERNAL);
  CHECK(contains(gatherSt.message(), "expected round 1 origin rank 1, got round 7"));
  for (int* fd : {&silent, &garbage, &wrongSecret, &replay, &wrongRank, &toRank0, &fromRank0, &lfd})
    net::closeFd(fd);
}
