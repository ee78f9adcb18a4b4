// Whether a stream-ordered call can run directly on its device buffers,
// with the cuda_ipc transport moving data between the ranks' GPUs and the
// GPU local-work backend reducing (no pinned staging), or must take the
// staged path (src/api/stream_calls.cc: copy in, collective on pinned
// staging, copy out). A pure decision on facts the communicator knows,
// tested on the CPU case by case (tests/cuda, [cuda-rules]).
//
// NOT WIRED YET: no communicator runs the direct path (the engine cannot
// yet bind device buffers to cuda_ipc endpoints next to its host ones;
// docs/cuda.md, "Not done yet"). Every stream-ordered call is staged.
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
};

// The path, and one line saying why (for the INFO log).
DevicePath chooseDevicePath(const DevicePathFacts& f, std::string* why);

}  // namespace cuda
}  // namespace weft
