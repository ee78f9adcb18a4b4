// [cuda] The GPU backend of the engine's local steps (src/cuda/
// device_local_work.h): its kernels give the host executor's bits and
// finish later (polled, never waited for); and stream-ordered allreduces
// with WEFT_CUDA_LOCAL_WORK=gpu over tcp, where the ring's reductions run on
// the GPU while other chunks are on the wire (the overlap counter must move).
// Skipped, saying why, without a device. NOT RUN ON A GPU YET (docs/cuda.md).
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "coll/harness.h"
#include "cuda/device_local_work.h"
#include "cuda/runtime.h"
#include "exec/local_work.h"
#include "kernels/cpu/reduce.h"
#include "tests/cuda/device_util.h"
#include "weft.h"

#if WEFT_HAS_CUDA
namespace {

// Polls ticket t until done, for at most 10 s.
bool waitDone(weft::LocalWork& lw, uint64_t t) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < end)
    if (lw.done(t, &done).isError()) return false;
  return done;
}

}  // namespace

TEST_CASE("GPU local work: reduce, copy and divide give the host executor's bits", "[cuda]") {
  if (!haveDevice()) return;
  std::unique_ptr<weft::LocalWork> lw;
  REQUIRE(weft::cuda::makeDeviceLocalWork(&lw).isOk());
  const size_t n = 100003;
  for (weft_datatype_t dt : {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_FP8_E4M3, WEFT_INT32}) {
    INFO(weft::datatypeName(dt));
    const size_t bytes = n * weft::datatypeSize(dt);
    std::vector<uint8_t> a(bytes), b(bytes);
    for (size_t i = 0; i < bytes; ++i) {
      a[i] = static_cast<uint8_t>(i * 7 + 1);
      b[i] = static_cast<uint8_t>(i * 13 + 5);
    }
    uint8_t *da = nullptr, *db = nullptr, *dc = nullptr;
    REQUIRE(cudaMalloc(&da, bytes) == cudaSuccess);
    REQUIRE(cudaMalloc(&db, bytes) == cudaSuccess);
    REQUIRE(cudaMalloc(&dc, bytes) == cudaSuccess);
    REQUIRE(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    uint64_t t1 = 0, t2 = 0, t3 = 0;
    REQUIRE(lw->submitReduce(da, da, db, n, dt, WEFT_SUM, &t1).isOk());
    REQUIRE(lw->submitCopy(dc, da, bytes, &t2).isOk());
    REQUIRE(lw->submitDivide(dc, n, dt, 3, &t3).isOk());
    REQUIRE(waitDone(*lw, t3));
    bool d1 = false;
    REQUIRE(lw->done(t1, &d1).isOk());
    CHECK(d1);  // in order
    std::vector<uint8_t> want(bytes), got(bytes), gotDiv(bytes);
    weft::reduceHost(want.data(), a.data(), b.data(), n, dt, WEFT_SUM);
    REQUIRE(cudaMemcpy(got.data(), da, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(gotDiv.data(), dc, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(got.data(), want.data(), bytes) == 0);
    weft::divideByCount(want.data(), n, dt, 3);
    CHECK(memcmp(gotDiv.data(), want.data(), bytes) == 0);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
  // Scratch is mapped pinned memory: the host writes it, the GPU reads it.
  weft::ScratchPtr s;
  REQUIRE(lw->allocScratch(4096, &s).isOk());
  REQUIRE(s != nullptr);
  memset(s.get(), 1, 4096);
  uint64_t t = 0;
  REQUIRE(lw->submitReduce(s.get(), s.get(), s.get(), 1024, WEFT_INT32, WEFT_SUM, &t).isOk());
  REQUIRE(lw->drain(10));
  CHECK(reinterpret_cast<int32_t*>(s.get())[1023] == 2 * 0x01010101);
}

// The inter-host pipeline, on one host: tcp between ranks (as between
// hosts), device buffers on streams, ring allreduce in 64 KiB chunks, the
// reductions as GPU kernels on the staging. A step counts as overlapped
// when its kernel was still running while another chunk's transfer was
// posted and not complete.
TEST_CASE("GPU local work: ring reductions on the GPU overlap tcp transfers of other chunks",
          "[cuda]") {
  if (!haveDevice()) return;
  wtest::ScopedEnv e1("WEFT_CUDA_LOCAL_WORK", "gpu");
  wtest::ScopedEnv e2("WEFT_TRANSPORTS", "tcp");
  wtest::ScopedEnv e3("WEFT_SOCKET_IFNAME", "lo");
  wtest::ScopedEnv e4("WEFT_ALGO", "ring");
  wtest::ScopedEnv e5("WEFT_CHUNK_BYTES", "64K");
  const uint64_t s0 = weft::localWorkCounters().steps.load();
  const uint64_t o0 = weft::localWorkCounters().overlapped.load();
  const size_t count = size_t{2} << 20;  // 8 MiB of float: cut into 4 MiB pieces, many chunks
  CHECK(wtest::runThreads(3, [&](weft_comm_t comm, int rank, int n) -> std::string {
          TRY_CUDA(cudaSetDevice(0));
          cudaStream_t st;
          TRY_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
          float* buf = nullptr;
          TRY_CUDA(cudaMalloc(&buf, count * sizeof(float)));
          std::vector<float> h(count);
          for (size_t i = 0; i < count; ++i) h[i] = static_cast<float>((i % 512) + rank);
          TRY_CUDA(cudaMemcpy(buf, h.data(), count * 4, cudaMemcpyHostToDevice));
          TRY_WEFT(weft_allreduce(buf, buf, count, WEFT_FLOAT32, WEFT_AVG, comm, st));
          TRY_CUDA(cudaMemcpyAsync(h.data(), buf, count * 4, cudaMemcpyDeviceToHost, st));
          TRY_CUDA(cudaStreamSynchronize(st));
          for (size_t i = 0; i < count; ++i) {
            const float want = static_cast<float>(i % 512) + static_cast<float>(n - 1) / 2;
            if (h[i] != want) return "element " + std::to_string(i) + " is " + std::to_string(h[i]);
          }
          cudaFree(buf);
          cudaStreamDestroy(st);
          return "";
        }) == "");
  const uint64_t steps = weft::localWorkCounters().steps.load() - s0;
  const uint64_t over = weft::localWorkCounters().overlapped.load() - o0;
  WARN("GPU local steps " << steps << ", overlapped with a transfer " << over);
  CHECK(steps > 0);
  CHECK(over > 0);
  CHECK(over <= steps);
}
#else
TEST_CASE("GPU local work: reduce, copy and divide give the host executor's bits", "[cuda]") {
  haveDevice();  // says why it skips
}
#endif
