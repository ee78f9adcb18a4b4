// The device path through the public API (docs/cuda.md): stream-ordered
// calls on device buffers of a one-host communicator run on the buffers
// themselves, through cuda_ipc and GPU kernels, with no staging.
//
// [cuda] (skipped, saying why, without a device; on an H200 it hung, and
// the fixes since have not run on a GPU: docs/cuda.md, "What has been run
// where"):
// with WEFT_CUDA_IPC=on, ranks as threads sharing the one GPU, allreduce
// (SUM on int32, AVG on float: the divide kernel) over sizes that take one
// chunk and many; every
// call must be one direct batch (the counter), none cut into staged
// pieces, results exact; with WEFT_CUDA_IPC=off the same calls are staged.
//
// And under the default (staged), calls complete while the caller blocks
// on the stream weft holds (pageable copies, cudaFree).
//
// [cuda-absent] (every machine): the negotiation at init off a GPU: a
// CPU-only process under the default is not touched (the INIT log says
// why, and host collectives work); WEFT_CUDA_IPC=on asks CUDA, which says
// no, and every rank still works; a bad value is warned about.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coll/harness.h"
#include "cuda/pieces.h"
#include "cuda/runtime.h"
#include "cuda/stream_batch.h"
#include "tests/cuda/device_util.h"
#include "weft.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace {

#if WEFT_HAS_CUDA

// Allreduces of `count` elements on device buffers, out of place and in
// place; rank r contributes r + 1 + i % 13 (int32 SUM) and 2 * (r + 1)
// (float AVG, exact in binary). The caller blocks on the stream weft holds
// as programs do: copies into pageable memory (cudaMemcpyAsync waits for
// them); with `freeWhileHeld`, also a cudaFree (which waits for the whole
// device) right after the first call is issued.
std::string allreduces(weft_comm_t comm, int rank, int n, size_t count,
                       bool freeWhileHeld = false) {
  TRY_CUDA(cudaSetDevice(0));
  cudaStream_t s;
  TRY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int32_t *a = nullptr, *b = nullptr;
  TRY_CUDA(cudaMalloc(&a, count * 4 + 4));
  TRY_CUDA(cudaMalloc(&b, count * 4 + 4));
  std::vector<int32_t> in(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(rank + 1 + i % 13);
  TRY_CUDA(cudaMemcpyAsync(a, in.data(), count * 4, cudaMemcpyHostToDevice, s));
  TRY_WEFT(weft_allreduce(a, b, count, WEFT_INT32, WEFT_SUM, comm, s));
  if (freeWhileHeld) {
    void* spare = nullptr;
    TRY_CUDA(cudaMalloc(&spare, 4096));
    TRY_CUDA(cudaFree(spare));
  }
  TRY_WEFT(weft_allreduce(a, a, count, WEFT_INT32, WEFT_SUM, comm, s));  // in place
  std::vector<int32_t> gotB(count), gotA(count);
  TRY_CUDA(cudaMemcpyAsync(gotB.data(), b, count * 4, cudaMemcpyDeviceToHost, s));
  TRY_CUDA(cudaMemcpyAsync(gotA.data(), a, count * 4, cudaMemcpyDeviceToHost, s));
  TRY_CUDA(cudaStreamSynchronize(s));
  const int32_t sumR = n * (n + 1) / 2;
  for (size_t i = 0; i < count; ++i) {
    const int32_t want = sumR + static_cast<int32_t>(n * (i % 13));
    if (gotB[i] != want || gotA[i] != want)
      return "int32 sum: element " + std::to_string(i) + " is " + std::to_string(gotB[i]) + " / " +
             std::to_string(gotA[i]) + ", want " + std::to_string(want);
  }
  std::vector<float> f(count, 2.0f * static_cast<float>(rank + 1));
  float* fd = reinterpret_cast<float*>(a);
  TRY_CUDA(cudaMemcpyAsync(fd, f.data(), count * 4, cudaMemcpyHostToDevice, s));
  TRY_WEFT(weft_allreduce(fd, fd, count, WEFT_FLOAT32, WEFT_AVG, comm, s));
  TRY_CUDA(cudaMemcpyAsync(f.data(), fd, count * 4, cudaMemcpyDeviceToHost, s));
  TRY_CUDA(cudaStreamSynchronize(s));
  for (size_t i = 0; i < count; ++i)
    if (f[i] != static_cast<float>(n + 1))
      return "float avg: element " + std::to_string(i) + " is " + std::to_string(f[i]);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s);
  return "";
}
#endif

}  // namespace

TEST_CASE("direct device path: allreduces on device buffers through cuda_ipc, ranks on one GPU",
          "[cuda]") {
#if WEFT_HAS_CUDA
  if (!haveDevice()) return;
  wtest::ScopedEnv on("WEFT_CUDA_IPC", "on");  // the default stages
  for (int n : {1, 2, 3}) {
    // One chunk; many chunks of the ring (scratch in device memory); a
    // size the staged path would cut into pieces.
    for (size_t count : {size_t{1000}, size_t{3} << 20, size_t{5000001}}) {
      INFO("nranks " << n << " count " << count);
      uint64_t p0 = 0, o0 = 0, p1 = 0, o1 = 0;
      weft::cuda::pieceCounters(&p0, &o0);
      const uint64_t d0 = weft::cuda::directBatches();
      CHECK(wtest::runThreads(n, [&](weft_comm_t comm, int rank, int nr) {
              return allreduces(comm, rank, nr, count);
            }) == "");
      weft::cuda::pieceCounters(&p1, &o1);
      CHECK(weft::cuda::directBatches() - d0 == static_cast<uint64_t>(3 * n));
      CHECK(p1 == p0);  // nothing was cut into staged pieces
    }
  }
  // Turned off: the same calls are staged.
  wtest::ScopedEnv off("WEFT_CUDA_IPC", "off");
  const uint64_t d0 = weft::cuda::directBatches();
  CHECK(wtest::runThreads(2, [&](weft_comm_t comm, int rank, int nr) {
          return allreduces(comm, rank, nr, 1000);
        }) == "");
  CHECK(weft::cuda::directBatches() == d0);
#else
  WARN("SKIP [cuda]: this weft was built without CUDA; the direct device path needs it");
#endif
}

TEST_CASE("staged by default: calls complete while the caller blocks on the held stream",
          "[cuda]") {
#if WEFT_HAS_CUDA
  if (!haveDevice()) return;
  // The default: device buffers staged; the progress thread makes no CUDA
  // call, so a caller's cudaFree (waits for the device) or pageable copy on
  // the stream weft holds cannot stop it (docs/cuda.md). cudaFree with one
  // rank only: ranks as threads share one context, and one rank's cudaFree
  // waiting for the device under the context lock would stop the other
  // rank's thread from issuing its half of the collective (so it would with
  // NCCL: ranks that are threads must not free during collectives).
  for (int n : {1, 2}) {
    for (size_t count : {size_t{1000}, size_t{3} << 20}) {
      INFO("nranks " << n << " count " << count);
      const uint64_t d0 = weft::cuda::directBatches();
      CHECK(wtest::runThreads(n, [&](weft_comm_t comm, int rank, int nr) {
              return allreduces(comm, rank, nr, count, n == 1);
            }) == "");
      CHECK(weft::cuda::directBatches() == d0);
    }
  }
#else
  WARN("SKIP [cuda]: this weft was built without CUDA");
#endif
}

namespace {

// 2 ranks as processes over the default transports with `env`; a host
// allreduce must work; returns the ranks' INIT log.
std::string initLog(const std::vector<std::string>& extra, std::string* err) {
  char dir[] = "/tmp/weft-devpath-XXXXXX";
  if (!mkdtemp(dir)) {
    *err = "mkdtemp failed";
    return "";
  }
  std::vector<std::string> env = {"WEFT_DEBUG=INFO", "WEFT_DEBUG_SUBSYS=INIT",
                                  std::string("WEFT_DEBUG_FILE=") + dir + "/log-%p"};
  env.insert(env.end(), extra.begin(), extra.end());
  *err = wtest::runProcesses(
      2,
      [](weft_comm_t comm, int rank, int) -> std::string {
        float v[8];
        for (float& x : v) x = static_cast<float>(rank + 1);
        TRY_WEFT(weft_allreduce(v, v, 8, WEFT_FLOAT32, WEFT_SUM, comm, nullptr));
        for (float x : v)
          if (x != 3.0f) return "host allreduce wrong";
        return "";
      },
      env, 60);
  std::string log = wtest::catFiles(std::string(dir) + "/log-*");
  std::string rm = std::string("rm -rf ") + dir;
  if (system(rm.c_str()) != 0) {
  }
  return log;
}

}  // namespace

TEST_CASE("device path at init off a GPU: nothing asked by default, refused cleanly when forced",
          "[cuda-absent]") {
  std::string err;
  // The ranks are forked from this process: where an earlier test here
  // loaded the CUDA driver, they would inherit a CUDA that does not survive
  // a fork. That is a GPU machine, where this no-GPU case is not what runs.
  if (weft::cuda::driverLoaded()) {
    WARN(
        "the CUDA driver is loaded in this process: the no-GPU negotiation is not what runs "
        "here");
    return;
  }
  // Default (auto): a process that never loaded the CUDA driver is left alone.
  std::string log = initLog({}, &err);
  CHECK(err == "");
  INFO(log);
#if WEFT_HAS_CUDA
  CHECK(log.find("device path (cuda_ipc, direct device ops): off: by default device buffers "
                 "are staged") != std::string::npos);
  CHECK(log.find("this process had not loaded the CUDA driver") != std::string::npos);
#else
  CHECK(log.find("device path (cuda_ipc, direct device ops): off: this weft was built without "
                 "CUDA") != std::string::npos);
#endif
  // Forced on: CUDA is asked; without a device every rank says so and the
  // comm works as before. (With a device the ranks connect cuda_ipc.)
  log = initLog({"WEFT_CUDA_IPC=on"}, &err);
  CHECK(err == "");
  INFO(log);
#if WEFT_HAS_CUDA
  const bool refused = log.find("off: rank 0 cannot: ") != std::string::npos;
  const bool connected = log.find("on: all 2 ranks on this host") != std::string::npos;
  CHECK((refused || connected));
  if (refused) CHECK(log.find("device") != std::string::npos);
#endif
  // Off by WEFT_TRANSPORTS; and a bad value is named, the comm still works.
  log = initLog({"WEFT_CUDA_IPC=on", "WEFT_TRANSPORTS=^cuda_ipc"}, &err);
  CHECK(err == "");
#if WEFT_HAS_CUDA
  CHECK(log.find("off: WEFT_TRANSPORTS leaves cuda_ipc out") != std::string::npos);
#endif
  log = initLog({"WEFT_CUDA_IPC=maybe"}, &err);
  CHECK(err == "");
  CHECK(log.find("WEFT_CUDA_IPC=maybe: expected auto, on (1) or off (0)") != std::string::npos);
}
