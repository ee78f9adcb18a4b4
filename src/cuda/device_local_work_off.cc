// device_local_work.h without CUDA.
#include "cuda/device_local_work.h"

namespace weft {
namespace cuda {

Status makeDeviceLocalWork(std::unique_ptr<LocalWork>*, ScratchMem) {
  return Status(WEFT_ERR_CUDA, "GPU local work: this weft was built without CUDA");
}

}  // namespace cuda
}  // namespace weft
