// Point-to-point, groups, nonblocking requests, split and barrier.
#include <catch2/catch.hpp>

#include <numeric>

#include "coll/check.h"

using namespace wtest;

namespace {

// Every rank sends a distinct block to every rank (itself included) and
// receives from every rank, all in one group: must not deadlock, whatever
// the order of calls, and every block lands where it belongs.
std::string allPairs(weft_comm_t comm, int rank, int n, size_t count, bool reverseOrder) {
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(count)), in(n, std::vector<int32_t>(count, -1));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) out[p][i] = static_cast<int32_t>(rank * 1000000 + p * 1000 + i);
  TRY_WEFT(weft_group_start());
  for (int k = 0; k < n; ++k) {
    int p = reverseOrder ? n - 1 - k : k;
    TRY_WEFT(weft_recv(in[p].data(), count, WEFT_INT32, p, comm, nullptr));
    TRY_WEFT(weft_send(out[p].data(), count, WEFT_INT32, p, comm, nullptr));
  }
  TRY_WEFT(weft_group_end());
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      if (in[p][i] != static_cast<int32_t>(p * 1000000 + rank * 1000 + i))
        return "block from rank " + std::to_string(p) + " wrong at " + std::to_string(i);
  return "";
}

}  // namespace

TEST_CASE("p2p: all pairs in one group - threads and processes", "[p2p][group]") {
  for (int n : {1, 2, 3, 5}) {
    INFO("n=" << n);
    REQUIRE(runThreads(n, [](weft_comm_t c, int r, int n) {
              std::string e = allPairs(c, r, n, 1, false);
              if (e.empty()) e = allPairs(c, r, n, 100000, r % 2 == 1);
              if (e.empty()) e = allPairs(c, r, n, 0, false);
              return e;
            }) == "");
  }
  REQUIRE(runProcesses(3, [](weft_comm_t c, int r, int n) { return allPairs(c, r, n, 300000, r == 1); },
                       {"WEFT_TRANSPORTS=tcp", "WEFT_SOCKET_IFNAME=lo", "WEFT_NSOCKS_PER_PEER=3"}) == "");
}

TEST_CASE("p2p: messages to one peer match in order", "[p2p]") {
  REQUIRE(runThreads(2, [](weft_comm_t c, int r, int) -> std::string {
            std::vector<int64_t> v(10);
            if (r == 0) {
              TRY_WEFT(weft_group_start());
              for (int64_t k = 0; k < 10; ++k) {
                v[k] = k * 11;
                TRY_WEFT(weft_send(&v[k], 1, WEFT_INT64, 1, c, nullptr));
              }
              TRY_WEFT(weft_group_end());
            } else {
              for (int k = 0; k < 10; ++k) TRY_WEFT(weft_recv(&v[k], 1, WEFT_INT64, 0, c, nullptr));
              for (int64_t k = 0; k < 10; ++k)
                if (v[k] != k * 11) return "message " + std::to_string(k) + " out of order";
            }
            return "";
          }) == "");
}

TEST_CASE("groups: several collectives in one group - and async requests", "[group][async]") {
  REQUIRE(runThreads(3, [](weft_comm_t c, int r, int n) -> std::string {
            std::vector<float> a(1000, static_cast<float>(r + 1)), b(3000), d(1000);
            TRY_WEFT(weft_group_start());
            TRY_WEFT(weft_allreduce(a.data(), a.data(), 1000, WEFT_FLOAT32, WEFT_SUM, c, nullptr));
            TRY_WEFT(weft_allgather(d.data() , b.data(), 1000, WEFT_FLOAT32, c, nullptr));
            TRY_WEFT(weft_group_end());
            if (a[999] != 6.0f) return "allreduce in group wrong";
            weft_request_t req = nullptr;
            std::vector<double> x(1 << 16, r);
            TRY_WEFT(weft_group_start());
            TRY_WEFT(weft_allreduce(x.data(), x.data(), x.size(), WEFT_FLOAT64, WEFT_MAX, c, nullptr));
            TRY_WEFT(weft_group_end_async(&req));
            int done = 0;
            for (int k = 0; k < 1000000 && !done; ++k) TRY_WEFT(weft_test(req, &done));
            TRY_WEFT(weft_wait(req));
            TRY_WEFT(weft_request_free(req));
            if (x[12345] != n - 1) return "async allreduce wrong";
            weft_result_t ae = WEFT_ERR_INTERNAL;
            TRY_WEFT(weft_comm_get_async_error(c, &ae));
            if (ae != WEFT_SUCCESS) return "async error set after success";
            return "";
          }) == "");
}

TEST_CASE("groups: one thread drives every rank of an init_all set", "[group]") {
  const int n = 4;
  std::vector<weft_comm_t> comms(n);
  REQUIRE(weft_comm_init_all(comms.data(), n) == WEFT_SUCCESS);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(5000));
  for (int r = 0; r < n; ++r) std::fill(bufs[r].begin(), bufs[r].end(), r);
  REQUIRE(weft_group_start() == WEFT_SUCCESS);
  for (int r = 0; r < n; ++r)
    REQUIRE(weft_allreduce(bufs[r].data(), bufs[r].data(), 5000, WEFT_INT32, WEFT_SUM, comms[r], nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_group_end() == WEFT_SUCCESS);
  for (int r = 0; r < n; ++r) CHECK(bufs[r][4999] == 6);
  for (auto c : comms) CHECK(weft_comm_destroy(c) == WEFT_SUCCESS);
}

TEST_CASE("split: colors and keys make new communicators", "[split]") {
  REQUIRE(runThreads(5, [](weft_comm_t c, int r, int) -> std::string {
            weft_comm_t sub = nullptr;
            int color = r == 4 ? WEFT_SPLIT_NOCOLOR : r % 2;
            TRY_WEFT(weft_comm_split(c, color, -r, &sub));
            if (r == 4) return sub == nullptr ? "" : "NOCOLOR gave a communicator";
            int sr = -1, sn = -1;
            TRY_WEFT(weft_comm_rank(sub, &sr));
            TRY_WEFT(weft_comm_size(sub, &sn));
            // Evens {0,2}, odds {1,3}; key -r reverses the order.
            if (sn != 2) return "sub size " + std::to_string(sn);
            int wantRank = (r < 2) ? 1 : 0;
            if (sr != wantRank) return "sub rank " + std::to_string(sr);
            int32_t v = r, sum = 0;
            TRY_WEFT(weft_allreduce(&v, &sum, 1, WEFT_INT32, WEFT_SUM, sub, nullptr));
            if (sum != (r % 2 == 0 ? 2 : 4)) return "sub allreduce " + std::to_string(sum);
            TRY_WEFT(weft_comm_destroy(sub));
            return "";
          }) == "");
}

TEST_CASE("barrier: nobody leaves before everyone arrived", "[barrier]") {
  std::atomic<int> arrived{0};
  REQUIRE(runThreads(6, [&](weft_comm_t c, int r, int n) -> std::string {
            for (int round = 1; round <= 20; ++round) {
              if ((r + round) % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
              arrived.fetch_add(1);
              TRY_WEFT(weft_barrier(c, nullptr));
              if (arrived.load() < round * n) return "left the barrier early in round " + std::to_string(round);
              TRY_WEFT(weft_barrier(c, nullptr));
            }
            return "";
          }) == "");
}

TEST_CASE("p2p: send and receive on one buffer in a group (in-place sendrecv)",
          "[p2p][group][processes]") {
  // Larger than the shm FIFO, so the receive would overwrite data still to be sent.
  REQUIRE(runProcesses(3, [](weft_comm_t c, int r, int n) -> std::string {
            const size_t count = 4u << 20;
            std::vector<int32_t> buf(count);
            for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(r * 7 + i);
            TRY_WEFT(weft_group_start());
            TRY_WEFT(weft_send(buf.data(), count, WEFT_INT32, (r + 1) % n, c, nullptr));
            TRY_WEFT(weft_recv(buf.data(), count, WEFT_INT32, (r + n - 1) % n, c, nullptr));
            TRY_WEFT(weft_group_end());
            const int from = (r + n - 1) % n;
            for (size_t i = 0; i < count; ++i)
              if (buf[i] != static_cast<int32_t>(from * 7 + i)) return "element " + std::to_string(i) + " wrong";
            return "";
          }) == "");
}
