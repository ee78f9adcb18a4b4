// Whether a communicator sets up its device path at init: a cuda_ipc
// endpoint per other rank (next to the host ones) and a GPU backend with
// device scratch for direct device ops (docs/cuda.md). Pure decisions,
// tested on the CPU (tests/cuda, [cuda-rules]); src/api/comm_device.cc
// applies them.
//
// Two stages. offerDevicePath() decides, from facts that cost nothing,
// whether this rank asks CUDA at all: only with WEFT_CUDA_IPC=on, and
// never on a communicator across hosts or without CUDA. The default (auto)
// keeps device buffers staged: the direct path can hang behind a caller's
// CUDA call that waits for the device (docs/cuda.md). A CPU-only program is
// not touched either way unless asked (CUDA is not initialized behind its
// back, nothing is allocated, no message is added). Then every rank publishes its offer with the
// transports' addresses (no extra bootstrap round), and agreeOnDevicePath()
// connects cuda_ipc only when every rank offered, so that all ranks post
// their stream ops on the same FIFOs.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace weft {
namespace cuda {

struct DeviceOfferFacts {
  std::string setting;  // WEFT_CUDA_IPC: "" or "auto", "on" / "1", "off" / "0"
  int nranks = 1;
  int hosts = 1;              // distinct hosts among the comm's ranks
  bool ipcAllowed = true;     // WEFT_TRANSPORTS lets cuda_ipc in
  bool built = true;          // weft was built with CUDA
  bool driverLoaded = false;  // the process has loaded libcuda (cuda::driverLoaded)
};

enum class DeviceOffer : int {
  Skip = 0,  // not considered at all: no CUDA call, nothing published
  Ask = 1,   // ask CUDA (cudaState) whether this rank can offer
};

// INVALID_USAGE naming the value for a bad WEFT_CUDA_IPC. *why: one line.
Status offerDevicePath(const DeviceOfferFacts& f, DeviceOffer* out, std::string* why);

// offers[r]: rank r's published offer: "" (skipped), "0<why>" (asked, but
// CUDA is not usable there) or "1<cuda_ipc address>". True when every rank
// offered ("1"); else *why names the first rank that did not.
bool agreeOnDevicePath(const std::vector<std::string>& offers, std::string* why);

}  // namespace cuda
}  // namespace weft
