// Helpers for the in-process shim tests: ranks as threads of this process,
// each running a body that returns "" or the first failure it saw (Catch2's
// checks are not thread-safe, so threads report text).
#pragma once

#include <nccl.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace shimtest {

inline std::string describe(ncclResult_t r) {
  return std::string(ncclGetErrorString(r)) + ": " + ncclGetLastError(nullptr);
}

#define SHIM_TRY(call)                                                                  \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) return std::string(#call) + " -> " + shimtest::describe(r_); \
  } while (0)

// A failing call: its code must be `want` and the last error must name `word`.
inline std::string expectError(ncclResult_t got, ncclResult_t want, const char* word,
                               const char* what) {
  std::string msg = ncclGetLastError(nullptr);
  if (got != want)
    return std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(want) +
           " (" + msg + ")";
  if (msg.find(word) == std::string::npos)
    return std::string(what) + ": last error \"" + msg + "\" does not mention \"" + word + "\"";
  return "";
}

// Runs body(rank) on n threads; returns every rank's failure, one a line.
inline std::string onThreads(int n, const std::function<std::string(int)>& body) {
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back([&, r] { errs[r] = body(r); });
  for (auto& t : ts) t.join();
  std::string all;
  for (int r = 0; r < n; ++r)
    if (!errs[r].empty()) all += "rank " + std::to_string(r) + ": " + errs[r] + "\n";
  return all;
}

// n communicators of this process (ncclCommInitAll), destroyed at scope end.
struct ThreadRanks {
  std::vector<ncclComm_t> comms;
  ncclResult_t init;
  explicit ThreadRanks(int n) : comms(n, nullptr) {
    init = ncclCommInitAll(comms.data(), n, nullptr);
  }
  ~ThreadRanks() {
    for (ncclComm_t c : comms)
      if (c) ncclCommDestroy(c);
  }
};

}  // namespace shimtest
