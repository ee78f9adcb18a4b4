// Which path a call's buffers and stream take: the host engine (stream
// NULL) or stream-ordered device execution. Pure rules over what CUDA
// reported for each buffer (src/cuda/runtime.h classifies), so that every
// case is tested on machines without a GPU.
//
//   stream NULL:  pageable, pinned and managed memory run on the host path
//                 (the call returns when done, as before); device memory is
//                 refused: NULL means "host memory, no stream".
//   stream given: CUDA must be usable; device, managed and mapped pinned
//                 memory (on the current device) run stream-ordered;
//                 pageable host memory is refused (nothing on the stream
//                 could write it in order), as are buffers of another
//                 device and pinned memory the device cannot address.
#pragma once

#include <string>

#include "core/status.h"

namespace weft {
namespace cuda {

enum class MemKind : int { Host = 0, Pinned = 1, Device = 2, Managed = 3 };
const char* memKindName(MemKind k);  // "pageable host", "pinned host", "device", "managed"

struct BufferDesc {
  const char* role = "buffer";  // "sendbuf", "recvbuf": for messages
  const void* ptr = nullptr;    // NULL: not used by this call (skipped)
  MemKind kind = MemKind::Host;
  int device = -1;            // device or managed memory: its device
  void* devicePtr = nullptr;  // the address kernels use (pinned: may be NULL)
};

// What the process's CUDA can do (src/cuda/runtime.h fills it once).
struct CudaState {
  bool usable = false;
  std::string why;  // when not usable: "this weft was built without CUDA", "no CUDA device: ..."
  int device = -1;  // the calling thread's current device
};

enum class ExecPath : int { Host = 0, Stream = 1 };

// Decides the path of call `name` (for messages) over bufs[0, n); stream
// tells whether one was given. INVALID_USAGE naming the buffer and the rule
// when refused; *path is set only on success.
Status choosePath(const char* name, const BufferDesc* bufs, int n, bool stream,
                  const CudaState& cuda, ExecPath* path);

}  // namespace cuda
}  // namespace weft
