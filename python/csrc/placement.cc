#include "placement.h"

#include <c10/util/Exception.h>

#ifdef WEFT_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace weft_torch {

bool cudaTensorsSupported() {
#ifdef WEFT_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

Placement placementOf(std::initializer_list<const std::vector<at::Tensor>*> lists, const char* call) {
  Placement p;
  bool first = true;
  for (const std::vector<at::Tensor>* list : lists) {
    for (const at::Tensor& t : *list) {
      if (!t.defined()) continue;
      if (first) {
        p.device = t.device();
        first = false;
      } else {
        TORCH_CHECK(t.device() == p.device, "weft: ", call, ": tensors on ", p.device, " and ",
                    t.device(), "; the tensors of one call must be on one device");
      }
    }
  }
  if (p.cuda()) {
#ifdef WEFT_TORCH_CUDA
    p.stream = c10::cuda::getCurrentCUDAStream(p.device.index()).stream();
#else
    TORCH_CHECK(false, "weft: ", call, ": this build of the weft backend takes CPU tensors");
#endif
  }
  return p;
}

}  // namespace weft_torch
