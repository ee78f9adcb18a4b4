// Pre-multiplied sums (weft_op_create_premul_sum): allreduce, reduce and
// reduce_scatter, in and out of place, blocking and in a nonblocking group,
// a scalar read once and one read at every call, over threads and
// processes; every element checked, sendbuf never written, and bad ops
// refused without touching a buffer.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "coll/harness.h"

using wtest::runProcesses;
using wtest::runThreads;

namespace {

std::string fail(const std::string& what, size_t i, double got, double want) {
  return what + ": element " + std::to_string(i) + " is " + std::to_string(got) + ", want " +
         std::to_string(want);
}

// Rank r's input element i: small integers, so every sum is exact in float.
float in(int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1)); }
// sum over ranks of scale * in(r, i)
float want(int n, size_t i, float scale) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += scale * in(r, i);
  return s;
}

std::string premul(weft_comm_t comm, int rank, int n) {
  const size_t count = 1031;
  // Immediate: 0.5 read now (changing the variable afterwards changes nothing).
  float half = 0.5f;
  weft_op_t opHalf;
  TRY_WEFT(weft_op_create_premul_sum(&opHalf, &half, WEFT_FLOAT32, WEFT_SCALAR_HOST_IMMEDIATE, comm));
  half = 100.0f;
  // By pointer: read at each call.
  float factor = 2.0f;
  weft_op_t opPtr;
  TRY_WEFT(weft_op_create_premul_sum(&opPtr, &factor, WEFT_FLOAT32, WEFT_SCALAR_DEVICE, comm));
  if (opHalf < WEFT_NUM_OPS || opPtr < WEFT_NUM_OPS || opHalf == opPtr)
    return "op values " + std::to_string(opHalf) + " and " + std::to_string(opPtr);

  std::vector<float> send(count * n), keep, recv(count * n);
  for (size_t i = 0; i < send.size(); ++i) send[i] = in(rank, i);
  keep = send;
  // allreduce out of place and in place, both ops, the pointer's value changed between calls.
  for (float f : {2.0f, -3.0f}) {
    factor = f;
    for (weft_op_t op : {opHalf, opPtr}) {
      const float scale = op == opHalf ? 0.5f : f;
      TRY_WEFT(weft_allreduce(send.data(), recv.data(), count, WEFT_FLOAT32, op, comm, nullptr));
      if (send != keep) return "allreduce wrote sendbuf";
      for (size_t i = 0; i < count; ++i)
        if (recv[i] != want(n, i, scale)) return fail("allreduce", i, recv[i], want(n, i, scale));
      std::vector<float> io(send.begin(), send.begin() + count);
      TRY_WEFT(weft_allreduce(io.data(), io.data(), count, WEFT_FLOAT32, op, comm, nullptr));
      for (size_t i = 0; i < count; ++i)
        if (io[i] != want(n, i, scale)) return fail("allreduce in place", i, io[i], want(n, i, scale));
    }
  }
  factor = 2.0f;
  // reduce to every root: non-roots pass recvbuf NULL.
  for (int root = 0; root < n; ++root) {
    std::vector<float> out(count, -1);
    TRY_WEFT(weft_reduce(send.data(), rank == root ? out.data() : nullptr, count, WEFT_FLOAT32,
                         opPtr, root, comm, nullptr));
    if (send != keep) return "reduce wrote sendbuf";
    if (rank == root)
      for (size_t i = 0; i < count; ++i)
        if (out[i] != want(n, i, 2.0f)) return fail("reduce", i, out[i], want(n, i, 2.0f));
  }
  // reduce_scatter out of place and in place.
  {
    std::vector<float> out(count, -1);
    TRY_WEFT(weft_reduce_scatter(send.data(), out.data(), count, WEFT_FLOAT32, opHalf, comm, nullptr));
    if (send != keep) return "reduce_scatter wrote sendbuf";
    for (size_t i = 0; i < count; ++i) {
      const size_t g = rank * count + i;
      if (out[i] != want(n, g, 0.5f)) return fail("reduce_scatter", i, out[i], want(n, g, 0.5f));
    }
    std::vector<float> io = send;
    TRY_WEFT(weft_reduce_scatter(io.data(), io.data() + rank * count, count, WEFT_FLOAT32, opHalf,
                                 comm, nullptr));
    for (size_t i = 0; i < count; ++i) {
      const size_t g = rank * count + i;
      if (io[g] != want(n, g, 0.5f)) return fail("reduce_scatter in place", i, io[g], want(n, g, 0.5f));
    }
  }
  // A nonblocking group of two: the scaled copy outlives the calls that made it.
  {
    std::vector<float> a(count, -1), b(count, -1);
    TRY_WEFT(weft_group_start());
    TRY_WEFT(weft_reduce_scatter(send.data(), a.data(), count, WEFT_FLOAT32, opPtr, comm, nullptr));
    TRY_WEFT(weft_reduce(send.data(), b.data(), count, WEFT_FLOAT32, opHalf, 0, comm, nullptr));
    weft_request_t req = nullptr;
    TRY_WEFT(weft_group_end_async(&req));
    TRY_WEFT(weft_wait(req));
    TRY_WEFT(weft_request_free(req));
    for (size_t i = 0; i < count; ++i) {
      const size_t g = rank * count + i;
      if (a[i] != want(n, g, 2.0f)) return fail("group reduce_scatter", i, a[i], want(n, g, 2.0f));
      if (rank == 0 && b[i] != want(n, i, 0.5f)) return fail("group reduce", i, b[i], want(n, i, 0.5f));
    }
  }
  // Integers wrap, bfloat16 rounds once: an int32 and a bfloat16 op.
  {
    int32_t k = -3;
    weft_op_t opInt;
    TRY_WEFT(weft_op_create_premul_sum(&opInt, &k, WEFT_INT32, WEFT_SCALAR_HOST_IMMEDIATE, comm));
    std::vector<int32_t> x(5, 1000000000 + rank), y(5);
    TRY_WEFT(weft_allreduce(x.data(), y.data(), 5, WEFT_INT32, opInt, comm, nullptr));
    uint32_t s = 0;
    for (int r = 0; r < n; ++r) s += static_cast<uint32_t>(1000000000 + r) * static_cast<uint32_t>(-3);
    if (y[0] != static_cast<int32_t>(s) || y[4] != static_cast<int32_t>(s))
      return "int32 premul: " + std::to_string(y[0]) + ", want " + std::to_string(static_cast<int32_t>(s));
    TRY_WEFT(weft_op_destroy(opInt, comm));
  }
  TRY_WEFT(weft_op_destroy(opHalf, comm));
  TRY_WEFT(weft_op_destroy(opPtr, comm));
  return "";
}

void expectRefused(weft_result_t got, weft_result_t want, weft_comm_t comm, const char* word) {
  CHECK(got == want);
  const std::string msg = weft_get_last_error(comm);
  INFO("last error: " << msg);
  CHECK(msg.find(word) != std::string::npos);
}

}  // namespace

TEST_CASE("premul sum: every reduction - threads", "[coll][premul][threads]") {
  for (int n : {1, 2, 3}) {
    INFO("n=" << n);
    REQUIRE(runThreads(n, premul) == "");
  }
}

TEST_CASE("premul sum: every reduction - processes over shm and tcp", "[coll][premul][processes]") {
  REQUIRE(runProcesses(3, premul, {"WEFT_TRANSPORTS=shm"}) == "");
  REQUIRE(runProcesses(2, premul, {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"}) == "");
}

TEST_CASE("premul sum: bad ops are refused and write nothing", "[coll][premul][errors]") {
  weft_comm_t comms[2];
  REQUIRE(weft_comm_init_all(comms, 2) == WEFT_SUCCESS);
  weft_comm_t c = comms[0];
  float scalar = 3.0f;
  weft_op_t op;
  expectRefused(weft_op_create_premul_sum(nullptr, &scalar, WEFT_FLOAT32, WEFT_SCALAR_DEVICE, c),
                WEFT_ERR_INVALID_ARGUMENT, c, "NULL");
  expectRefused(weft_op_create_premul_sum(&op, nullptr, WEFT_FLOAT32, WEFT_SCALAR_DEVICE, c),
                WEFT_ERR_INVALID_ARGUMENT, c, "NULL");
  expectRefused(weft_op_create_premul_sum(&op, &scalar, static_cast<weft_datatype_t>(12),
                                          WEFT_SCALAR_DEVICE, c),
                WEFT_ERR_INVALID_ARGUMENT, c, "datatype 12");
  expectRefused(weft_op_create_premul_sum(&op, &scalar, WEFT_FLOAT32,
                                          static_cast<weft_scalar_residence_t>(2), c),
                WEFT_ERR_INVALID_ARGUMENT, c, "residence 2");
  expectRefused(weft_op_create_premul_sum(&op, &scalar, WEFT_FLOAT32, WEFT_SCALAR_DEVICE, nullptr),
                WEFT_ERR_INVALID_ARGUMENT, nullptr, "NULL");

  REQUIRE(weft_op_create_premul_sum(&op, &scalar, WEFT_FLOAT32, WEFT_SCALAR_DEVICE, c) ==
          WEFT_SUCCESS);
  float send[4] = {1, 2, 3, 4}, recv[4] = {9, 9, 9, 9};
  // Another datatype, another comm, a made-up op, a destroyed op, a non-reduction.
  expectRefused(weft_allreduce(send, recv, 4, WEFT_INT32, op, c, nullptr), WEFT_ERR_INVALID_ARGUMENT,
                c, "was made for datatype float, not int32");
  expectRefused(weft_allreduce(send, recv, 4, WEFT_FLOAT32, op, comms[1], nullptr),
                WEFT_ERR_INVALID_ARGUMENT, comms[1], "weft_op_create_premul_sum on this communicator");
  expectRefused(weft_allreduce(send, recv, 4, WEFT_FLOAT32, static_cast<weft_op_t>(op + 7), c, nullptr),
                WEFT_ERR_INVALID_ARGUMENT, c, "neither a weft_op_t");
  expectRefused(weft_allreduce(send, send + 1, 2, WEFT_FLOAT32, op, c, nullptr),
                WEFT_ERR_INVALID_ARGUMENT, c, "overlap");
  expectRefused(weft_op_destroy(WEFT_SUM, c), WEFT_ERR_INVALID_ARGUMENT, c, "op 0 was not made");
  REQUIRE(weft_op_destroy(op, c) == WEFT_SUCCESS);
  expectRefused(weft_op_destroy(op, c), WEFT_ERR_INVALID_ARGUMENT, c, "was not made");
  expectRefused(weft_allreduce(send, recv, 4, WEFT_FLOAT32, op, c, nullptr), WEFT_ERR_INVALID_ARGUMENT,
                c, "neither a weft_op_t");
  const float sendWant[4] = {1, 2, 3, 4};
  CHECK(std::memcmp(send, sendWant, sizeof send) == 0);
  for (float x : recv) CHECK(x == 9);
  // A refused call inside a group fails the group, naming the op.
  REQUIRE(weft_group_start() == WEFT_SUCCESS);
  CHECK(weft_allreduce(send, recv, 4, WEFT_FLOAT32, op, c, nullptr) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_group_end() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(nullptr)).find("neither a weft_op_t") != std::string::npos);
  for (weft_comm_t x : comms) CHECK(weft_comm_destroy(x) == WEFT_SUCCESS);
}
