// Bootstrap: unique ids, and allgather / barrier among ranks as threads and
// as processes.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>

#include "test_util.h"

using namespace weft;
using namespace weft::test;

namespace {

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

void requireAllOk(const std::vector<Status>& sts) {
  for (size_t r = 0; r < sts.size(); ++r) {
    INFO("rank " << r << ": " << sts[r].message());
    CHECK(sts[r].isOk());
  }
}

}  // namespace

TEST_CASE("unique id: create - decode - reject foreign bytes") {
  Config cfg = loConfig(5);
  weft_unique_id_t a, b;
  REQUIRE(createUniqueId(cfg, &a).isOk());
  REQUIRE(createUniqueId(cfg, &b).isOk());
  UniqueIdData da, db;
  REQUIRE(decodeUniqueId(a, &da).isOk());
  REQUIRE(decodeUniqueId(b, &db).isOk());
  CHECK(da.magic == kUniqueIdMagic);
  CHECK(da.secret != db.secret);
  CHECK(rootOf(a).port() != 0);
  CHECK(rootOf(a).toString().rfind("127.0.0.1:", 0) == 0);
  CHECK(createUniqueId(cfg, nullptr).code() == WEFT_ERR_INVALID_ARGUMENT);

  // Serve the two roots so that their threads exit now.
  requireAllOk(runRankThreads(a, 1, cfg, nullptr));
  requireAllOk(runRankThreads(b, 1, cfg, nullptr));

  weft_unique_id_t zero;
  memset(&zero, 0, sizeof zero);
  Status st = decodeUniqueId(zero, nullptr);
  CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(contains(st.message(), "not a weft unique id"));

  weft_unique_id_t v2 = a;
  UniqueIdData d = da;
  d.version = 2;
  memcpy(v2.internal, &d, sizeof d);
  st = decodeUniqueId(v2, nullptr);
  CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(contains(st.message(), "not a weft unique id"));

  std::unique_ptr<Bootstrap> bs;
  CHECK(Bootstrap::create(zero, 0, 1, cfg, &bs).code() == WEFT_ERR_INVALID_ARGUMENT);

  weft_unique_id_t fixed;
  REQUIRE(idFromAddress("127.0.0.1:1234", 42, &fixed).isOk());
  CHECK(secretOf(fixed) == 42);
  CHECK(rootOf(fixed).toString() == "127.0.0.1:1234");
  CHECK(idFromAddress("nonsense", 42, &fixed).code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(Bootstrap::create(fixed, 1, 1, cfg, &bs).code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(Bootstrap::create(fixed, -1, 2, cfg, &bs).code() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(Bootstrap::create(fixed, 0, 0, cfg, &bs).code() == WEFT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("bootstrap: allgather and barrier among rank threads") {
  Config cfg = loConfig();
  for (int n : {1, 2, 3, 5, 8}) {
    INFO("nranks " << n);
    weft_unique_id_t id;
    REQUIRE(createUniqueId(cfg, &id).isOk());
    std::vector<Status> sts = runRankThreads(id, n, cfg, [n](Bootstrap& b) -> std::string {
      if (b.nranks() != n) return "nranks() wrong";
      // Every rank derived the same communicator key and id.
      std::vector<std::string> keys;
      const std::string mine(reinterpret_cast<const char*>(b.commKey().data()), kMacBytes);
      Status kst = b.allgather(mine + std::to_string(b.commId()), &keys, 5);
      if (!kst.isOk()) return "allgather of keys: " + kst.message();
      for (const std::string& k : keys)
        if (k != keys[0]) return "ranks derived different communicator keys";
      if (b.commId() == 0) return "commId() is 0";
      std::string err = exerciseRing(b);
      if (!err.empty()) return err;
      b.shutdown();
      b.shutdown();  // twice is fine
      if (n > 1) {
        std::vector<std::string> all;
        Status st = b.allgather("x", &all, 1);
        if (st.code() != WEFT_ERR_INVALID_USAGE) return "allgather after shutdown: " + st.message();
      }
      return "";
    });
    requireAllOk(sts);
  }
}

TEST_CASE("bootstrap: allgather and barrier among rank processes", "[processes]") {
  for (int n : {1, 2, 3, 5, 8}) {
    INFO("nranks " << n);
    Config cfg = loConfig();
    ProcResult res = runRankProcesses(
        n, [&](weft_unique_id_t* id) { return createUniqueId(cfg, id); },
        [&](int rank, const weft_unique_id_t& id) {
          std::unique_ptr<Bootstrap> b;
          Status st = Bootstrap::create(id, rank, n, cfg, &b);
          if (!st.isOk()) {
            fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
            return 1;
          }
          std::string err = exerciseRing(*b);
          if (!err.empty()) {
            fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
            return 2;
          }
          return 0;
        },
        20);
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r << ": " << describeWait(res.status[static_cast<size_t>(r)]));
      CHECK(res.status[static_cast<size_t>(r)] == 0);
    }
  }
}

TEST_CASE("bootstrap: root at a given address (init_env flow) - IPv4 and IPv6") {
  for (const char* where : {"127.0.0.1:0", "[::1]:0"}) {
    INFO(where);
    Config cfg;
    cfg.bootstrapTimeoutS = 20;  // no interface: ranks use their route to the root
    const uint64_t secret = 0x1234abcd5678ef00ull;
    weft_unique_id_t rootId;
    Status st = startRootAt(cfg, where, secret, &rootId);
    if (!st.isOk() && where[0] == '[') {
      WARN("no IPv6 loopback: " << st.message());
      continue;
    }
    REQUIRE(st.isOk());
    CHECK(secretOf(rootId) == secret);
    // The other ranks only know "host:port" and the secret.
    std::string hostPort = rootOf(rootId).toString();
    weft_unique_id_t other;
    REQUIRE(idFromAddress(hostPort, secret, &other).isOk());
    const int n = 3;
    std::vector<weft_unique_id_t> ids{rootId, other, other};
    requireAllOk(runRankThreads(ids, n, cfg, [](Bootstrap& b) { return exerciseRing(b, 2); }));
  }
}

TEST_CASE("bootstrap: each rendezvous gets its own communicator key and id") {
  Config cfg = loConfig();
  std::vector<uint64_t> ids;
  std::vector<Key> keys;
  std::mutex mu;
  for (int run = 0; run < 2; ++run) {
    weft_unique_id_t id;
    REQUIRE(createUniqueId(cfg, &id).isOk());
    requireAllOk(runRankThreads(id, 2, cfg, [&](Bootstrap& b) -> std::string {
      std::lock_guard<std::mutex> lk(mu);
      if (b.rank() == 0) {
        ids.push_back(b.commId());
        keys.push_back(b.commKey());
      }
      return "";
    }));
  }
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] != ids[1]);
  CHECK(keys[0] != keys[1]);
}
