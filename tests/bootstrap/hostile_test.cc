// Bootstrap under attack and failure: port scanners and garbage at the root,
// missing ranks, duplicate ranks, wrong secrets, unreachable roots, and a
// rank killed with SIGKILL.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <atomic>
#include <random>

#include "bootstrap/wire.h"
#include "test_util.h"

using namespace weft;
using namespace weft::test;

namespace {

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

int rawConnect(const net::Address& a, double timeoutS = 5) {
  int fd = -1;
  Status st = net::connectTo(a, Deadline(timeoutS), &fd);
  return st.isOk() ? fd : -1;
}

std::string randomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("hostile: scanners and garbage at the root do not stop the rendezvous") {
  Config cfg = loConfig(10);
  weft_unique_id_t id;
  REQUIRE(createUniqueId(cfg, &id).isOk());
  const net::Address root = rootOf(id);
  const uint64_t secret = secretOf(id);
  const int n = 4;
  std::mt19937 rng(7);
  std::vector<int> fds;

  // Before the ranks: a silent scanner, garbage, a partial hello, a wrong
  // secret, an out-of-range rank.
  fds.push_back(rawConnect(root));  // silent
  int g = rawConnect(root);
  std::string junk = randomBytes(rng, 300);
  junk[0] = 'G';  // never the hello magic
  net::sendAll(g, junk.data(), junk.size(), Deadline(2));
  fds.push_back(g);
  int partial = rawConnect(root);
  boot::RootHello h = helloFor(partial, secret, 0, n);
  net::sendAll(partial, &h, 10, Deadline(2));
  fds.push_back(partial);
  int wrong = rawConnect(root);
  h = helloFor(wrong, secret ^ 1, 1, n);
  net::sendAll(wrong, &h, sizeof h, Deadline(2));
  fds.push_back(wrong);
  int range = rawConnect(root);
  h = helloFor(range, secret, 7, n);  // valid for nobody: 7 >= n
  net::sendAll(range, &h, sizeof h, Deadline(2));
  for (int fd : fds) REQUIRE(fd >= 0);
  REQUIRE(range >= 0);

  // The out-of-range rank is told why (it had the right secret).
  boot::RootReply reply{};
  REQUIRE(net::recvAll(range, &reply, sizeof reply, Deadline(5)).isOk());
  CHECK(reply.magic == boot::kRootReplyMagic);
  CHECK(reply.code == WEFT_ERR_INVALID_USAGE);
  std::string why(reply.payloadBytes, '\0');
  REQUIRE(net::recvAll(range, why.data(), why.size(), Deadline(5)).isOk());
  CHECK(contains(why, "rank 7 out of range for 4 ranks"));
  net::closeFd(&range);
  // The wrong secret is told that it failed authentication, then closed.
  REQUIRE(net::recvAll(wrong, &reply, sizeof reply, Deadline(5)).isOk());
  CHECK(reply.code == WEFT_ERR_INVALID_USAGE);
  std::string whyWrong(reply.payloadBytes, '\0');
  REQUIRE(net::recvAll(wrong, whyWrong.data(), whyWrong.size(), Deadline(5)).isOk());
  CHECK(contains(whyWrong, "authentication failed"));
  uint8_t mac[kMacBytes];
  REQUIRE(net::recvAll(wrong, mac, sizeof mac, Deadline(5)).isOk());
  char c;
  CHECK(net::recvAll(wrong, &c, 1, Deadline(5)).code() == WEFT_ERR_REMOTE);

  // While the ranks join: more scanners and garbage from another thread,
  // which has a head start of a dozen connections.
  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::thread noise([&] {
    std::mt19937 r2(11);
    std::vector<int> mine;
    for (int i = 0; i < 200 && !stop; ++i) {
      int fd = rawConnect(root, 0.2);
      if (fd < 0) break;  // the root finished and closed its port
      if (i % 3 != 0) {
        std::string j = randomBytes(r2, 1 + r2() % 200);
        j[0] = 'N';
        net::sendAll(fd, j.data(), j.size(), Deadline(1));
      }
      mine.push_back(fd);
      ++made;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    made = 1000;
    for (int& fd : mine) net::closeFd(&fd);
  });
  while (made < 12) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double t0 = nowSeconds();
  std::vector<Status> sts =
      runRankThreads(id, n, cfg, [](Bootstrap& b) { return exerciseRing(b, 2); });
  double took = nowSeconds() - t0;
  stop = true;
  noise.join();
  for (size_t r = 0; r < sts.size(); ++r) {
    INFO("rank " << r << ": " << sts[r].message());
    CHECK(sts[r].isOk());
  }
  CHECK(took < 3.0);  // nowhere near the 5 s hello timeout
  for (int& fd : fds) net::closeFd(&fd);
}

TEST_CASE("failures: missing ranks - duplicate ranks - wrong secret - no root") {
  const double T = 0.8;
  Config cfg = loConfig(T);
  double t0 = nowSeconds();

  // Scenario A: 3 ranks expected, 2 join. B: 4 expected, 2 join.
  weft_unique_id_t idA, idB, idC, idD;
  REQUIRE(createUniqueId(cfg, &idA).isOk());
  REQUIRE(createUniqueId(cfg, &idB).isOk());
  // C: rank 0 twice among 2 ranks.
  REQUIRE(createUniqueId(cfg, &idC).isOk());
  // D: a root that nobody serves.
  uint16_t port;
  {
    net::Address a;
    net::Address::parse("127.0.0.1:0", &a);
    int fd = -1;
    net::Address bound;
    REQUIRE(net::listenOn(a, 1, &fd, &bound).isOk());
    port = bound.port();
    net::closeFd(&fd);
  }
  const std::string deadRoot = "127.0.0.1:" + std::to_string(port);
  REQUIRE(idFromAddress(deadRoot, 5, &idD).isOk());
  // E: a live root, the wrong secret.
  weft_unique_id_t idE, idEbad;
  REQUIRE(createUniqueId(loConfig(10), &idE).isOk());
  REQUIRE(idFromAddress(rootOf(idE).toString(), secretOf(idE) + 1, &idEbad).isOk());

  // F: raw hellos: rank 0 of 2 joins, then "rank 1 of 3" is refused.
  weft_unique_id_t idF;
  REQUIRE(createUniqueId(cfg, &idF).isOk());

  std::vector<Status> a, b, c;
  Status d, e;
  std::string fRefusal, fTimeout;
  std::thread tf([&] {
    auto readReply = [](int fd) {
      boot::RootReply r{};
      if (!net::recvAll(fd, &r, sizeof r, Deadline(5)).isOk()) return std::string("no reply");
      std::string msg(r.payloadBytes, '\0');
      net::recvAll(fd, msg.data(), msg.size(), Deadline(5));
      return strFormat("code %d: ", r.code) + msg;
    };
    int r0 = rawConnect(rootOf(idF));
    int r1 = rawConnect(rootOf(idF));
    boot::RootHello h0 = helloFor(r0, secretOf(idF), 0, 2);
    boot::RootHello h1 = helloFor(r1, secretOf(idF), 1, 3);
    net::sendAll(r0, &h0, sizeof h0, Deadline(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    net::sendAll(r1, &h1, sizeof h1, Deadline(2));
    fRefusal = readReply(r1);
    fTimeout = readReply(r0);
    net::closeFd(&r0);
    net::closeFd(&r1);
  });
  std::thread ta([&] { a = runSomeRankThreads(idA, {0, 1}, 3, cfg); });
  std::thread tb([&] { b = runSomeRankThreads(idB, {0, 1}, 4, cfg); });
  std::thread tc([&] { c = runSomeRankThreads(idC, {0, 0}, 2, cfg); });
  std::thread td([&] {
    std::unique_ptr<Bootstrap> bs;
    d = Bootstrap::create(idD, 0, 2, cfg, &bs);
  });
  std::thread te([&] {
    std::unique_ptr<Bootstrap> bs;
    e = Bootstrap::create(idEbad, 0, 1, cfg, &bs);
  });
  ta.join();
  tb.join();
  tc.join();
  td.join();
  te.join();
  tf.join();
  double took = nowSeconds() - t0;
  CHECK(took < T + 3);

  for (auto& st : a) {
    INFO(st.message());
    CHECK(st.code() == WEFT_ERR_TIMEOUT);
    CHECK(contains(st.message(), "bootstrap: rank 2 of 3 did not join within 0.8 s"));
  }
  for (auto& st : b) {
    INFO(st.message());
    CHECK(st.code() == WEFT_ERR_TIMEOUT);
    CHECK(contains(st.message(), "bootstrap: ranks 2,3 of 4 did not join within 0.8 s"));
  }
  // One of the two rank-0s is refused as a duplicate; the other waits for
  // rank 1 until the timeout.
  REQUIRE(c.size() == 2);
  const Status& dup = c[0].code() == WEFT_ERR_INVALID_USAGE ? c[0] : c[1];
  const Status& waiter = c[0].code() == WEFT_ERR_INVALID_USAGE ? c[1] : c[0];
  INFO(c[0].message() << " / " << c[1].message());
  CHECK(dup.code() == WEFT_ERR_INVALID_USAGE);
  CHECK(contains(dup.message(), "duplicate rank 0"));
  CHECK(waiter.code() == WEFT_ERR_TIMEOUT);
  CHECK(contains(waiter.message(), "rank 1 of 2 did not join"));

  CHECK(fRefusal == strFormat("code %d: ", WEFT_ERR_INVALID_USAGE) + "bootstrap: the root at " +
                       rootOf(idF).toString() + " refused this rank: nranks 3 differs from 2");
  // Rank 0's timeout also says why rank 1 is missing: the root refused the
  // process that claimed it (before: only "rank 1 of 2 did not join").
  CHECK(fTimeout.rfind(strFormat("code %d: ", WEFT_ERR_TIMEOUT) +
                           "bootstrap: rank 1 of 2 did not join within 0.8 s; a process at ",
                       0) == 0);
  CHECK(contains(fTimeout, " claiming rank 1 of 3 was refused: nranks 3 differs from 2"));

  INFO(d.message());
  CHECK(d.code() == WEFT_ERR_TIMEOUT);
  CHECK(contains(d.message(), deadRoot));
  CHECK(contains(d.message(), "cannot reach"));

  // The wrong secret: refused, and the rank says it could not check the
  // root's answer either.
  INFO(e.message());
  CHECK(e.code() == WEFT_ERR_INVALID_USAGE);
  CHECK(contains(e.message(), rootOf(idE).toString()));
  CHECK(contains(e.message(), "authentication failed"));
  CHECK(contains(e.message(), "could not be authenticated"));
  // Let idE's root finish.
  std::vector<Status> fin = runRankThreads(idE, 1, loConfig(10), nullptr);
  CHECK(fin[0].isOk());
}

TEST_CASE("failures: a rank killed before an allgather", "[processes]") {
  const int n = 3;
  Config cfg = loConfig(10);
  const double bound = 5;
  ProcResult res = runRankProcesses(
      n, [&](weft_unique_id_t* id) { return createUniqueId(cfg, id); },
      [&](int rank, const weft_unique_id_t& id) {
        std::unique_ptr<Bootstrap> b;
        Status st = Bootstrap::create(id, rank, n, cfg, &b);
        if (st.isOk()) st = b->barrier(10);
        if (!st.isOk()) {
          fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
          return 1;
        }
        if (rank == 2) raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        double t0 = nowSeconds();
        std::vector<std::string> all;
        st = b->allgather(std::string(1000, 'a'), &all, bound);
        double took = nowSeconds() - t0;
        bool named = contains(st.message(), "rank ");
        if ((st.code() == WEFT_ERR_REMOTE || st.code() == WEFT_ERR_TIMEOUT) && named &&
            took < bound + 1)
          return 0;
        fprintf(stderr, "rank %d: after the kill got code %d \"%s\" in %.2f s\n", rank,
                static_cast<int>(st.code()), st.message().c_str(), took);
        return 3;
      },
      20);
  CHECK(WIFSIGNALED(res.status[2]));
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << describeWait(res.status[static_cast<size_t>(r)]));
    CHECK(res.status[static_cast<size_t>(r)] == 0);
  }
}

namespace {

// Resident memory of this process, KiB (/proc/self/status VmRSS).
long rssKiB() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

}  // namespace

TEST_CASE("hostile: a hello claiming a huge nranks costs the root nothing") {
  weft_unique_id_t id;
  REQUIRE(createUniqueId(loConfig(3), &id).isOk());
  const long before = rssKiB();
  REQUIRE(before > 0);
  // Beyond the limit (2^28 ranks; the root used to allocate 2 GiB for it):
  // refused, with an error frame that names the limit.
  int fd = rawConnect(rootOf(id));
  REQUIRE(fd >= 0);
  boot::RootHello h = helloFor(fd, secretOf(id), 5, 1 << 28);
  REQUIRE(net::sendAll(fd, &h, sizeof h, Deadline(2)).isOk());
  boot::RootReply r{};
  REQUIRE(net::recvAll(fd, &r, sizeof r, Deadline(5)).isOk());
  std::string msg(r.payloadBytes, '\0');
  REQUIRE(net::recvAll(fd, msg.data(), msg.size(), Deadline(5)).isOk());
  CHECK(r.code == WEFT_ERR_INVALID_USAGE);
  CHECK(contains(msg, "exceeds weft's limit"));
  net::closeFd(&fd);
  // At the limit, one rank joins: the root keeps what joined, not a table
  // of kMaxRanks entries.
  int fd2 = rawConnect(rootOf(id));
  REQUIRE(fd2 >= 0);
  boot::RootHello h2 = helloFor(fd2, secretOf(id), kMaxRanks - 1, kMaxRanks);
  REQUIRE(net::sendAll(fd2, &h2, sizeof h2, Deadline(2)).isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long after = rssKiB();
  INFO("RSS before " << before << " KiB, after " << after << " KiB");
  CHECK(after - before < 16 * 1024);
  net::closeFd(&fd2);
}
