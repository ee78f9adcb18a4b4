#include "cuda/device_setup.h"

namespace weft {
namespace cuda {

Status offerDevicePath(const DeviceOfferFacts& f, DeviceOffer* out, std::string* why) {
  const std::string& s = f.setting;
  const bool on = s == "on" || s == "1", off = s == "off" || s == "0";
  if (!on && !off && !s.empty() && s != "auto")
    return Status(WEFT_ERR_INVALID_USAGE,
                  "WEFT_CUDA_IPC=" + s + ": expected auto, on (1) or off (0)");
  *out = DeviceOffer::Skip;
  if (off) {
    *why = "off (WEFT_CUDA_IPC=off)";
  } else if (!f.built) {
    *why = "off: this weft was built without CUDA";
  } else if (f.hosts > 1) {
    *why = strFormat("off: the %d ranks are on %d hosts", f.nranks, f.hosts);
  } else if (!f.ipcAllowed && f.nranks > 1) {
    *why = "off: WEFT_TRANSPORTS leaves cuda_ipc out";
  } else if (!on) {
    // The direct path's ops make CUDA calls on the progress thread while the
    // caller's stream is held; a caller's call that waits for the device
    // under the driver's context lock (cudaFree, a kernel's first load) can
    // then wait forever (docs/cuda.md). Staged ops make none.
    *why = strFormat(
        "off: by default device buffers are staged through pinned host memory%s "
        "(WEFT_CUDA_IPC=on sets the direct path up; docs/cuda.md says when it can hang)",
        f.driverLoaded ? "" : " (and this process had not loaded the CUDA driver)");
  } else {
    *out = DeviceOffer::Ask;
    *why = "asking CUDA";
  }
  return Status();
}

bool agreeOnDevicePath(const std::vector<std::string>& offers, std::string* why) {
  for (size_t r = 0; r < offers.size(); ++r) {
    const std::string& o = offers[r];
    if (o.empty() || o[0] != '1') {
      *why = strFormat("off: rank %zu %s", r,
                       o.empty() ? "did not offer it" : ("cannot: " + o.substr(1)).c_str());
      return false;
    }
  }
  *why = strFormat("on: all %zu ranks on this host", offers.size());
  return true;
}

}  // namespace cuda
}  // namespace weft
