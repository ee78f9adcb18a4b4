// weft_get_build_info: what was compiled in, for launchers and bug reports
// (weftrun --check-build). Static facts only; nothing is probed.
#include "cuda/runtime.h"
#include "weft.h"

#include <string>

namespace {

std::string buildInfo() {
  std::string s = "version=" + std::to_string(WEFT_MAJOR) + "." + std::to_string(WEFT_MINOR) +
                  "." + std::to_string(WEFT_PATCH);
  s += " transports=self,shm,tcp";
#ifdef WEFT_HAVE_UCX
  s += ",ucx";
#endif
#ifdef WEFT_HAVE_IBVERBS
  s += ",ibverbs";
#endif
  const bool cuda = weft::cuda::cudaBuilt();
  if (cuda) s += ",cuda_ipc";
  s += cuda ? " cuda=yes" : " cuda=no";
#ifdef WEFT_TEST_HOOKS
  s += " test_hooks=yes";  // WEFT_TEST_* honoured (a test build; docs/env.md)
#endif
  return s;
}

}  // namespace

extern "C" const char* weft_get_build_info(void) {
  static const std::string info = buildInfo();
  return info.c_str();
}
