// weft-perf -G: device buffers through the CUDA runtime (device.cc with
// CUDA, device_off.cc without). Called only in the ranks' own processes,
// after any fork: CUDA does not survive a fork once initialized.
#pragma once

#include <cstddef>
#include <string>

namespace weftperf {

struct DeviceBufs {
  char* send = nullptr;
  char* recv = nullptr;
  void* stream = nullptr;  // a cudaStream_t
};

// Selects device rank % devices, allocates two buffers of `bytes` and a
// stream. False with *err on failure (no device, built without CUDA).
bool deviceOpen(int rank, size_t bytes, DeviceBufs* d, std::string* err);
void deviceClose(DeviceBufs* d);
// Synchronous copies and a stream sync; false with *err on a CUDA error.
bool deviceUpload(void* dst, const void* src, size_t bytes, std::string* err);
bool deviceDownload(void* dst, const void* src, size_t bytes, std::string* err);
bool deviceSync(const DeviceBufs& d, std::string* err);

}  // namespace weftperf
