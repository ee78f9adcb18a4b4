// The CUDA runtime layer (src/cuda/runtime.h): on a machine without a GPU
// (or a weft built without CUDA) it must say so and keep host memory on the
// host path; with a device, cudaPointerGetAttributes must tell every kind of
// memory apart ([cuda], skipped here without one).
#include "cuda/runtime.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/cuda/device_util.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace weft;
using namespace weft::cuda;

TEST_CASE("CUDA absent: 'no device' is reported and pointers are host memory", "[cuda-absent]") {
  CudaState s = cudaState();
  if (s.usable) {
    WARN("a CUDA device is present: the no-device path is not what runs here");
    return;
  }
  CHECK(cudaBuilt() == (WEFT_HAS_CUDA != 0));
  if (cudaBuilt())
    CHECK(s.why.find("no CUDA device") == 0);
  else
    CHECK(s.why == "this weft was built without CUDA");
  void* p = malloc(256);
  BufferDesc d = describePointer("sendbuf", p);
  CHECK(d.kind == MemKind::Host);
  CHECK(d.ptr == p);
  CHECK(std::string(d.role) == "sendbuf");
  free(p);
  // Stream-side calls fail with a CUDA error, they do not crash.
  void* pinned = nullptr;
  Status st = pinnedAlloc(4096, &pinned);
  CHECK(st.code() == WEFT_ERR_CUDA);
  CHECK(!st.message().empty());
  CHECK(pinned == nullptr);
  void* ev = nullptr;
  CHECK(eventCreate(&ev).code() == WEFT_ERR_CUDA);
  // Asking twice gives the same answer (probed once).
  CHECK(cudaState().why == s.why);
}

TEST_CASE("CUDA present: every memory kind is told apart", "[cuda]") {
  if (!haveDevice()) return;
#if WEFT_HAS_CUDA
  CudaState s = cudaState();
  REQUIRE(s.device >= 0);
  void* host = malloc(4096);
  void *dev = nullptr, *pinned = nullptr, *managed = nullptr;
  REQUIRE(cudaMalloc(&dev, 4096) == cudaSuccess);
  REQUIRE(cudaHostAlloc(&pinned, 4096, cudaHostAllocMapped) == cudaSuccess);
  REQUIRE(cudaMallocManaged(&managed, 4096) == cudaSuccess);
  CHECK(describePointer("a", host).kind == MemKind::Host);
  BufferDesc d = describePointer("a", static_cast<char*>(dev) + 100);
  CHECK(d.kind == MemKind::Device);
  CHECK(d.device == s.device);
  d = describePointer("a", pinned);
  CHECK(d.kind == MemKind::Pinned);
  CHECK(d.devicePtr != nullptr);
  CHECK(describePointer("a", managed).kind == MemKind::Managed);
  void* reg = malloc(8192);
  REQUIRE(cudaHostRegister(reg, 8192, cudaHostRegisterMapped) == cudaSuccess);
  d = describePointer("a", reg);
  CHECK(d.kind == MemKind::Pinned);
  CHECK(d.devicePtr != nullptr);
  cudaHostUnregister(reg);
  free(reg);
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaFree(managed);
  free(host);
#endif
}
