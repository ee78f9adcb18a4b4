// offerDevicePath / agreeOnDevicePath (src/cuda/device_setup.h): when a
// communicator sets up cuda_ipc and the GPU backend at init. Above all:
// only when asked (WEFT_CUDA_IPC=on; the default keeps device buffers
// staged), and the ranks connect only when every one offered.
#include "cuda/device_setup.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::cuda;

TEST_CASE("device setup: which ranks ask CUDA at init", "[cuda-rules]") {
  struct Case {
    const char* name;
    const char* setting;
    int nranks, hosts;
    bool allowed, built, driver;
    DeviceOffer want;
    const char* says;
  };
  const DeviceOffer A = DeviceOffer::Ask, S = DeviceOffer::Skip;
  const Case cases[] = {
      {"auto, driver loaded, one host: staged", "", 4, 1, true, true, true, S, "staged"},
      {"auto spelled out", "auto", 2, 1, true, true, true, S, "WEFT_CUDA_IPC=on sets"},
      {"auto, CPU-only process: nothing asked", "", 4, 1, true, true, false, S, "not loaded"},
      {"on, CPU-only process so far: asked", "on", 2, 1, true, true, false, A, "asking"},
      {"1 is on", "1", 2, 1, true, true, false, A, "asking"},
      {"off", "off", 2, 1, true, true, true, S, "WEFT_CUDA_IPC=off"},
      {"0 is off", "0", 2, 1, true, true, true, S, "WEFT_CUDA_IPC=off"},
      {"two hosts", "on", 4, 2, true, true, true, S, "on 2 hosts"},
      {"WEFT_TRANSPORTS without cuda_ipc", "", 2, 1, false, true, true, S, "leaves cuda_ipc"},
      {"one rank: the GPU backend only, whatever WEFT_TRANSPORTS", "on", 1, 1, false, true, true, A,
       "asking"},
      {"built without CUDA", "on", 2, 1, true, false, true, S, "without CUDA"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    DeviceOfferFacts f;
    f.setting = c.setting;
    f.nranks = c.nranks;
    f.hosts = c.hosts;
    f.ipcAllowed = c.allowed;
    f.built = c.built;
    f.driverLoaded = c.driver;
    DeviceOffer got = DeviceOffer::Ask;
    std::string why;
    REQUIRE(offerDevicePath(f, &got, &why).isOk());
    CHECK(got == c.want);
    INFO(why);
    CHECK(why.find(c.says) != std::string::npos);
  }
}

TEST_CASE("device setup: a bad WEFT_CUDA_IPC is an error naming it", "[cuda-rules]") {
  DeviceOfferFacts f;
  f.setting = "yes";
  DeviceOffer got = DeviceOffer::Skip;
  std::string why;
  Status st = offerDevicePath(f, &got, &why);
  CHECK(st.code() == WEFT_ERR_INVALID_USAGE);
  CHECK(st.message().find("WEFT_CUDA_IPC=yes") != std::string::npos);
}

TEST_CASE("device setup: cuda_ipc only when every rank offered", "[cuda-rules]") {
  std::string why;
  CHECK(agreeOnDevicePath({"1a", "1b", "1c"}, &why));
  CHECK(why.find("all 3 ranks") != std::string::npos);
  CHECK_FALSE(agreeOnDevicePath({"1a", "", "1c"}, &why));
  CHECK(why.find("rank 1 did not offer") != std::string::npos);
  CHECK_FALSE(agreeOnDevicePath({"1a", "1b", "0no CUDA device"}, &why));
  CHECK(why.find("rank 2 cannot: no CUDA device") != std::string::npos);
  CHECK_FALSE(agreeOnDevicePath({"", ""}, &why));
  CHECK(why.find("rank 0") != std::string::npos);
}
