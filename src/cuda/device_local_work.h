// The GPU backend of the engine's local steps (exec/local_work.h): each
// reduce, copy or divide of a schedule is a kernels/cuda kernel (or a
// cudaMemcpyAsync) launched on a non-blocking stream of the communicator,
// followed by an event; done() asks the events in order (cudaEventQuery:
// never blocks), so the engine keeps posting other chunks' transfers while
// the GPU works. The buffers must be reachable by the device: device
// memory, managed memory, or mapped pinned host memory (the stream path's
// staging); scratch comes from allocScratch as mapped pinned memory, which
// both the GPU and the host transports can use.
//
// Built from device_local_work.cc with CUDA, else device_local_work_off.cc
// (which says "built without CUDA"). Nothing of it has run on a GPU yet
// (docs/cuda.md).
#pragma once

#include <memory>

#include "core/status.h"
#include "exec/local_work.h"

namespace weft {
namespace cuda {

// A backend on the calling thread's current device. An error (no device,
// built without CUDA, stream creation failed) says why.
Status makeDeviceLocalWork(std::unique_ptr<LocalWork>* out);

}  // namespace cuda
}  // namespace weft
