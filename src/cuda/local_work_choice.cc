#include "cuda/local_work_choice.h"

#include "core/log.h"
#include "cuda/device_local_work.h"
#include "cuda/runtime.h"
#include "exec/engine.h"

namespace weft {
namespace cuda {

Status chooseLocalWork(const std::string& setting, const CudaState& cuda, LocalWorkChoice* out) {
  LocalWorkChoice c;
  if (setting.empty() || setting == "host") {
    c.why = "host (WEFT_CUDA_LOCAL_WORK=gpu runs them as kernels)";
  } else if (setting == "gpu") {
    c.gpu = cuda.usable;
    c.why = cuda.usable ? "GPU kernels (WEFT_CUDA_LOCAL_WORK=gpu)"
                        : "host: WEFT_CUDA_LOCAL_WORK=gpu, but " + cuda.why;
  } else {
    return Status(WEFT_ERR_INVALID_USAGE,
                  "WEFT_CUDA_LOCAL_WORK=" + setting + ": expected host or gpu");
  }
  *out = c;
  return Status();
}

void setUpStreamLocalWork(const std::string& setting, int rank, Engine* engine) {
  // Asking CUDA only when the GPU is wanted: a CPU-only program never
  // initializes CUDA behind its back.
  const CudaState cs = setting == "gpu" ? cudaState() : CudaState();
  LocalWorkChoice c;
  Status st = chooseLocalWork(setting, cs, &c);
  if (st.isError()) {
    WEFT_WARN(kInit, "%s; running them on the host", st.message().c_str());
    return;
  }
  if (c.gpu) {
    std::unique_ptr<LocalWork> lw;
    st = makeDeviceLocalWork(&lw);
    if (st.isError()) {
      WEFT_WARN(kInit, "rank %d: %s; stream calls' local steps run on the host", rank,
                st.message().c_str());
      return;
    }
    engine->setStreamLocalWork(std::move(lw));
  }
  if (rank == 0) WEFT_INFO(kInit, "stream calls' local steps: %s", c.why.c_str());
}

}  // namespace cuda
}  // namespace weft
