// One collective on one rank, with inputs from values.h, checked element by
// element. Returns "" or the first mismatch.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "coll/harness.h"
#include "coll/values.h"

namespace wtest {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll };
inline const Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast,     Coll::Reduce,
                                 Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll};
inline const char* collName(Coll c) {
  const char* names[] = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall"};
  return names[static_cast<int>(c)];
}

inline std::string runAndCheck(weft_comm_t comm, int rank, int n, Coll coll, weft_datatype_t dt,
                               weft_op_t op, size_t count, bool inPlace, int root) {
  const size_t e = eltSize(dt);
  const bool full = coll == Coll::AllGather || coll == Coll::AllToAll;
  const size_t sendCount = (coll == Coll::ReduceScatter || coll == Coll::AllToAll) ? count * n : count;
  const size_t recvCount = full ? count * n : count;
  // In place needs one buffer large enough for both views.
  const size_t bufCount = std::max(sendCount, recvCount);
  std::vector<unsigned char> sendv(sendCount * e + 1), recvv(bufCount * e + 1, 0xA5);
  // Sentinels past the end catch overruns.
  sendv.back() = 0x3C;
  recvv.back() = 0x3C;
  const weft_op_t inOp = (coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter) ? op : WEFT_MAX;
  void* sendbuf = sendv.data();
  void* recvbuf = recvv.data();
  auto fill = [&](void* base, size_t nelts, size_t offsetIdx) {
    for (size_t i = 0; i < nelts; ++i) store(base, i, dt, inputValue(dt, inOp, rank, n, offsetIdx + i));
  };
  if (inPlace) {
    switch (coll) {
      case Coll::AllGather:
        sendbuf = recvv.data() + rank * count * e;
        fill(sendbuf, count, 0);
        break;
      case Coll::ReduceScatter:
        fill(recvv.data(), sendCount, 0);
        sendbuf = recvv.data();
        recvbuf = recvv.data() + rank * count * e;
        break;
      default:
        fill(recvv.data(), sendCount, 0);
        sendbuf = recvbuf;
        break;
    }
  } else {
    fill(sendv.data(), sendCount, 0);
  }
  std::vector<unsigned char> before = recvv;
  weft_result_t r = WEFT_SUCCESS;
  switch (coll) {
    case Coll::AllReduce: r = weft_allreduce(sendbuf, recvbuf, count, dt, op, comm, nullptr); break;
    case Coll::Broadcast: r = weft_broadcast(sendbuf, recvbuf, count, dt, root, comm, nullptr); break;
    case Coll::Reduce: r = weft_reduce(sendbuf, recvbuf, count, dt, op, root, comm, nullptr); break;
    case Coll::AllGather: r = weft_allgather(sendbuf, recvbuf, count, dt, comm, nullptr); break;
    case Coll::ReduceScatter: r = weft_reduce_scatter(sendbuf, recvbuf, count, dt, op, comm, nullptr); break;
    case Coll::AllToAll: r = weft_alltoall(sendbuf, recvbuf, count, dt, comm, nullptr); break;
  }
  std::string what = std::string(collName(coll)) + " count " + std::to_string(count) + " dtype " +
                     std::to_string(dt) + " op " + std::to_string(op) + (inPlace ? " in place" : "") +
                     " root " + std::to_string(root) + " n " + std::to_string(n);
  if (r != WEFT_SUCCESS) return what + ": " + describe(r, comm);
  if (recvv.back() != 0x3C || sendv.back() != 0x3C) return what + ": wrote past the end";
  const unsigned char* out = static_cast<const unsigned char*>(recvbuf);
  for (size_t i = 0; i < recvCount; ++i) {
    int64_t want = 0;
    bool check = true;
    switch (coll) {
      case Coll::AllReduce: want = expectedValue(dt, op, n, i); break;
      case Coll::ReduceScatter: want = expectedValue(dt, op, n, rank * count + i); break;
      case Coll::Reduce:
        if (rank == root) want = expectedValue(dt, op, n, i);
        else check = false;
        break;
      case Coll::Broadcast: want = inputValue(dt, inOp, root, n, i); break;
      case Coll::AllGather: want = inputValue(dt, inOp, static_cast<int>(i / count), n, i % count); break;
      case Coll::AllToAll: {
        int src = static_cast<int>(i / count);
        want = inputValue(dt, inOp, src, n, rank * count + i % count);
        break;
      }
    }
    if (check && !equals(out, i, dt, want))
      return what + ": element " + std::to_string(i) + " wrong on rank " + std::to_string(rank);
  }
  // A non-root of reduce must not touch recvbuf (out of place).
  if (coll == Coll::Reduce && rank != root && !inPlace && recvv != before)
    return what + ": non-root recvbuf was written";
  return "";
}

}  // namespace wtest
