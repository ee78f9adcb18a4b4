// Where stream calls' local steps run (src/cuda/local_work_choice.h): the
// decision table, on the CPU; and, without a device, the GPU backend
// refusing with the reason instead of half-working.
#include "cuda/local_work_choice.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "cuda/device_local_work.h"
#include "cuda/runtime.h"

using namespace weft;
using namespace weft::cuda;

namespace {

CudaState state(bool usable, const char* why = "") {
  CudaState s;
  s.usable = usable;
  s.device = usable ? 0 : -1;
  s.why = why;
  return s;
}

}  // namespace

TEST_CASE("local work choice: the table", "[cuda-rules]") {
  struct Case {
    const char* setting;
    bool usable;
    bool ok, gpu;
    const char* says;  // in the log line or the error
  };
  const Case cases[] = {
      {"", true, true, false, "host"},
      {"", false, true, false, "host"},
      {"host", true, true, false, "host"},
      {"gpu", true, true, true, "GPU kernels"},
      {"gpu", false, true, false, "no CUDA device: none here"},
      {"GPU!", true, false, false, "WEFT_CUDA_LOCAL_WORK=GPU!: expected host or gpu"},
  };
  for (const Case& c : cases) {
    INFO("setting '" << c.setting << "' usable " << c.usable);
    LocalWorkChoice out;
    out.why = "untouched";
    Status st = chooseLocalWork(c.setting, state(c.usable, "no CUDA device: none here"), &out);
    REQUIRE(st.isOk() == c.ok);
    if (!c.ok) {
      CHECK(st.code() == WEFT_ERR_INVALID_USAGE);
      CHECK(st.message().find(c.says) != std::string::npos);
      CHECK(out.why == "untouched");  // not written on refusal
      continue;
    }
    CHECK(out.gpu == c.gpu);
    CHECK(out.why.find(c.says) != std::string::npos);
  }
}

TEST_CASE("GPU local work without a device: refused, saying why", "[cuda-absent]") {
  const CudaState cs = cudaState();
  if (cs.usable) {
    WARN("SKIP [cuda-absent]: a CUDA device is present");
    return;
  }
  std::unique_ptr<LocalWork> lw;
  Status st = makeDeviceLocalWork(&lw);
  CHECK(st.code() == WEFT_ERR_CUDA);
  CHECK(st.message().find(cs.why) != std::string::npos);
  CHECK(lw == nullptr);
}
