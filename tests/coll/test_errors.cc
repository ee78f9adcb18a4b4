// Bad input gets a clear error, sets the last error, and writes no buffer.
#include <catch2/catch.hpp>

#include <cstring>

#include "coll/harness.h"

namespace {

struct OneRank {
  weft_comm_t comm = nullptr;
  OneRank() { REQUIRE(weft_comm_init_all(&comm, 1) == WEFT_SUCCESS); }
  ~OneRank() { weft_comm_destroy(comm); }
};

void expectError(weft_result_t got, weft_result_t want, weft_comm_t comm, const char* word) {
  CHECK(got == want);
  std::string msg = weft_get_last_error(comm);
  INFO("last error: " << msg);
  CHECK(msg.find(word) != std::string::npos);
}

}  // namespace

TEST_CASE("errors: bad arguments are refused and no buffer is written", "[errors]") {
  OneRank one;
  weft_comm_t c = one.comm;
  float send[8], recv[8];
  for (int i = 0; i < 8; ++i) send[i] = recv[i] = 42.0f + i;
  float sendCopy[8], recvCopy[8];
  memcpy(sendCopy, send, sizeof send);
  memcpy(recvCopy, recv, sizeof recv);

  expectError(weft_allreduce(send, recv, 8, WEFT_FLOAT32, WEFT_SUM, nullptr, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, nullptr, "comm is NULL");
  expectError(weft_allreduce(nullptr, recv, 8, WEFT_FLOAT32, WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "sendbuf is NULL");
  expectError(weft_allreduce(send, nullptr, 8, WEFT_FLOAT32, WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "recvbuf is NULL");
  expectError(weft_allreduce(send, recv, 8, static_cast<weft_datatype_t>(12), WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "datatype 12");
  expectError(weft_allreduce(send, recv, 8, static_cast<weft_datatype_t>(-1), WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "datatype -1");
  expectError(weft_allreduce(send, recv, 8, WEFT_FLOAT32, static_cast<weft_op_t>(WEFT_NUM_OPS), c,
                             nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "op 8");
  expectError(weft_allreduce(send, recv, 8, WEFT_FLOAT32, WEFT_BXOR, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "op bxor takes integer datatypes only, not float");
  expectError(weft_reduce_scatter(send, recv, 8, WEFT_BFLOAT16, WEFT_BAND, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "op band takes integer datatypes only");
  expectError(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 1, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "root 1");
  expectError(weft_reduce(send, recv, 8, WEFT_FLOAT32, WEFT_SUM, -1, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "root -1");
  expectError(weft_send(send, 8, WEFT_FLOAT32, 3, c, nullptr), WEFT_ERR_INVALID_ARGUMENT, c, "peer 3");
  expectError(weft_recv(recv, 8, WEFT_FLOAT32, -2, c, nullptr), WEFT_ERR_INVALID_ARGUMENT, c, "peer -2");
  expectError(weft_allreduce(send, send + 2, 4, WEFT_FLOAT32, WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "overlap");
  int dummyStream = 0;
  expectError(weft_allreduce(send, recv, 8, WEFT_FLOAT32, WEFT_SUM, c, &dummyStream),
              WEFT_ERR_INVALID_USAGE, c, "stream");
  CHECK(memcmp(send, sendCopy, sizeof send) == 0);
  CHECK(memcmp(recv, recvCopy, sizeof recv) == 0);
  // NULL buffers with count 0 are fine.
  CHECK(weft_allreduce(nullptr, nullptr, 0, WEFT_FLOAT32, WEFT_SUM, c, nullptr) == WEFT_SUCCESS);
}

TEST_CASE("errors: a call that repeats a good one is still checked in every argument", "[errors]") {
  // The API keeps the last good call's checked arguments (CheckMemo): a
  // call that differs in any one of them must be checked again.
  OneRank one;
  weft_comm_t c = one.comm;
  float send[8], recv[8];
  for (int i = 0; i < 8; ++i) send[i] = recv[i] = 1.0f + i;
  auto good = [&] {
    REQUIRE(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 0, c, nullptr) == WEFT_SUCCESS);
    REQUIRE(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 0, c, nullptr) == WEFT_SUCCESS);
    for (int i = 0; i < 8; ++i) recv[i] = 42.0f;
  };
  good();
  expectError(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 1, c, nullptr), WEFT_ERR_INVALID_ARGUMENT,
              c, "root 1");
  good();
  expectError(weft_broadcast(nullptr, recv, 8, WEFT_FLOAT32, 0, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "sendbuf is NULL");
  good();
  expectError(weft_broadcast(send, nullptr, 8, WEFT_FLOAT32, 0, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "recvbuf is NULL");
  good();
  expectError(weft_broadcast(send, recv, 8, static_cast<weft_datatype_t>(99), 0, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "datatype 99");
  good();
  expectError(weft_broadcast(send, send + 1, 4, WEFT_FLOAT32, 0, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "overlap");
  good();
  expectError(weft_broadcast(send, recv, SIZE_MAX / 2, WEFT_FLOAT32, 0, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "too large");
  good();
  // Same arguments, another collective: allreduce checks its op.
  expectError(weft_allreduce(send, recv, 8, WEFT_FLOAT32, static_cast<weft_op_t>(9), c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, c, "op 9");
  for (int i = 0; i < 8; ++i) CHECK(recv[i] == 42.0f);
  // The same good call on a communicator created after this one is gone
  // (it may get the same address) runs on the new one.
  weft_comm_t d = nullptr;
  REQUIRE(weft_comm_init_all(&d, 1) == WEFT_SUCCESS);
  REQUIRE(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 0, d, nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(d) == WEFT_SUCCESS);
  expectError(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 0, d, nullptr), WEFT_ERR_INVALID_ARGUMENT,
              nullptr, "not a live communicator");
  weft_comm_t e = nullptr;
  REQUIRE(weft_comm_init_all(&e, 1) == WEFT_SUCCESS);
  for (int i = 0; i < 8; ++i) recv[i] = 0.0f;
  CHECK(weft_broadcast(send, recv, 8, WEFT_FLOAT32, 0, e, nullptr) == WEFT_SUCCESS);
  for (int i = 0; i < 8; ++i) CHECK(recv[i] == send[i]);
  CHECK(weft_comm_destroy(e) == WEFT_SUCCESS);
}

TEST_CASE("errors: bad communicator arguments", "[errors]") {
  weft_unique_id_t id;
  REQUIRE(weft_get_unique_id(&id) == WEFT_SUCCESS);
  weft_comm_t comm = nullptr;
  expectError(weft_comm_init_rank(&comm, 0, id, 0), WEFT_ERR_INVALID_ARGUMENT, nullptr, "nranks");
  expectError(weft_comm_init_rank(&comm, 2, id, 2), WEFT_ERR_INVALID_ARGUMENT, nullptr, "rank 2");
  // A count no job has (a launcher's garbage): refused before any connection.
  expectError(weft_comm_init_rank(&comm, 1 << 28, id, 0), WEFT_ERR_INVALID_ARGUMENT, nullptr,
              "weft's limit is 4194304 ranks");
  expectError(weft_comm_init_rank(&comm, 2, id, -1), WEFT_ERR_INVALID_ARGUMENT, nullptr, "rank -1");
  expectError(weft_comm_init_rank(nullptr, 2, id, 0), WEFT_ERR_INVALID_ARGUMENT, nullptr, "NULL");
  weft_unique_id_t junk;
  memset(&junk, 0x17, sizeof junk);
  expectError(weft_comm_init_rank(&comm, 1, junk, 0), WEFT_ERR_INVALID_ARGUMENT, nullptr, "unique id");
  CHECK(comm == nullptr);
  expectError(weft_comm_init_all(&comm, 0), WEFT_ERR_INVALID_ARGUMENT, nullptr, "nranks");
  expectError(weft_get_version(nullptr), WEFT_ERR_INVALID_ARGUMENT, nullptr, "NULL");
  int v = 0;
  CHECK(weft_get_version(&v) == WEFT_SUCCESS);
  CHECK(v == WEFT_VERSION_CODE);
  CHECK(std::string(weft_get_error_string(WEFT_ERR_TIMEOUT)) == "timed out");
  // The build's facts: this version, and the transports every build has.
  const std::string info = weft_get_build_info();
  CHECK(info.rfind("version=" + std::to_string(WEFT_MAJOR) + "." + std::to_string(WEFT_MINOR) +
                       "." + std::to_string(WEFT_PATCH) + " ",
                   0) == 0);
  CHECK(info.find(" transports=self,shm,tcp") != std::string::npos);
  CHECK((info.find(" cuda=yes") != std::string::npos) != (info.find(" cuda=no") != std::string::npos));
}

TEST_CASE("errors: a destroyed communicator is refused", "[errors]") {
  weft_comm_t c = nullptr;
  REQUIRE(weft_comm_init_all(&c, 1) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(c) == WEFT_SUCCESS);
  float x = 1;
  expectError(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr),
              WEFT_ERR_INVALID_ARGUMENT, nullptr, "not a live communicator");
  int r = -1;
  expectError(weft_comm_rank(c, &r), WEFT_ERR_INVALID_ARGUMENT, nullptr, "not a live communicator");
  CHECK(r == -1);
}

TEST_CASE("errors: group misuse", "[errors][group]") {
  expectError(weft_group_end(), WEFT_ERR_INVALID_USAGE, nullptr, "without weft_group_start");
  weft_comm_t c = nullptr;
  REQUIRE(weft_comm_init_all(&c, 1) == WEFT_SUCCESS);
  float x = 1, y = 0;
  // A refused call inside a group makes the whole group fail, and nothing runs.
  REQUIRE(weft_group_start() == WEFT_SUCCESS);
  CHECK(weft_allreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr) == WEFT_SUCCESS);
  CHECK(weft_broadcast(&x, &y, 1, WEFT_FLOAT32, 9, c, nullptr) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_group_end() == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(y == 0);
  weft_comm_t sub = nullptr;
  REQUIRE(weft_group_start() == WEFT_SUCCESS);
  CHECK(weft_comm_split(c, 0, 0, &sub) == WEFT_ERR_INVALID_USAGE);
  CHECK(weft_group_end() == WEFT_SUCCESS);
  CHECK(weft_comm_destroy(c) == WEFT_SUCCESS);
}
