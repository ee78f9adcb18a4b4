// The GPU backend of the engine's local steps (exec/local_work.h): each
// reduce, copy or divide of a schedule is a kernels/cuda kernel (or a
// cudaMemcpyAsync) launched on a non-blocking stream of the communicator,
// followed by an event; done() asks the events in order (cudaEventQuery:
// never blocks), so the engine keeps posting other chunks' transfers while
// the GPU works. The buffers must be reachable by the device: device
// memory, managed memory, or mapped pinned host memory (the stream path's
// staging); scratch comes from allocScratch as mapped pinned memory, which
// both the GPU and the host transports can use, or, for the direct device
// path (cuda_ipc moves the data), as device memory.
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

// Where allocScratch puts a schedule's scratch: mapped pinned host memory
// (the staged path: the host transports reach it too) or device memory of
// the backend's GPU (the direct path: only kernels and cuda_ipc touch it).
enum class ScratchMem { MappedPinned, Device };

// A backend on the calling thread's current device. An error (no device,
// built without CUDA, stream creation failed) says why.
Status makeDeviceLocalWork(std::unique_ptr<LocalWork>* out,
                           ScratchMem scratch = ScratchMem::MappedPinned);

}  // namespace cuda
}  // namespace weft
