// perf/device.h in a weft-perf built without CUDA: -G is refused.
#include "perf/device.h"

namespace weftperf {

bool deviceOpen(int, size_t, DeviceBufs*, std::string* err) {
  *err = "this weft-perf was built without CUDA";
  return false;
}
void deviceClose(DeviceBufs*) {}
bool deviceUpload(void*, const void*, size_t, std::string* err) {
  *err = "built without CUDA";
  return false;
}
bool deviceDownload(void*, const void*, size_t, std::string* err) {
  *err = "built without CUDA";
  return false;
}
bool deviceSync(const DeviceBufs&, std::string* err) {
  *err = "built without CUDA";
  return false;
}

}  // namespace weftperf
