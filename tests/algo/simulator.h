// An in-memory machine that runs every rank's Schedule with no transport:
// per directed pair a FIFO of posted sends and posted receives, matched in
// posting order exactly as transports do. A send's data is read only when
// its receive matches (rendezvous), so a schedule that overwrites a buffer
// before its send completed produces wrong results here. Ranks and channels
// are visited in a random order each round to shake out ordering bugs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algo/schedule.h"

namespace weft::sim {

struct RankBuffers {
  std::vector<uint8_t> send, recv;
};

struct SimResult {
  bool ok = true;
  std::string error;  // deadlock or mismatch, with the steps involved
  size_t messages = 0;
  size_t bytesMoved = 0;
  std::vector<bool> rankDone;  // which ranks finished every step
};

// Runs `args` on all ranks. bufs[r].send / .recv must have sendBytes /
// recvBytes; for in-place args only .recv is used, laid out as the API's
// larger buffer (allgather: recvbuf, input at block rank; reduce_scatter:
// sendbuf, result at block rank). `dt` and `op` drive reductions.
// `holdRank` (>= 0) never runs any step: models a rank that has not arrived.
// `algo` is BuildParams::algo (Auto: the default for the collective).
// `window`: as the engine (src/exec/engine.cc, kScanBudget), a rank looks at
// most this many steps past its first unfinished one for steps to post, so a
// schedule whose next matching receive lies further down deadlocks here as
// it would stall there; 0 looks at every step.
// `hosts`: BuildParams::hosts, the host of each rank (empty: unknown).
// `foldPairs`: BuildParams::foldPairs.
constexpr size_t kEngineScanWindow = 4096;
SimResult run(const CollArgs& args, weft_datatype_t dt, int nranks, size_t chunkBytes, int slots,
              std::vector<RankBuffers>* bufs, uint64_t seed, int holdRank = -1,
              Algo algo = Algo::Auto, size_t window = kEngineScanWindow,
              const std::vector<int>& hosts = {}, bool foldPairs = false);

}  // namespace weft::sim
