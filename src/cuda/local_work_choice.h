// Where the local steps (reduce, copy, divide) of stream-ordered collectives
// run: a pure decision, tested on the CPU (tests/cuda, [cuda-rules]), and
// the communicator's hook that applies it.
//
// The stream path runs a collective on mapped pinned staging. Its local
// steps run on the host by default: the staging is host memory, which the
// host executor reduces at memory speed, while a GPU kernel would read and
// write it across PCIe. WEFT_CUDA_LOCAL_WORK=gpu runs them as kernels on a
// stream of the communicator instead (src/cuda/device_local_work.h).
#pragma once

#include <string>

#include "core/status.h"
#include "cuda/mem_rules.h"

namespace weft {

class Engine;

namespace cuda {

struct LocalWorkChoice {
  bool gpu = false;
  std::string why;  // one line for the INFO log
};

// `setting` is WEFT_CUDA_LOCAL_WORK ("" or "host": the host; "gpu": the
// GPU when CUDA is usable, else the host, saying why). Anything else is an
// INVALID_USAGE error naming the value.
Status chooseLocalWork(const std::string& setting, const CudaState& cuda, LocalWorkChoice* out);

// Applies the choice to `engine` (logged at INFO on rank 0); a GPU backend
// that cannot be made leaves the host in place, with a warning.
void setUpStreamLocalWork(const std::string& setting, int rank, Engine* engine);

}  // namespace cuda
}  // namespace weft
