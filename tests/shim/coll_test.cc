// The shim's collectives, in process: ranks are threads of this test, the
// test is linked against the shim (libnccl.so.2 from the build directory),
// and every result is checked element by element.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shim/shim_util.h"

using shimtest::expectError;
using shimtest::onThreads;
using shimtest::ThreadRanks;

namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 37;

std::string mismatch(const char* what, size_t i, double got, double want) {
  return std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(got) +
         ", expected " + std::to_string(want);
}

}  // namespace

TEST_CASE("every collective on 4 ranks as threads", "[shim][coll]") {
  ThreadRanks t(kRanks);
  REQUIRE(t.init == ncclSuccess);
  const int n = kRanks;
  std::string errs = onThreads(n, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    int rank = -1, count = -1;
    SHIM_TRY(ncclCommUserRank(c, &rank));
    SHIM_TRY(ncclCommCount(c, &count));
    if (rank != r || count != n)
      return "rank/count " + std::to_string(rank) + "/" + std::to_string(count);

    // AllReduce, out of place then in place.
    std::vector<float> a(kCount), b(kCount, -1.0f);
    for (size_t i = 0; i < kCount; ++i) a[i] = static_cast<float>(r + i);
    SHIM_TRY(ncclAllReduce(a.data(), b.data(), kCount, ncclFloat, ncclSum, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (b[i] != 6.0f + 4.0f * i) return mismatch("allreduce", i, b[i], 6.0 + 4.0 * i);
    SHIM_TRY(ncclAllReduce(a.data(), a.data(), kCount, ncclFloat, ncclMax, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (a[i] != 3.0f + i) return mismatch("allreduce in place", i, a[i], 3.0 + i);

    // Broadcast from 1, Bcast (in place) from 2.
    std::vector<int32_t> x(kCount), y(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<int32_t>(100 * r + i);
    SHIM_TRY(ncclBroadcast(x.data(), y.data(), kCount, ncclInt32, 1, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (y[i] != static_cast<int32_t>(100 + i)) return mismatch("broadcast", i, y[i], 100.0 + i);
    SHIM_TRY(ncclBcast(x.data(), kCount, ncclInt32, 2, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (x[i] != static_cast<int32_t>(200 + i)) return mismatch("bcast", i, x[i], 200.0 + i);

    // Reduce to 3: the root gets the product, the others' recvbuff stays.
    std::vector<double> d(kCount), e(kCount, -7.0);
    for (size_t i = 0; i < kCount; ++i) d[i] = r + 1.0;
    SHIM_TRY(ncclReduce(d.data(), e.data(), kCount, ncclDouble, ncclProd, 3, c, nullptr));
    for (size_t i = 0; i < kCount; ++i) {
      double want = r == 3 ? 24.0 : -7.0;
      if (e[i] != want) return mismatch("reduce", i, e[i], want);
    }

    // AllGather out of place and in place.
    std::vector<int64_t> g(n * kCount, -1), mine(kCount);
    for (size_t i = 0; i < kCount; ++i) mine[i] = 1000 * r + static_cast<int64_t>(i);
    SHIM_TRY(ncclAllGather(mine.data(), g.data(), kCount, ncclInt64, c, nullptr));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i)
        if (g[p * kCount + i] != 1000 * p + static_cast<int64_t>(i))
          return mismatch("allgather", p * kCount + i, g[p * kCount + i], 1000.0 * p + i);
    std::vector<int64_t> gi(n * kCount, -1);
    memcpy(gi.data() + r * kCount, mine.data(), kCount * sizeof(int64_t));
    SHIM_TRY(ncclAllGather(gi.data() + r * kCount, gi.data(), kCount, ncclInt64, c, nullptr));
    if (gi != g) return "allgather in place differs";

    // ReduceScatter out of place and in place.
    std::vector<float> rs(n * kCount), rr(kCount, -1.0f);
    for (size_t i = 0; i < n * kCount; ++i) rs[i] = static_cast<float>(i % 5);
    SHIM_TRY(ncclReduceScatter(rs.data(), rr.data(), kCount, ncclFloat, ncclSum, c, nullptr));
    for (size_t i = 0; i < kCount; ++i) {
      float want = 4.0f * static_cast<float>((r * kCount + i) % 5);
      if (rr[i] != want) return mismatch("reducescatter", i, rr[i], want);
    }
    SHIM_TRY(ncclReduceScatter(rs.data(), rs.data() + r * kCount, kCount, ncclFloat, ncclSum, c,
                               nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (rs[r * kCount + i] != rr[i]) return "reducescatter in place differs";

    // AlltoAll: block j of rank i holds 10 * i + j.
    std::vector<uint32_t> s2(n * kCount), r2(n * kCount, 0);
    for (int j = 0; j < n; ++j)
      for (size_t i = 0; i < kCount; ++i) s2[j * kCount + i] = static_cast<uint32_t>(10 * r + j);
    SHIM_TRY(ncclAlltoAll(s2.data(), r2.data(), kCount, ncclUint32, c, nullptr));
    for (int j = 0; j < n; ++j)
      for (size_t i = 0; i < kCount; ++i)
        if (r2[j * kCount + i] != static_cast<uint32_t>(10 * j + r))
          return mismatch("alltoall", j * kCount + i, r2[j * kCount + i], 10.0 * j + r);

    // Gather to 2 (out of place and in place), Scatter from 1 (both).
    std::vector<int8_t> gs(kCount), gr(n * kCount, -1);
    for (size_t i = 0; i < kCount; ++i) gs[i] = static_cast<int8_t>(r * 10 + i % 10);
    SHIM_TRY(ncclGather(gs.data(), gr.data(), kCount, ncclInt8, 2, c, nullptr));
    if (r == 2) {
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < kCount; ++i)
          if (gr[p * kCount + i] != static_cast<int8_t>(p * 10 + i % 10))
            return mismatch("gather", p * kCount + i, gr[p * kCount + i], p * 10.0 + i % 10);
      std::vector<int8_t> gin(n * kCount, -1);
      memcpy(gin.data() + 2 * kCount, gs.data(), kCount);
      SHIM_TRY(ncclGather(gin.data() + 2 * kCount, gin.data(), kCount, ncclInt8, 2, c, nullptr));
      if (gin != gr) return "gather in place differs";
    } else {
      for (int8_t v : gr)
        if (v != -1) return "gather wrote a non-root recvbuff";
      SHIM_TRY(ncclGather(gs.data(), nullptr, kCount, ncclInt8, 2, c, nullptr));
    }
    std::vector<uint8_t> ss(n * kCount), sr(kCount, 0);
    for (size_t i = 0; i < n * kCount; ++i) ss[i] = static_cast<uint8_t>(i / kCount + 50 * r);
    SHIM_TRY(ncclScatter(ss.data(), sr.data(), kCount, ncclUint8, 1, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (sr[i] != static_cast<uint8_t>(r + 50)) return mismatch("scatter", i, sr[i], r + 50.0);
    if (r == 1) {
      SHIM_TRY(ncclScatter(ss.data(), ss.data() + kCount, kCount, ncclUint8, 1, c, nullptr));
    } else {
      std::fill(sr.begin(), sr.end(), 0);
      SHIM_TRY(ncclScatter(nullptr, sr.data(), kCount, ncclUint8, 1, c, nullptr));
      for (size_t i = 0; i < kCount; ++i)
        if (sr[i] != static_cast<uint8_t>(r + 50))
          return mismatch("scatter (2)", i, sr[i], r + 50.0);
    }

    // Send/Recv: a ring, then every pair (self included), each in one group.
    std::vector<float> out(kCount, static_cast<float>(r)), in(kCount, -1.0f);
    SHIM_TRY(ncclGroupStart());
    SHIM_TRY(ncclSend(out.data(), kCount, ncclFloat, (r + 1) % n, c, nullptr));
    SHIM_TRY(ncclRecv(in.data(), kCount, ncclFloat, (r + n - 1) % n, c, nullptr));
    SHIM_TRY(ncclGroupEnd());
    for (size_t i = 0; i < kCount; ++i)
      if (in[i] != static_cast<float>((r + n - 1) % n))
        return mismatch("ring", i, in[i], (r + n - 1) % n);
    std::vector<int32_t> po(n), pi(n, -1);
    for (int p = 0; p < n; ++p) po[p] = 10 * r + p;
    SHIM_TRY(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      SHIM_TRY(ncclSend(&po[p], 1, ncclInt32, p, c, nullptr));
      SHIM_TRY(ncclRecv(&pi[p], 1, ncclInt32, p, c, nullptr));
    }
    SHIM_TRY(ncclGroupEnd());
    for (int p = 0; p < n; ++p)
      if (pi[p] != 10 * p + r) return mismatch("pairs", p, pi[p], 10.0 * p + r);

    // Several collectives in one group.
    std::vector<float> ga(kCount, 1.0f), gb(kCount, static_cast<float>(r));
    SHIM_TRY(ncclGroupStart());
    SHIM_TRY(ncclAllReduce(ga.data(), ga.data(), kCount, ncclFloat, ncclAvg, c, nullptr));
    SHIM_TRY(ncclBroadcast(gb.data(), gb.data(), kCount, ncclFloat, 3, c, nullptr));
    SHIM_TRY(ncclGroupEnd());
    for (size_t i = 0; i < kCount; ++i)
      if (ga[i] != 1.0f || gb[i] != 3.0f) return "grouped allreduce/broadcast";

    // A stream without CUDA in the process is an opaque handle: host path.
    float one = 1.0f, sum = 0.0f;
    SHIM_TRY(
        ncclAllReduce(&one, &sum, 1, ncclFloat, ncclSum, c, reinterpret_cast<cudaStream_t>(0x1)));
    if (sum != 4.0f) return "allreduce with a stream";
    return "";
  });
  CHECK(errs == "");
}

TEST_CASE("PreMulSum ops scale each rank's input, then sum", "[shim][coll]") {
  ThreadRanks t(kRanks);
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(kRanks, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    // float, host immediate: sum over r of (r + 1) * 0.5 * 2 = 10.
    float scalar = 0.5f * static_cast<float>(r + 1);
    ncclRedOp_t op;
    SHIM_TRY(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, c));
    if (static_cast<int>(op) < static_cast<int>(ncclNumOps)) return "op value is a built-in one";
    scalar = 99.0f;  // read at creation: changing it now has no effect
    std::vector<float> a(kCount, 2.0f), b(kCount, -1.0f);
    SHIM_TRY(ncclAllReduce(a.data(), b.data(), kCount, ncclFloat, op, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (b[i] != 10.0f) return mismatch("premulsum allreduce", i, b[i], 10.0);
    // In place; the caller's input is not scaled in its buffer first.
    SHIM_TRY(ncclAllReduce(a.data(), a.data(), kCount, ncclFloat, op, c, nullptr));
    if (a[0] != 10.0f) return mismatch("premulsum in place", 0, a[0], 10.0);
    // Reduce and ReduceScatter.
    std::vector<float> rs(kRanks * kCount, 1.0f), rr(kCount, -1.0f);
    SHIM_TRY(ncclReduceScatter(rs.data(), rr.data(), kCount, ncclFloat, op, c, nullptr));
    for (size_t i = 0; i < kCount; ++i)
      if (rr[i] != 5.0f) return mismatch("premulsum reducescatter", i, rr[i], 5.0);
    std::vector<float> one(kCount, 4.0f), red(kCount, -1.0f);
    SHIM_TRY(ncclReduce(one.data(), red.data(), kCount, ncclFloat, op, 0, c, nullptr));
    if (r == 0 && red[0] != 20.0f) return mismatch("premulsum reduce", 0, red[0], 20.0);
    // A datatype other than the op's is refused.
    std::string e =
        expectError(ncclAllReduce(a.data(), b.data(), kCount, ncclDouble, op, c, nullptr),
                    ncclInvalidArgument, "datatype", "premulsum with another datatype");
    if (!e.empty()) return e;
    SHIM_TRY(ncclRedOpDestroy(op, c));
    e = expectError(ncclAllReduce(a.data(), b.data(), kCount, ncclFloat, op, c, nullptr),
                    ncclInvalidArgument, "op", "destroyed op");
    if (!e.empty()) return e;

    // int32, device residence on host memory: read at each call.
    int32_t k = 3;
    SHIM_TRY(ncclRedOpCreatePreMulSum(&op, &k, ncclInt32, ncclScalarDevice, c));
    std::vector<int32_t> x(kCount, r), y(kCount, -1);
    SHIM_TRY(ncclAllReduce(x.data(), y.data(), kCount, ncclInt32, op, c, nullptr));
    if (y[0] != 18) return mismatch("premulsum int32", 0, y[0], 18.0);
    k = -1;
    SHIM_TRY(ncclAllReduce(x.data(), y.data(), kCount, ncclInt32, op, c, nullptr));
    if (y[kCount - 1] != -6)
      return mismatch("premulsum int32 after change", 0, y[kCount - 1], -6.0);
    // Inside a group the scaled copy lives until ncclGroupEnd.
    SHIM_TRY(ncclGroupStart());
    SHIM_TRY(ncclAllReduce(x.data(), y.data(), kCount, ncclInt32, op, c, nullptr));
    SHIM_TRY(ncclGroupEnd());
    if (y[3] != -6) return mismatch("premulsum in a group", 3, y[3], -6.0);
    SHIM_TRY(ncclRedOpDestroy(op, c));
    return expectError(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument, "ncclRedOpDestroy",
                       "destroying a built-in op");
  });
  CHECK(errs == "");
}

TEST_CASE("a call refused inside a group fails the whole group", "[shim][coll]") {
  ThreadRanks t(2);
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(2, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    std::vector<float> a(8, 1.0f), b(8, -1.0f);
    SHIM_TRY(ncclGroupStart());
    SHIM_TRY(ncclAllReduce(a.data(), b.data(), 8, ncclFloat, ncclSum, c, nullptr));
    std::string e = expectError(
        ncclAllReduce(a.data(), b.data(), 8, static_cast<ncclDataType_t>(42), ncclSum, c, nullptr),
        ncclInvalidArgument, "datatype", "bad datatype in a group");
    if (!e.empty()) return e;
    e = expectError(ncclGroupEnd(), ncclInvalidArgument, "refused", "ncclGroupEnd");
    if (!e.empty()) return e;
    if (b[0] != -1.0f) return "the refused group ran its allreduce";
    // The comms still work afterwards.
    SHIM_TRY(ncclAllReduce(a.data(), b.data(), 8, ncclFloat, ncclSum, c, nullptr));
    return b[7] == 2.0f ? "" : "allreduce after a refused group";
  });
  CHECK(errs == "");
}

// WEFT_REPRO through the shim: ncclAllReduce and ncclReduceScatter of
// floats are the serial fold over ranks, bit for bit, and so is a
// pre-multiplied sum (each rank's input scaled first, then folded).
TEST_CASE("WEFT_REPRO=ordered makes the shim's float reductions the serial fold", "[shim][coll]") {
  constexpr int n = 3;
  constexpr size_t count = 4099;
  // Order-exposing values: magnitudes 2^-12..2^12, both signs, and a big
  // term that cancels between ranks every 5th element.
  auto value = [](int rank, size_t i) {
    uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(rank * 40503u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float x = std::ldexp(1.0f + static_cast<float>(h % 1000) / 1000.0f,
                         static_cast<int>((h >> 10) % 25) - 12);
    if ((h >> 20) & 1) x = -x;
    if (i % 5 == 0) x = (rank % 2 ? -1.0f : 1.0f) * 16777216.0f;
    return x;
  };
  // A ring over shm FIFOs (no arena) would fold in another order: the test
  // fails without WEFT_REPRO (checked by hand: "ordered allreduce[0]").
  setenv("WEFT_REPRO", "ordered", 1);
  setenv("WEFT_ALGO", "ring", 1);
  setenv("WEFT_SHM_ARENA_CHUNK", "0", 1);
  ThreadRanks t(n);
  unsetenv("WEFT_REPRO");
  unsetenv("WEFT_ALGO");
  unsetenv("WEFT_SHM_ARENA_CHUNK");
  REQUIRE(t.init == ncclSuccess);
  std::string errs = onThreads(n, [&](int r) -> std::string {
    ncclComm_t c = t.comms[r];
    std::vector<float> in(count * n), out(count * n);
    for (size_t i = 0; i < count * n; ++i) in[i] = value(r, i);
    SHIM_TRY(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, c, nullptr));
    for (size_t i = 0; i < count; ++i) {
      float want = value(0, i);
      for (int q = 1; q < n; ++q) want += value(q, i);
      if (std::memcmp(&want, &out[i], 4) != 0) return mismatch("ordered allreduce", i, out[i], want);
    }
    SHIM_TRY(ncclReduceScatter(in.data(), out.data(), count, ncclFloat, ncclSum, c, nullptr));
    for (size_t i = 0; i < count; ++i) {
      const size_t e = r * count + i;
      float want = value(0, e);
      for (int q = 1; q < n; ++q) want += value(q, e);
      if (std::memcmp(&want, &out[i], 4) != 0)
        return mismatch("ordered reducescatter", i, out[i], want);
    }
    float scalar = 0.25f * static_cast<float>(r + 1);
    ncclRedOp_t op;
    SHIM_TRY(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, c));
    SHIM_TRY(ncclAllReduce(in.data(), out.data(), count, ncclFloat, op, c, nullptr));
    SHIM_TRY(ncclRedOpDestroy(op, c));
    for (size_t i = 0; i < count; ++i) {
      float want = 0.25f * value(0, i);
      for (int q = 1; q < n; ++q) want += 0.25f * static_cast<float>(q + 1) * value(q, i);
      if (std::memcmp(&want, &out[i], 4) != 0) return mismatch("ordered premulsum", i, out[i], want);
    }
    return "";
  });
  CHECK(errs == "");
}

// ncclGroupStart / End go through weft's groups, so host allreduces in one
// get tensor fusion (WEFT_FUSION_THRESHOLD): results as unfused, and the
// timeline shows fused ops.
TEST_CASE("a group of host allreduces runs fused through the shim", "[shim][coll]") {
  char dir[] = "/tmp/weft-shim-fusion-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string tl = std::string(dir) + "/tl-%r.json";
  setenv("WEFT_TIMELINE", tl.c_str(), 1);
  {
    ThreadRanks t(2);
    REQUIRE(t.init == ncclSuccess);
    std::string errs = onThreads(2, [&](int r) -> std::string {
      ncclComm_t c = t.comms[r];
      std::vector<std::vector<float>> v(40, std::vector<float>(kCount));
      for (size_t k = 0; k < v.size(); ++k)
        for (size_t i = 0; i < kCount; ++i) v[k][i] = static_cast<float>(r + k + i);
      SHIM_TRY(ncclGroupStart());
      for (auto& x : v) SHIM_TRY(ncclAllReduce(x.data(), x.data(), kCount, ncclFloat, ncclSum, c, nullptr));
      SHIM_TRY(ncclGroupEnd());
      for (size_t k = 0; k < v.size(); ++k)
        for (size_t i = 0; i < kCount; ++i)
          if (v[k][i] != static_cast<float>(1 + 2 * (k + i))) return mismatch("fused", i, v[k][i], 1 + 2.0 * (k + i));
      return "";
    });
    CHECK(errs == "");
  }
  unsetenv("WEFT_TIMELINE");
  for (int r = 0; r < 2; ++r) {
    FILE* f = fopen((std::string(dir) + "/tl-" + std::to_string(r) + ".json").c_str(), "r");
    REQUIRE(f != nullptr);
    std::string all;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, k);
    fclose(f);
    std::remove((std::string(dir) + "/tl-" + std::to_string(r) + ".json").c_str());
    CHECK(all.find("\"fused_calls\":40") != std::string::npos);
  }
  rmdir(dir);
}
