// Tensor fusion end to end (src/api/fusion.h): the small allreduces of a
// group, packed into fusion buffers and run as one collective each, give
// what the unfused calls give, over real ranks (processes over shm and tcp,
// threads), with every datatype and op, pre-multiplied sums, in and out of
// place, aliased buffers, reproducible modes, fusion turned off by env or
// config, and errors. Each configuration's timeline says whether ops were
// fused, so a test that expects fusion fails when nothing was fused.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "coll/harness.h"
#include "coll/values.h"
#include "repro/repro_ref.h"

namespace {

using wtest::eltSize;

// One call of a group.
struct Spec {
  weft_datatype_t dt;
  weft_op_t op;  // WEFT_NUM_OPS: a pre-multiplied sum by 2
  size_t count;
  bool inPlace;
  size_t offset;  // into the index space of inputValue, so calls differ
};

bool premul(const Spec& s) { return s.op == WEFT_NUM_OPS; }
weft_op_t baseOp(const Spec& s) { return premul(s) ? WEFT_SUM : s.op; }

// Every (datatype, op) that applies, with counts from 1 to beyond the
// threshold the tests set (8 KiB), and pre-multiplied sums.
std::vector<Spec> mixedSpecs() {
  std::vector<Spec> v;
  const size_t counts[] = {1, 3, 17, 100, 1000, 3000};
  size_t k = 0;
  for (weft_datatype_t dt : wtest::kAllTypes) {
    for (weft_op_t op : wtest::kAllOps) {
      if (!wtest::opApplies(dt, op)) continue;
      // Two calls of each key (so each key has a run), sizes varying.
      for (int rep = 0; rep < 2; ++rep, ++k)
        v.push_back(Spec{dt, op, counts[(k * 7) % 6], k % 3 == 0, k * 5000});
    }
  }
  for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_INT32, WEFT_FLOAT16, WEFT_FLOAT64})
    for (int rep = 0; rep < 3; ++rep, ++k)
      v.push_back(Spec{dt, WEFT_NUM_OPS, counts[(k * 5) % 6], rep == 1, k * 5000});
  return v;
}

struct Buffers {
  std::vector<unsigned char> send, recv;
};

void fill(const Spec& s, int rank, int n, Buffers* b) {
  const size_t len = s.count * eltSize(s.dt);
  b->send.assign(len, 0);
  b->recv.assign(len, 0xA5);  // what no result is
  for (size_t i = 0; i < s.count; ++i)
    wtest::store(b->send.data(), i, s.dt,
                 wtest::inputValue(s.dt, baseOp(s), rank, n, s.offset + i));
}

// Checks call `s`'s result against the value every rank can compute.
std::string check(const Spec& s, int n, const Buffers& b, size_t index) {
  const void* out = s.inPlace ? b.send.data() : b.recv.data();
  for (size_t i = 0; i < s.count; ++i) {
    int64_t want = wtest::expectedValue(s.dt, baseOp(s), n, s.offset + i);
    if (premul(s)) want *= 2;
    if (!wtest::equals(out, i, s.dt, want))
      return "call " + std::to_string(index) + " (dt " + std::to_string(s.dt) + " op " +
             std::to_string(s.op) + " count " + std::to_string(s.count) +
             (s.inPlace ? " in place" : "") + "): element " + std::to_string(i) + " differs";
  }
  return "";
}

// Issues `specs` as one group (or, `async`, weft_group_end_async + wait),
// with a broadcast in the middle that closes the runs, and checks them all.
std::string groupBody(weft_comm_t comm, int rank, int n, const std::vector<Spec>& specs,
                      bool async) {
  std::vector<Buffers> bufs(specs.size());
  std::vector<weft_op_t> premuls;
  weft_op_t two = WEFT_SUM;
  for (size_t k = 0; k < specs.size(); ++k) fill(specs[k], rank, n, &bufs[k]);
  std::vector<int32_t> bc(64, rank == 0 ? 77 : 0);
  TRY_WEFT(weft_group_start());
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    weft_op_t op = s.op;
    if (premul(s)) {
      unsigned char scalar[8] = {};
      wtest::store(scalar, 0, s.dt, 2);
      TRY_WEFT(weft_op_create_premul_sum(&two, scalar, s.dt, WEFT_SCALAR_HOST_IMMEDIATE, comm));
      premuls.push_back(two);
      op = two;
    }
    void* out = s.inPlace ? bufs[k].send.data() : bufs[k].recv.data();
    TRY_WEFT(weft_allreduce(bufs[k].send.data(), out, s.count, s.dt, op, comm, nullptr));
    if (k == specs.size() / 2)
      TRY_WEFT(weft_broadcast(bc.data(), bc.data(), bc.size(), WEFT_INT32, 0, comm, nullptr));
  }
  if (async) {
    weft_request_t req = nullptr;
    TRY_WEFT(weft_group_end_async(&req));
    TRY_WEFT(weft_wait(req));
    TRY_WEFT(weft_request_free(req));
  } else {
    TRY_WEFT(weft_group_end());
  }
  for (weft_op_t op : premuls) TRY_WEFT(weft_op_destroy(op, comm));
  for (size_t k = 0; k < specs.size(); ++k) {
    std::string err = check(specs[k], n, bufs[k], k);
    if (!err.empty()) return err;
  }
  for (int32_t v : bc)
    if (v != 77) return "the broadcast in the group gave " + std::to_string(v);
  return "";
}

// The fused ops each rank's timeline recorded (tests' WEFT_TIMELINE files).
struct Timelines {
  std::string dir;
  Timelines() {
    char tmpl[] = "/tmp/weft-fusion-test-XXXXXX";
    dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  }
  ~Timelines() { wtest::removeTree(dir); }
  std::string env() const { return "WEFT_TIMELINE=" + dir + "/tl-%r.json"; }
  // Occurrences of "fused_calls" in rank r's file.
  int fused(int r) const {
    const std::string all = wtest::catFiles(dir + "/tl-" + std::to_string(r) + ".json");
    int k = 0;
    for (size_t at = all.find("\"fused_calls\":"); at != std::string::npos;
         at = all.find("\"fused_calls\":", at + 1))
      ++k;
    return k;
  }
  // The calls those fused ops carried, summed.
  long fusedCalls(int r) const {
    const std::string all = wtest::catFiles(dir + "/tl-" + std::to_string(r) + ".json");
    const std::string key = "\"fused_calls\":";
    long sum = 0;
    for (size_t at = all.find(key); at != std::string::npos; at = all.find(key, at + 1))
      sum += std::strtol(all.c_str() + at + key.size(), nullptr, 10);
    return sum;
  }
};

void runMixed(int n, std::vector<std::string> env, bool expectFused) {
  Timelines tl;
  env.push_back(tl.env());
  env.push_back("WEFT_TIMEOUT_S=60");
  const std::vector<Spec> specs = mixedSpecs();
  const std::string err = wtest::runProcesses(
      n,
      [&](weft_comm_t comm, int rank, int nr) {
        std::string e = groupBody(comm, rank, nr, specs, false);
        return e.empty() ? groupBody(comm, rank, nr, specs, true) : e;
      },
      env, 300);
  CHECK(err == "");
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    if (expectFused) {
      CHECK(tl.fused(r) > 10);
    } else {
      CHECK(tl.fused(r) == 0);
    }
  }
}

}  // namespace

TEST_CASE("fusion: every datatype and op fused over shm with 2 ranks",
          "[coll][fusion][processes]") {
  runMixed(2, {"WEFT_TRANSPORTS=shm", "WEFT_FUSION_THRESHOLD=8K"}, true);
}

TEST_CASE("fusion: every datatype and op fused over shm FIFOs with 3 ranks",
          "[coll][fusion][processes]") {
  runMixed(3, {"WEFT_TRANSPORTS=shm", "WEFT_SHM_ARENA_CHUNK=0", "WEFT_FUSION_THRESHOLD=8K"}, true);
}

TEST_CASE("fusion: every datatype and op fused over tcp with 4 ranks",
          "[coll][fusion][processes]") {
  runMixed(4, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_FUSION_THRESHOLD=8K"}, true);
}

TEST_CASE("fusion: the default threshold fuses over tcp with 2 ranks",
          "[coll][fusion][processes]") {
  runMixed(2, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"}, true);
}

TEST_CASE("fusion: WEFT_FUSION_THRESHOLD=0 fuses nothing", "[coll][fusion][processes]") {
  runMixed(3, {"WEFT_TRANSPORTS=shm", "WEFT_FUSION_THRESHOLD=0"}, false);
}

TEST_CASE("fusion: one rank with fusion off turns it off on every rank",
          "[coll][fusion][processes]") {
  // The ranks agree on the smallest threshold at init; if they did not,
  // rank 0's fused ops would meet rank 1's single ones and fail.
  Timelines tl;
  const std::vector<Spec> specs = mixedSpecs();
  const std::string err = wtest::runProcesses(
      2, [&](weft_comm_t comm, int rank, int n) { return groupBody(comm, rank, n, specs, false); },
      {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT_S=30", tl.env()}, 120,
      [](int rank) { setenv("WEFT_FUSION_THRESHOLD", rank == 1 ? "0" : "64K", 1); });
  CHECK(err == "");
  CHECK(tl.fused(0) == 0);
  CHECK(tl.fused(1) == 0);
}

TEST_CASE("fusion: aliased buffers read every input before writing a result", "[coll][fusion]") {
  // Calls of one fused run: a writes y from x, b reads y (its input, not
  // a's result), c and d work in place on one buffer z, e reads x again.
  const std::string err = wtest::runThreads(3, [](weft_comm_t comm, int rank, int n) {
    const size_t c = 300;
    std::vector<int32_t> x(c), y(c), z(c), w(c), v(c);
    for (size_t i = 0; i < c; ++i) {
      x[i] = rank + static_cast<int32_t>(i);
      y[i] = 1000 * rank;
      z[i] = 7;
    }
    TRY_WEFT(weft_group_start());
    TRY_WEFT(weft_allreduce(x.data(), y.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr));
    TRY_WEFT(weft_allreduce(y.data(), w.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr));
    TRY_WEFT(weft_allreduce(z.data(), z.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr));
    TRY_WEFT(weft_allreduce(z.data(), z.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr));
    TRY_WEFT(weft_allreduce(x.data(), v.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr));
    TRY_WEFT(weft_group_end());
    const int32_t ranks = n * (n - 1) / 2;
    for (size_t i = 0; i < c; ++i) {
      const int32_t xs = ranks + n * static_cast<int32_t>(i);
      if (y[i] != xs || v[i] != xs) return "a or e: element " + std::to_string(i) + " differs";
      if (w[i] != 1000 * ranks) return "b read a's result at " + std::to_string(i);
      if (z[i] != 7 * n) return "c or d: " + std::to_string(z[i]) + " at " + std::to_string(i);
    }
    return std::string();
  });
  CHECK(err == "");
}

TEST_CASE("fusion: float sums equal the unfused calls bit for bit with 2 ranks",
          "[coll][fusion][processes]") {
  // With 2 ranks every algorithm computes a + b, so fusion (which may pick
  // another algorithm for the larger op) changes no bit of random floats.
  const std::string err = wtest::runProcesses(
      2,
      [](weft_comm_t comm, int rank, int) {
        std::mt19937 gen(1234 + rank);
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        std::vector<std::vector<float>> in(120), fused(120), single(120);
        for (size_t k = 0; k < in.size(); ++k) {
          in[k].resize(1 + (k * 37) % 900);
          for (float& f : in[k]) f = d(gen) * static_cast<float>(1 + k);
          fused[k].resize(in[k].size());
          single[k].resize(in[k].size());
          TRY_WEFT(weft_allreduce(in[k].data(), single[k].data(), in[k].size(), WEFT_FLOAT32,
                                  WEFT_AVG, comm, nullptr));
        }
        TRY_WEFT(weft_group_start());
        for (size_t k = 0; k < in.size(); ++k)
          TRY_WEFT(weft_allreduce(in[k].data(), fused[k].data(), in[k].size(), WEFT_FLOAT32,
                                  WEFT_AVG, comm, nullptr));
        TRY_WEFT(weft_group_end());
        for (size_t k = 0; k < in.size(); ++k)
          if (std::memcmp(fused[k].data(), single[k].data(), in[k].size() * 4) != 0)
            return "call " + std::to_string(k) + " differs";
        return std::string();
      },
      {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT_S=60"}, 120);
  CHECK(err == "");
}

TEST_CASE("fusion: WEFT_REPRO=ordered results equal the unfused calls bit for bit",
          "[coll][fusion][repro][processes]") {
  // Order-exposing floats over 4 ranks: any change of summation order
  // shows, and the ordered mode fixes it whatever op fusion builds.
  for (const char* tx : {"shm", "tcp"}) {
    INFO(tx);
    const std::string err = wtest::runProcesses(
        4,
        [](weft_comm_t comm, int rank, int) {
          std::vector<std::vector<float>> in(60), fused(60), single(60);
          for (size_t k = 0; k < in.size(); ++k) {
            in[k].resize(1 + (k * 53) % 700);
            repro::fillOrderExposing(in[k].data(), in[k].size(), rank, 7 + k, false);
            fused[k].resize(in[k].size());
            single[k].resize(in[k].size());
            TRY_WEFT(weft_allreduce(in[k].data(), single[k].data(), in[k].size(), WEFT_FLOAT32,
                                    WEFT_SUM, comm, nullptr));
          }
          TRY_WEFT(weft_group_start());
          for (size_t k = 0; k < in.size(); ++k)
            TRY_WEFT(weft_allreduce(in[k].data(), fused[k].data(), in[k].size(), WEFT_FLOAT32,
                                    WEFT_SUM, comm, nullptr));
          TRY_WEFT(weft_group_end());
          for (size_t k = 0; k < in.size(); ++k)
            if (std::memcmp(fused[k].data(), single[k].data(), in[k].size() * 4) != 0)
              return "call " + std::to_string(k) + " differs";
          return std::string();
        },
        {std::string("WEFT_TRANSPORTS=") + tx, "WEFT_SOCKET_IFNAME=lo", "WEFT_REPRO=ordered",
         "WEFT_TIMEOUT_S=60"},
        180);
    CHECK(err == "");
  }
}

TEST_CASE("fusion: calls over 8 KiB are fused over tcp but not on the shm arena",
          "[coll][fusion][arena][processes]") {
  // The arena runs such a call alone faster than its copy in and out of a
  // fusion buffer (Comm::fusionMaxCall). Tagged [arena]: without the arena
  // (WEFT_SHM_ARENA_CHUNK=0, coll.async-local-steps) shm fuses them too.
  std::vector<Spec> specs;
  for (size_t k = 0; k < 30; ++k)
    specs.push_back(Spec{WEFT_FLOAT32, WEFT_SUM, 4096, k % 2 == 0, k * 5000});
  for (const char* tx : {"shm", "tcp"}) {
    INFO(tx);
    Timelines tl;
    const std::string err = wtest::runProcesses(
        2,
        [&](weft_comm_t comm, int rank, int n) { return groupBody(comm, rank, n, specs, false); },
        {std::string("WEFT_TRANSPORTS=") + tx, "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT_S=60",
         tl.env()},
        120);
    CHECK(err == "");
    if (std::string(tx) == "shm") {
      CHECK(tl.fused(0) == 0);
    } else {
      CHECK(tl.fused(0) == 2);  // 15 calls of 16 KiB on each side of the broadcast
    }
  }
}

TEST_CASE("fusion: calls over 16 KiB are not fused over tcp within one host",
          "[coll][fusion][processes]") {
  // Loopback sockets run such a call alone faster than its copy in and out
  // of a fusion buffer (Comm::fusionMaxCall); 16 KiB calls still fuse.
  std::vector<Spec> specs;
  for (size_t k = 0; k < 20; ++k)
    specs.push_back(Spec{WEFT_FLOAT32, WEFT_SUM, k % 2 == 0 ? size_t{4096} : size_t{4097}, false,
                         k * 5000});
  Timelines tl;
  const std::string err = wtest::runProcesses(
      2, [&](weft_comm_t comm, int rank, int n) { return groupBody(comm, rank, n, specs, false); },
      {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT_S=60", tl.env()}, 120);
  CHECK(err == "");
  // The ten calls of 4096 floats, on each side of the broadcast: one fused op
  // each side (5 calls), the calls of 4097 floats alone.
  CHECK(tl.fused(0) == 2);
  CHECK(tl.fusedCalls(0) == 10);
}
