// Whether a stream-ordered call can run directly on its device buffers,
// with the cuda_ipc transport moving data between the ranks' GPUs and the
// GPU local-work backend reducing (no pinned staging), or must take the
// staged path (src/api/stream_calls.cc: copy in, collective on pinned
// staging, copy out). A pure decision on facts the communicator knows,
// tested on the CPU case by case (tests/cuda, [cuda-rules]).
//
// src/api/stream_calls.cc asks it for every stream-ordered call or group
// (and logs the answer at INFO when it changes); the communicator provides
// the facts it set up at init (src/api/comm_device.cc).
#pragma once

#include <string>
#include <vector>

#include "cuda/mem_rules.h"

namespace weft {
namespace cuda {

enum class DevicePath : int { Staged = 0, Direct = 1 };

struct DevicePathFacts {
  const BufferDesc* bufs = nullptr;  // the call's (or group's) buffers; NULL ptrs are skipped
  int nbufs = 0;
  int nranks = 1;
  int hosts = 1;           // distinct hosts among the comm's ranks
  bool ipcAllowed = true;  // WEFT_TRANSPORTS lets cuda_ipc in
  bool ipcBuilt = true;    // weft was built with CUDA (cuda_ipc exists)
  // ipcReach[p]: CUDA IPC works from this rank to rank p (the transport
  // connected: handles opened, or the same process). Size nranks.
  std::vector<bool> ipcReach;
  // This rank has a GPU backend (kernels, device scratch) for direct ops.
  bool gpuBackend = true;
  // The device the comm's device path was set up on (-1: any): buffers of
  // another device are staged (its kernels and FIFOs live on this one).
  int device = -1;
  // A send or receive of the call to this very rank (no cuda_ipc endpoint
  // to oneself: the host self transport carries it, on staging).
  bool selfTransfer = false;
  // In a group, a send reads a range that another call receives into: the
  // staging's copy of the send data keeps the two apart; direct would race.
  bool crossOverlap = false;
  // A reproducible reduction (CollArgs::repro, WEFT_REPRO): its folds run
  // on the host, on staging.
  bool repro = false;
};

// The path, and one line saying why (for the INFO log).
DevicePath chooseDevicePath(const DevicePathFacts& f, std::string* why);

}  // namespace cuda
}  // namespace weft
