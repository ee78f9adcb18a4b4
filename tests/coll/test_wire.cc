// Wire compression end to end (WEFT_WIRE, docs/compression.md): real ranks
// over tcp, shm FIFOs and the shm arena, float32 SUM and AVG allreduce,
// reduce and reduce_scatter on ring, fold and direct, against the exact sum
// (in double, then bounded) with the error bound the design states:
//
//   |result - S| <= ((1 + u)^n (1 + 2^-24)^(n+1) - 1) * sum_i |x_i|  (+ fp16's floor)
//
// u = 2^-8 (bf16) or 2^-11 (fp16): along any element's path at most n
// roundings to the wire format (one per hop, the owner's final one included)
// and n float32 roundings (the adds, AVG's division); fp16 adds, per rounding,
// at most half its smallest subnormal at the message's scale, 2^(e-39) for a
// message whose largest magnitude is below 2^(e+1) (wire.h). And every rank's
// allreduce result is bitwise the same (gathered and compared).
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include "coll/harness.h"

namespace {

enum class Coll { AllReduce, Reduce, ReduceScatter };

// Rank r's inputs: mostly N(0, 1)-like values scaled per element by a
// magnitude between 2^-20 and 2^20 (fp16: some far beyond 65504), with a few
// exact cancellations, so that partial sums of every size occur.
std::vector<float> inputsOf(int r, size_t count, uint64_t seed, bool huge) {
  std::mt19937_64 g(seed * 1000003 + static_cast<uint64_t>(r));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    // The element's scale, the same on every rank (splitmix64 of seed and i).
    uint64_t h = seed ^ (i * 0x9E3779B97F4A7C15ull);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    const int e = static_cast<int>(h % 41) - 20 + (huge && i % 7 == 0 ? 30 : 0);
    v[i] = std::ldexp(nd(g), e);
  }
  return v;
}

struct Bound {
  double rel, absPerMax;  // |err| <= rel * sum|x| + absPerMax * (largest sum|x| of the call)
};

Bound boundFor(weft_wire_t w, int n) {
  const double u = w == WEFT_WIRE_BF16 ? 0x1p-8 : 0x1p-11;
  const double rel = std::pow(1 + u, n) * std::pow(1 + 0x1p-24, n + 1) - 1 + 0x1p-50;
  return Bound{rel, w == WEFT_WIRE_FP16 ? n * 0x1p-38 : 0.0};
}

// `op` is SUM or AVG; the call passes `callOp` instead when set (an op of
// weft_op_create_wire reducing as `op`).
std::string callAndCheck(weft_comm_t comm, int rank, int n, Coll coll, weft_op_t op, size_t count,
                         bool inPlace, uint64_t seed, weft_wire_t wire, bool huge,
                         int callOp = -1) {
  const weft_op_t passed = callOp >= 0 ? static_cast<weft_op_t>(callOp) : op;
  const size_t inCount = coll == Coll::ReduceScatter ? count * n : count;
  std::vector<std::vector<float>> in(n);
  for (int r = 0; r < n; ++r) in[r] = inputsOf(r, inCount, seed, huge);
  std::vector<float> send(in[rank]), recv(count, -7.0f);
  const int root = static_cast<int>(seed % n);
  float* out = recv.data();
  weft_result_t res = WEFT_SUCCESS;
  switch (coll) {
    case Coll::AllReduce:
      if (inPlace) out = send.data();
      res = weft_allreduce(send.data(), out, count, WEFT_FLOAT32, passed, comm, nullptr);
      break;
    case Coll::Reduce:
      if (inPlace) out = send.data();
      res = weft_reduce(send.data(), out, count, WEFT_FLOAT32, passed, root, comm, nullptr);
      break;
    case Coll::ReduceScatter:
      if (inPlace) out = send.data() + rank * count;
      res = weft_reduce_scatter(send.data(), out, count, WEFT_FLOAT32, passed, comm, nullptr);
      break;
  }
  if (res != WEFT_SUCCESS) return "call failed: " + wtest::describe(res, comm);
  if (coll == Coll::Reduce && rank != root) return "";
  const size_t first = coll == Coll::ReduceScatter ? rank * count : 0;
  const Bound b = boundFor(wire, n);
  double largest = 0;
  for (size_t i = 0; i < inCount; ++i) {
    double mag = 0;
    for (int r = 0; r < n; ++r) mag += std::fabs(static_cast<double>(in[r][i]));
    largest = std::max(largest, mag);
  }
  const double div = op == WEFT_AVG ? n : 1;
  for (size_t i = 0; i < count; ++i) {
    double exact = 0, mag = 0;
    for (int r = 0; r < n; ++r) {
      exact += static_cast<double>(in[r][first + i]);
      mag += std::fabs(static_cast<double>(in[r][first + i]));
    }
    const double err = std::fabs(static_cast<double>(out[i]) - exact / div);
    const double bound = (b.rel * mag + b.absPerMax * largest) / div;
    if (!(err <= bound))
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": " +
             std::to_string(out[i]) + " vs exact " + std::to_string(exact / div) + ", error " +
             std::to_string(err) + " > bound " + std::to_string(bound);
  }
  if (coll != Coll::AllReduce) return "";
  // Every rank holds the same bits: gather them all (allgather moves bytes
  // uncompressed) and compare with rank 0's.
  std::vector<float> all(count * n);
  res = weft_allgather(out, all.data(), count, WEFT_FLOAT32, comm, nullptr);
  if (res != WEFT_SUCCESS) return "allgather failed: " + wtest::describe(res, comm);
  for (int r = 1; r < n; ++r)
    if (std::memcmp(all.data(), all.data() + r * count, count * 4) != 0)
      return "rank " + std::to_string(r) + "'s result differs from rank 0's";
  return "";
}

// `compressed`: whether the hops carry the format (then a bf16 allreduce's
// results are bf16 values: the owner rounds its own too).
std::string runAll(weft_comm_t comm, int rank, int n, weft_wire_t wire, bool compressed) {
  weft_wire_t got = WEFT_WIRE_DEFAULT;
  if (weft_comm_wire(comm, &got) != WEFT_SUCCESS || got != wire)
    return "weft_comm_wire says " + std::to_string(got);
  uint64_t seed = 1;
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{70001}}) {
    for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter}) {
      for (weft_op_t op : {WEFT_SUM, WEFT_AVG}) {
        for (bool inPlace : {false, true}) {
          const bool huge = wire == WEFT_WIRE_FP16 && seed % 2 == 0;
          std::string e = callAndCheck(comm, rank, n, coll, op, count, inPlace, ++seed, wire, huge);
          if (!e.empty())
            return e + " (count " + std::to_string(count) + ", coll " +
                   std::to_string(static_cast<int>(coll)) + ", op " + std::to_string(op) +
                   (inPlace ? ", in place)" : ")");
        }
      }
    }
  }
  // Compression happened: bf16 results are bf16 values.
  if (wire == WEFT_WIRE_BF16) {
    std::vector<float> x = inputsOf(rank, 4096, 99, false), y(4096);
    if (weft_allreduce(x.data(), y.data(), 4096, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
        WEFT_SUCCESS)
      return "allreduce failed";
    size_t narrow = 0;
    for (float v : y) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      narrow += (u & 0xffffu) == 0;
    }
    if (compressed != (narrow == y.size()))
      return std::to_string(narrow) +
             " of 4096 results are bf16 values; compressed: " + (compressed ? "yes" : "no");
  }
  // Calls the setting does not apply to run exactly: a double SUM and a
  // float MAX of values whose sums are exact.
  std::vector<double> d(257, rank + 0.25), dr(257);
  if (weft_allreduce(d.data(), dr.data(), 257, WEFT_FLOAT64, WEFT_SUM, comm, nullptr) !=
      WEFT_SUCCESS)
    return "double allreduce failed";
  for (double v : dr)
    if (v != n * (n - 1) / 2.0 + 0.25 * n) return "double SUM was changed: " + std::to_string(v);
  std::vector<float> m(300, 1.0f + 0x1p-20f * rank), mr(300);
  if (weft_allreduce(m.data(), mr.data(), 300, WEFT_FLOAT32, WEFT_MAX, comm, nullptr) !=
      WEFT_SUCCESS)
    return "float MAX failed";
  for (float v : mr)
    if (v != 1.0f + 0x1p-20f * (n - 1)) return "float MAX was rounded: " + std::to_string(v);
  return "";
}

struct Setup {
  const char* what;
  std::vector<std::string> env;
  bool compressed;  // the hops carry the format (not the arena)
};

void run(const Setup& s, int n, weft_wire_t wire) {
  std::vector<std::string> env = s.env;
  env.push_back(wire == WEFT_WIRE_BF16 ? "WEFT_WIRE=bf16" : "WEFT_WIRE=fp16");
  INFO(s.what << ", " << n << " ranks, " << (wire == WEFT_WIRE_BF16 ? "bf16" : "fp16"));
  const std::string err = wtest::runProcesses(
      n, [&](weft_comm_t c, int r, int nr) { return runAll(c, r, nr, wire, s.compressed); }, env,
      300);
  CHECK(err == "");
}

const std::vector<std::string> kTcp = {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"};

std::vector<std::string> with(std::vector<std::string> v, const std::string& e) {
  v.push_back(e);
  return v;
}

}  // namespace

TEST_CASE("wire: bf16 over tcp - the selector's choice - 2 3 4 ranks", "[coll][wire]") {
  for (int n : {2, 3, 4}) run({"tcp", kTcp, true}, n, WEFT_WIRE_BF16);
}

TEST_CASE("wire: fp16 over tcp - the selector's choice - 2 3 4 ranks", "[coll][wire]") {
  for (int n : {2, 3, 4}) run({"tcp", kTcp, true}, n, WEFT_WIRE_FP16);
}

TEST_CASE("wire: bf16 and fp16 over tcp with WEFT_ALGO=fold and 4K chunks", "[coll][wire]") {
  const auto env = with(with(kTcp, "WEFT_ALGO=fold"), "WEFT_CHUNK_BYTES=4096");
  run({"tcp fold 4K", env, true}, 3, WEFT_WIRE_BF16);
  run({"tcp fold 4K", env, true}, 4, WEFT_WIRE_FP16);
}

TEST_CASE("wire: a WEFT_ALGO rule naming rd is passed over for compressed calls", "[coll][wire]") {
  const auto env = with(with(kTcp, "WEFT_ALGO=rd"), "WEFT_CHUNK_BYTES=65536");
  run({"tcp rd rule", env, true}, 4, WEFT_WIRE_BF16);
}

TEST_CASE("wire: over shm FIFOs the hops compress too", "[coll][wire]") {
  run({"shm FIFOs", {"WEFT_TRANSPORTS=shm", "WEFT_SHM_ARENA_CHUNK=0"}, true}, 3, WEFT_WIRE_BF16);
}

TEST_CASE("wire: shm and tcp hops mixed - two hosts of two ranks", "[coll][wire][processes]") {
  // weft tells hosts apart by hostname (and network namespace): each child
  // takes its own UTS namespace and a hostname per pair, so ranks 0-1 and
  // 2-3 talk over shm and the pairs over tcp, in one ring. Needs root.
  if (geteuid() != 0) {
    WARN("skipped: needs root to give ranks their own hostnames");
    return;
  }
  auto host = [](int rank) {
    const std::string name = rank < 2 ? "weft-wire-a" : "weft-wire-b";
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(name.c_str(), name.size()) != 0) _exit(3);
  };
  for (weft_wire_t wire : {WEFT_WIRE_BF16, WEFT_WIRE_FP16}) {
    std::vector<std::string> env = {"WEFT_TRANSPORTS=shm,tcp", "WEFT_SOCKET_IFNAME=lo",
                                     wire == WEFT_WIRE_BF16 ? "WEFT_WIRE=bf16" : "WEFT_WIRE=fp16"};
    const std::string err = wtest::runProcesses(
        4, [&](weft_comm_t c, int r, int n) { return runAll(c, r, n, wire, true); }, env, 300,
        host);
    CHECK(err == "");
  }
}

TEST_CASE("wire: the shm arena runs compressed calls uncompressed", "[coll][wire][arena]") {
  run({"shm arena", {"WEFT_TRANSPORTS=shm"}, false}, 3, WEFT_WIRE_BF16);
}

TEST_CASE("wire: ranks asking for different formats fail init on every rank", "[coll][wire]") {
  weft_unique_id_t id;
  REQUIRE(weft_get_unique_id(&id) == WEFT_SUCCESS);
  std::vector<weft_comm_t> comms(2, nullptr);
  std::vector<weft_result_t> init(2);
  std::vector<std::string> msg(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
      cfg.wire = r == 0 ? WEFT_WIRE_BF16 : WEFT_WIRE_NONE;
      init[r] = weft_comm_init_rank_config(&comms[r], 2, id, r, &cfg);
      msg[r] = weft_get_last_error(nullptr);
    });
  }
  for (auto& t : ts) t.join();
  CHECK(init[0] == WEFT_ERR_INVALID_USAGE);
  CHECK(init[1] == WEFT_ERR_INVALID_USAGE);
  CHECK(msg[0].find("wire format") != std::string::npos);
  CHECK(msg[1].find("wire format") != std::string::npos);
  weft_config_t bad = WEFT_CONFIG_INITIALIZER;
  bad.wire = 9;
  weft_comm_t comm = nullptr;
  CHECK(weft_comm_init_rank_config(&comm, 1, id, 0, &bad) == WEFT_ERR_INVALID_ARGUMENT);
}

namespace {

bool allBf16(const std::vector<float>& v) {
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (u & 0xffffu) return false;
  }
  return true;
}

// Per-call ops on a comm without WEFT_WIRE: alone, in a group, refused
// where they do not apply (nothing written), and NONE on a compressing comm.
std::string perCallOps(weft_comm_t comm, int rank, int n) {
  weft_op_t bf16 = WEFT_SUM, fp16Avg = WEFT_SUM, bad = WEFT_SUM;
  TRY_WEFT(weft_op_create_wire(&bf16, WEFT_SUM, WEFT_WIRE_BF16, comm));
  TRY_WEFT(weft_op_create_wire(&fp16Avg, WEFT_AVG, WEFT_WIRE_FP16, comm));
  if (weft_op_create_wire(&bad, WEFT_MAX, WEFT_WIRE_BF16, comm) != WEFT_ERR_INVALID_ARGUMENT)
    return "a MAX wire op was accepted";
  if (weft_op_create_wire(&bad, WEFT_SUM, WEFT_WIRE_DEFAULT, comm) != WEFT_ERR_INVALID_ARGUMENT)
    return "a DEFAULT wire op was accepted";
  for (size_t count : {size_t{5}, size_t{100000}}) {
    std::string e = callAndCheck(comm, rank, n, Coll::AllReduce, WEFT_SUM, count, false, count,
                                 WEFT_WIRE_BF16, false, bf16);
    if (e.empty())
      e = callAndCheck(comm, rank, n, Coll::ReduceScatter, WEFT_AVG, count, true, count + 1,
                       WEFT_WIRE_FP16, true, fp16Avg);
    if (!e.empty()) return "per-call op: " + e;
  }
  // A group of compressed allreduces, sizes 1 to 300000.
  const size_t counts[3] = {1, 4099, 300000};
  std::vector<std::vector<float>> in(3), out(3);
  TRY_WEFT(weft_group_start());
  for (int j = 0; j < 3; ++j) {
    in[j] = inputsOf(rank, counts[j], 50 + j, false);
    out[j].assign(counts[j], 0.0f);
    TRY_WEFT(
        weft_allreduce(in[j].data(), out[j].data(), counts[j], WEFT_FLOAT32, bf16, comm, nullptr));
  }
  TRY_WEFT(weft_group_end());
  const Bound b = boundFor(WEFT_WIRE_BF16, n);
  for (int j = 0; j < 3; ++j) {
    if (!allBf16(out[j])) return "group member " + std::to_string(j) + " was not compressed";
    for (size_t i = 0; i < counts[j]; ++i) {
      double exact = 0, mag = 0;
      for (int r = 0; r < n; ++r) {
        const float x = inputsOf(r, counts[j], 50 + j, false)[i];
        exact += x;
        mag += std::fabs(x);
      }
      if (!(std::fabs(out[j][i] - exact) <= b.rel * mag))
        return "group member " + std::to_string(j) + " element " + std::to_string(i) +
               " beyond the bound";
      if (counts[j] > 10) break;  // the bound is checked in full above; here the first element
    }
  }
  // Refused on another datatype, before touching a buffer.
  std::vector<double> d(10, 1.0), dr(10, -3.0);
  if (weft_allreduce(d.data(), dr.data(), 10, WEFT_FLOAT64, bf16, comm, nullptr) !=
      WEFT_ERR_INVALID_ARGUMENT)
    return "a wire op on float64 was not refused";
  if (std::string(weft_get_last_error(comm)).find("float32 only") == std::string::npos)
    return std::string("unclear error: ") + weft_get_last_error(comm);
  for (double v : dr)
    if (v != -3.0) return "a refused call wrote its buffer";
  TRY_WEFT(weft_op_destroy(bf16, comm));
  TRY_WEFT(weft_op_destroy(fp16Avg, comm));
  return "";
}

// NONE on a comm that compresses: this call exactly as float32.
std::string noneOnCompressingComm(weft_comm_t comm, int rank, int n) {
  weft_op_t none = WEFT_SUM;
  TRY_WEFT(weft_op_create_wire(&none, WEFT_SUM, WEFT_WIRE_NONE, comm));
  std::vector<float> x(1000), y(1000), z(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + 0x1p-20f * static_cast<float>(i + rank);
  TRY_WEFT(weft_allreduce(x.data(), y.data(), 1000, WEFT_FLOAT32, none, comm, nullptr));
  TRY_WEFT(weft_allreduce(x.data(), z.data(), 1000, WEFT_FLOAT32, WEFT_SUM, comm, nullptr));
  for (size_t i = 0; i < x.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += 1.0f + 0x1p-20f * static_cast<float>(i + r);
    if (y[i] != want) return "NONE op result " + std::to_string(y[i]) + " is not exact";
  }
  if (!allBf16(z)) return "the comm's own setting did not compress";
  return "";
}

}  // namespace

TEST_CASE("wire: per-call ops alone and in groups and refused where they do not apply",
          "[coll][wire][processes]") {
  for (int n : {2, 3}) CHECK(wtest::runProcesses(n, perCallOps, kTcp, 300) == "");
}

TEST_CASE("wire: a NONE op runs uncompressed on a compressing comm", "[coll][wire][processes]") {
  CHECK(wtest::runProcesses(3, noneOnCompressingComm, with(kTcp, "WEFT_WIRE=bf16"), 120) == "");
}
