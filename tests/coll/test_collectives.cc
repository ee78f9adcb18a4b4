// Every collective x every datatype x every op, on ranks as threads and as
// processes, over each transport, in and out of place.
#include <catch2/catch.hpp>

#include "coll/check.h"

using namespace wtest;

namespace {

// The full matrix on one communicator: all collectives, types, ops, a few
// counts (0, 1, odd, larger than a chunk), in and out of place.
std::string matrix(weft_comm_t comm, int rank, int n, const std::vector<size_t>& counts) {
  for (Coll c : kAllColls) {
    for (weft_datatype_t dt : kAllTypes) {
      const bool reduces = c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
      for (weft_op_t op : kAllOps) {
        if (!reduces && op != WEFT_SUM) continue;
        if (!opApplies(dt, op)) continue;  // refused: tests/coll/test_errors.cc
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            int root = static_cast<int>((count + op) % n);
            std::string err = runAndCheck(comm, rank, n, c, dt, op, count, inPlace, root);
            if (!err.empty()) return err;
          }
        }
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("collectives: full matrix - ranks as threads over shm", "[coll][threads]") {
  for (int n : {1, 2, 3, 4}) {
    INFO("n=" << n);
    std::string err = runThreads(n, [](weft_comm_t c, int r, int n) {
      return matrix(c, r, n, {0, 1, 7, 1000});
    });
    REQUIRE(err == "");
  }
}

TEST_CASE("collectives: more ranks than cores - non powers of two (threads)", "[coll][threads]") {
  for (int n : {5, 7, 8}) {
    INFO("n=" << n);
    std::string err = runThreads(n, [](weft_comm_t c, int r, int n) {
      for (Coll coll : kAllColls)
        for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT64})
          for (size_t count : {size_t(0), size_t(3), size_t(4099)})
            for (bool ip : {false, true}) {
              std::string e = runAndCheck(c, r, n, coll, dt, WEFT_SUM, count, ip, n - 1);
              if (!e.empty()) return e;
            }
      return std::string();
    });
    REQUIRE(err == "");
  }
}

TEST_CASE("collectives: processes over shm", "[coll][processes][shm]") {
  for (int n : {2, 3, 4}) {
    INFO("n=" << n);
    std::string err = runProcesses(
        n, [](weft_comm_t c, int r, int n) { return matrix(c, r, n, {0, 5, 3000}); },
        {"WEFT_TRANSPORTS=shm"});
    REQUIRE(err == "");
  }
}

TEST_CASE("collectives: processes over tcp", "[coll][processes][tcp]") {
  for (int n : {2, 3, 4}) {
    INFO("n=" << n);
    std::string err = runProcesses(
        n, [](weft_comm_t c, int r, int n) { return matrix(c, r, n, {0, 5, 3000}); },
        {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"});
    REQUIRE(err == "");
  }
}

TEST_CASE("collectives: large messages pipelined over several chunks", "[coll][large][processes]") {
  // 16 Mi floats (64 MiB) allreduce over 4 processes, and 64 Mi int8
  // elements over tcp; chunks of 256 KiB so hundreds of chunks are in flight.
  std::string err = runProcesses(
      4,
      [](weft_comm_t c, int r, int n) {
        std::string e = runAndCheck(c, r, n, Coll::AllReduce, WEFT_FLOAT32, WEFT_SUM, 16u << 20, false, 0);
        if (!e.empty()) return e;
        return runAndCheck(c, r, n, Coll::AllGather, WEFT_FLOAT32, WEFT_SUM, 1u << 20, true, 0);
      },
      {"WEFT_CHUNK_BYTES=256K"});
  REQUIRE(err == "");
  err = runProcesses(
      2,
      [](weft_comm_t c, int r, int n) {
        return runAndCheck(c, r, n, Coll::AllReduce, WEFT_INT8, WEFT_MAX, 64u << 20, true, 0);
      },
      {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo"});
  REQUIRE(err == "");
}
