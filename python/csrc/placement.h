// Where an op's tensors live, and the stream weft is handed for them: none
// for CPU tensors; for CUDA tensors (a build with WEFT_TORCH_CUDA) the
// calling thread's current stream on their device, so that weft's work is
// ordered with the caller's kernels as ProcessGroupNCCL's is.
#pragma once

#include <weft.h>

#include <ATen/ATen.h>

#include <initializer_list>
#include <vector>

namespace weft_torch {

struct Placement {
  c10::Device device{c10::kCPU};
  weft_stream_t stream = nullptr;
  bool cuda() const { return device.is_cuda(); }
};

// Whether this build takes CUDA tensors.
bool cudaTensorsSupported();
// The one device of every defined tensor in `lists` and its stream. Raises,
// naming `call`, when they are on different devices.
Placement placementOf(std::initializer_list<const std::vector<at::Tensor>*> lists, const char* call);

}  // namespace weft_torch
