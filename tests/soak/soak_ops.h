// One op of the soak (soak_plan.h) on a communicator: fills this rank's
// input, makes the call and checks what it got against what every rank's
// input says it must be.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "soak/soak_plan.h"
#include "weft.h"

namespace soak {

enum class Outcome : int32_t { Ok = 0, Failed = 1, NotRun = 2, Wrong = 3 };

struct OpResult {
  Outcome outcome = Outcome::NotRun;
  weft_result_t rc = WEFT_SUCCESS;
  std::string error;  // the failure, or what was wrong
};

inline OpResult runOp(const OpPlan& o, weft_comm_t comm, int rank, int n) {
  const size_t c = o.count;
  std::vector<int32_t> in, out, want;
  auto fill = [&](std::vector<int32_t>& v, int r, size_t len, uint32_t salt) {
    v.resize(len);
    for (size_t i = 0; i < len; ++i) v[i] = value(r, i, salt);
  };
  weft_result_t rc = WEFT_SUCCESS;
  switch (o.coll) {
    case Coll::AllreduceSum:
    case Coll::AllreduceMax: {
      const bool sum = o.coll == Coll::AllreduceSum;
      fill(in, rank, c, o.salt);
      out.assign(c, -1);
      want.assign(c, sum ? 0 : INT32_MIN);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i)
          want[i] = sum ? want[i] + value(r, i, o.salt) : std::max(want[i], value(r, i, o.salt));
      rc = weft_allreduce(in.data(), out.data(), c, WEFT_INT32, sum ? WEFT_SUM : WEFT_MAX, comm,
                          nullptr);
      break;
    }
    case Coll::Broadcast:
      fill(in, rank, c, o.salt);
      out.assign(c, -1);
      fill(want, o.root, c, o.salt);
      rc = weft_broadcast(in.data(), out.data(), c, WEFT_INT32, o.root, comm, nullptr);
      break;
    case Coll::Reduce:
      fill(in, rank, c, o.salt);
      out.assign(c, -1);
      want = out;  // untouched off the root
      if (rank == o.root) {
        want.assign(c, 0);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < c; ++i) want[i] += value(r, i, o.salt);
      }
      rc = weft_reduce(in.data(), out.data(), c, WEFT_INT32, WEFT_SUM, o.root, comm, nullptr);
      break;
    case Coll::Allgather:
      fill(in, rank, c, o.salt);
      out.assign(c * n, -1);
      want.resize(c * n);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) want[r * c + i] = value(r, i, o.salt);
      rc = weft_allgather(in.data(), out.data(), c, WEFT_INT32, comm, nullptr);
      break;
    case Coll::ReduceScatter:
      fill(in, rank, c * n, o.salt);
      out.assign(c, -1);
      want.assign(c, 0);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) want[i] += value(r, rank * c + i, o.salt);
      rc = weft_reduce_scatter(in.data(), out.data(), c, WEFT_INT32, WEFT_SUM, comm, nullptr);
      break;
    case Coll::Alltoall:
      // Block j of rank r's input goes to rank j.
      fill(in, rank, c * n, o.salt);
      out.assign(c * n, -1);
      want.resize(c * n);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) want[r * c + i] = value(r, rank * c + i, o.salt);
      rc = weft_alltoall(in.data(), out.data(), c, WEFT_INT32, comm, nullptr);
      break;
    case Coll::SendRecvRing: {
      fill(in, rank, c, o.salt);
      out.assign(c, -1);
      const int from = (rank + n - 1) % n;
      fill(want, from, c, o.salt);
      rc = weft_group_start();
      if (rc == WEFT_SUCCESS) {
        weft_result_t a = weft_send(in.data(), c, WEFT_INT32, (rank + 1) % n, comm, nullptr);
        weft_result_t b = weft_recv(out.data(), c, WEFT_INT32, from, comm, nullptr);
        rc = weft_group_end();
        if (rc == WEFT_SUCCESS) rc = a != WEFT_SUCCESS ? a : b;
      }
      break;
    }
    case Coll::Barrier: rc = weft_barrier(comm, nullptr); break;
  }
  OpResult res;
  res.rc = rc;
  if (rc != WEFT_SUCCESS) {
    res.outcome = Outcome::Failed;
    res.error = std::string(weft_get_error_string(rc)) + ": " + weft_get_last_error(comm);
    return res;
  }
  res.outcome = Outcome::Ok;
  for (size_t i = 0; i < want.size(); ++i)
    if (out[i] != want[i]) {
      res.outcome = Outcome::Wrong;
      res.error = "element " + std::to_string(i) + " is " + std::to_string(out[i]) +
                  ", must be " + std::to_string(want[i]);
      break;
    }
  return res;
}

}  // namespace soak
