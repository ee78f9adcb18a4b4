// The buffers of one collective on every rank, filled with wref's inputs,
// and the check of what the ranks computed: shared by the schedule and the
// arena plan tests (int32 elements; in place as simulator.h lays it out).
#pragma once

#include <string>
#include <vector>

#include "algo/reference.h"
#include "algo/schedule.h"
#include "algo/simulator.h"

namespace wref {

constexpr int32_t kPoison = 0x5A5A5A5A;

// Every rank's buffers for `a` (eltSize 4), inputs from value(rank, i, seed).
inline std::vector<weft::sim::RankBuffers> makeBuffers(const weft::CollArgs& a, int n,
                                                       uint64_t seed) {
  using weft::CollType;
  std::vector<weft::sim::RankBuffers> bufs(n);
  const size_t E = a.count;
  for (int r = 0; r < n; ++r) {
    bufs[r].send.resize(weft::sendBytes(a, n, r));
    bufs[r].recv.resize(a.inPlace && a.type == CollType::ReduceScatter ? weft::sendBytes(a, n, r)
                                                                       : weft::recvBytes(a, n, r));
    int32_t* rv = reinterpret_cast<int32_t*>(bufs[r].recv.data());
    for (size_t i = 0; i < bufs[r].recv.size() / 4; ++i) rv[i] = kPoison;
    // The input, in the send buffer or (in place) where the API puts it.
    int32_t* in = reinterpret_cast<int32_t*>(bufs[r].send.data());
    size_t inCount = bufs[r].send.size() / 4;
    if (a.inPlace) {
      in = rv;
      inCount = bufs[r].recv.size() / 4;
      if (a.type == CollType::AllGather) {
        in = rv + r * E;
        inCount = E;
      }
    }
    for (size_t i = 0; i < inCount; ++i) in[i] = value(r, i, seed);
  }
  return bufs;
}

// "" when every rank holds what `a` should leave there; else which rank
// and element is wrong.
inline std::string checkBuffers(const weft::CollArgs& a, int n, uint64_t seed,
                                const std::vector<weft::sim::RankBuffers>& bufs) {
  using weft::CollType;
  const size_t E = a.count;
  for (int r = 0; r < n; ++r) {
    const int32_t* out = reinterpret_cast<const int32_t*>(bufs[r].recv.data());
    if (a.inPlace && a.type == CollType::ReduceScatter) out += r * E;
    size_t bad = 0, first = 0;
    int32_t got = 0, want0 = 0;
    auto check = [&](size_t i, int32_t want) {
      if (out[i] != want && bad++ == 0) {
        first = i;
        got = out[i];
        want0 = want;
      }
    };
    switch (a.type) {
      case CollType::AllReduce:
        for (size_t i = 0; i < E; ++i) check(i, reduced(a.op, n, i, seed));
        break;
      case CollType::ReduceScatter:
        for (size_t i = 0; i < E; ++i) check(i, reduced(a.op, n, r * E + i, seed));
        break;
      case CollType::AllGather:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < E; ++i) check(q * E + i, value(q, i, seed));
        break;
      case CollType::Broadcast:
        for (size_t i = 0; i < E; ++i) check(i, value(a.root, i, seed));
        break;
      case CollType::Reduce:
        for (size_t i = 0; i < E; ++i)
          check(i, r == a.root ? reduced(a.op, n, i, seed)
                               : (a.inPlace ? value(r, i, seed) : kPoison));
        break;
      case CollType::AllToAll:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < E; ++i) check(q * E + i, value(q, r * E + i, seed));
        break;
      default:
        break;
    }
    if (bad)
      return "rank " + std::to_string(r) + ": " + std::to_string(bad) + " bad elements, first " +
             std::to_string(first) + " (" + std::to_string(got) + ", want " +
             std::to_string(want0) + ")";
  }
  return "";
}

}  // namespace wref
