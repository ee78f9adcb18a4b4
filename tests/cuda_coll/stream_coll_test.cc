// [cuda] Device-memory collectives on streams through the public API, ranks
// as threads sharing the one GPU (each with its own stream): every
// collective, in place and out of place, a group on one stream, and the
// stream semantics: the call returns while earlier work on the stream is
// still running (a host function holds the stream), the collective reads
// what that work wrote, and work queued after it sees the result.
// A large allreduce is cut into pieces whose copies overlap the host's
// work on earlier pieces: the overlap is counted (with WEFT_CUDA_IPC=off:
// otherwise this process, which has loaded CUDA, takes the direct device
// path, tests/cuda_coll/device_path_coll_test.cc). Skipped, saying why,
// without a device. Links weft's layers (not libweft.so) to read the counter.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "coll/harness.h"
#include "cuda/pieces.h"
#include "tests/cuda/device_util.h"
#include "weft.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>
#endif

#if WEFT_HAS_CUDA
namespace {

void CUDART_CB holdStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
}

// Rank r's input element i.
int32_t input(int r, size_t i) { return static_cast<int32_t>(r * 1000 + i % 997); }

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, SendRecv };
const char* collName(Coll c) {
  static const char* names[] = {"allreduce",      "broadcast", "reduce",  "allgather",
                                "reduce_scatter", "alltoall",  "sendrecv"};
  return names[static_cast<int>(c)];
}

// One collective on device buffers: the input is written on the stream
// behind a 100 ms host function, the call must return well before that
// ends, and the result is checked after a stream sync.
std::string runOne(weft_comm_t comm, int rank, int n, Coll coll, size_t count, bool inPlace) {
  TRY_CUDA(cudaSetDevice(0));
  cudaStream_t s;
  TRY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t total = count * static_cast<size_t>(n);
  int32_t *send = nullptr, *recv = nullptr;
  TRY_CUDA(cudaMalloc(&send, total * 4 + 4));
  TRY_CUDA(cudaMalloc(&recv, total * 4 + 4));
  // Pinned input: a copy from pageable memory would block this thread until
  // the held stream reached it, and the test would prove nothing.
  int32_t* in = nullptr;
  TRY_CUDA(cudaMallocHost(&in, total * 4 + 4));
  std::vector<int32_t> out(total, -7);
  for (size_t i = 0; i < total; ++i) in[i] = input(rank, i);
  TRY_CUDA(cudaMemcpy(recv, out.data(), total * 4, cudaMemcpyHostToDevice));
  static int kHoldMs = 100;
  TRY_CUDA(cudaLaunchHostFunc(s, holdStream, &kHoldMs));
  // In place: the input goes where the API expects it inside recv.
  int32_t* sb = send;
  if (inPlace) sb = (coll == Coll::AllGather) ? recv + rank * count : recv;
  if (inPlace && coll == Coll::ReduceScatter) sb = recv;
  const size_t inCount = (coll == Coll::ReduceScatter || coll == Coll::AllToAll) ? total : count;
  TRY_CUDA(cudaMemcpyAsync(sb, in, inCount * 4, cudaMemcpyHostToDevice, s));
  int32_t* rb = (inPlace && coll == Coll::ReduceScatter) ? recv + rank * count : recv;
  const auto t0 = std::chrono::steady_clock::now();
  weft_result_t r = WEFT_SUCCESS;
  switch (coll) {
    case Coll::AllReduce:
      r = weft_allreduce(sb, rb, count, WEFT_INT32, WEFT_SUM, comm, s);
      break;
    case Coll::Broadcast:
      r = weft_broadcast(sb, rb, count, WEFT_INT32, n - 1, comm, s);
      break;
    case Coll::Reduce:
      r = weft_reduce(sb, rb, count, WEFT_INT32, WEFT_MAX, 0, comm, s);
      break;
    case Coll::AllGather:
      r = weft_allgather(sb, rb, count, WEFT_INT32, comm, s);
      break;
    case Coll::ReduceScatter:
      r = weft_reduce_scatter(sb, rb, count, WEFT_INT32, WEFT_SUM, comm, s);
      break;
    case Coll::AllToAll:
      r = weft_alltoall(sb, rb, count, WEFT_INT32, comm, s);
      break;
    case Coll::SendRecv:
      weft_group_start();
      weft_send(sb, count, WEFT_INT32, (rank + 1) % n, comm, s);
      weft_recv(rb, count, WEFT_INT32, (rank + n - 1) % n, comm, s);
      r = weft_group_end();
      break;
  }
  const double callMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r != WEFT_SUCCESS) return std::string(collName(coll)) + ": " + wtest::describe(r, comm);
  if (callMs > 50)
    return std::string(collName(coll)) + " blocked the caller for " + std::to_string(callMs) +
           " ms while the stream was held";
  // Work queued after the collective sees its result: a copy on the stream.
  std::vector<int32_t> got(total, 0);
  TRY_CUDA(cudaMemcpyAsync(got.data(), recv, total * 4, cudaMemcpyDeviceToHost, s));
  TRY_CUDA(cudaStreamSynchronize(s));
  for (size_t i = 0; i < total; ++i) {
    int64_t want = -7;
    const size_t blk = i / (count ? count : 1), j = i % (count ? count : 1);
    switch (coll) {
      case Coll::AllReduce:
        if (i < count) {
          want = 0;
          for (int q = 0; q < n; ++q) want += input(q, i);
        }
        break;
      case Coll::Broadcast:
        if (i < count) want = input(n - 1, i);
        break;
      case Coll::Reduce:
        if (i < count && (rank == 0 || inPlace))
          want = rank == 0 ? input(n - 1, i) : input(rank, i);
        break;
      case Coll::AllGather:
        want = input(static_cast<int>(blk), j);
        break;
      case Coll::ReduceScatter:
        if (inPlace) {
          want = blk == static_cast<size_t>(rank) ? 0 : input(rank, i);
          if (blk == static_cast<size_t>(rank))
            for (int q = 0; q < n; ++q) want += input(q, rank * count + j);
        } else if (i < count) {
          want = 0;
          for (int q = 0; q < n; ++q) want += input(q, rank * count + i);
        }
        break;
      case Coll::AllToAll:
        want = input(static_cast<int>(blk), rank * count + j);
        break;
      case Coll::SendRecv:
        if (i < count) want = input((rank + n - 1) % n, i);
        break;
    }
    if (got[i] != want)
      return std::string(collName(coll)) + (inPlace ? " in place" : "") + ": element " +
             std::to_string(i) + " is " + std::to_string(got[i]) + ", want " + std::to_string(want);
  }
  cudaFree(send);
  cudaFree(recv);
  cudaFreeHost(in);
  cudaStreamDestroy(s);
  return "";
}

}  // namespace

TEST_CASE("stream-ordered collectives on device memory, ranks sharing one GPU", "[cuda]") {
  if (!haveDevice()) return;
  for (int n : {1, 2, 3}) {
    for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                   Coll::ReduceScatter, Coll::AllToAll, Coll::SendRecv}) {
      for (bool inPlace : {false, true}) {
        if (c == Coll::SendRecv && inPlace) continue;
        // 3000001 x int32: allreduce, broadcast and reduce are cut into pieces.
        for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}, size_t{3000001}}) {
          INFO(collName(c) << " nranks " << n << " count " << count << " in place " << inPlace);
          CHECK(wtest::runThreads(n, [&](weft_comm_t comm, int rank, int nr) {
                  return runOne(comm, rank, nr, c, count, inPlace);
                }) == "");
        }
      }
    }
  }
}

TEST_CASE("stream-ordered group: several allreduces on one stream are one unit", "[cuda]") {
  if (!haveDevice()) return;
  CHECK(wtest::runThreads(2, [](weft_comm_t comm, int rank, int n) -> std::string {
          TRY_CUDA(cudaSetDevice(0));
          cudaStream_t s;
          TRY_CUDA(cudaStreamCreate(&s));
          const size_t count = 4096;
          float* buf = nullptr;
          TRY_CUDA(cudaMalloc(&buf, 3 * count * sizeof(float)));
          std::vector<float> h(3 * count);
          for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(rank + 1) * (i % 7);
          TRY_CUDA(cudaMemcpy(buf, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
          TRY_WEFT(weft_group_start());
          for (int k = 0; k < 3; ++k)
            TRY_WEFT(weft_allreduce(buf + k * count, buf + k * count, count, WEFT_FLOAT32, WEFT_SUM,
                                    comm, s));
          TRY_WEFT(weft_group_end());
          TRY_CUDA(cudaMemcpyAsync(h.data(), buf, h.size() * 4, cudaMemcpyDeviceToHost, s));
          TRY_CUDA(cudaStreamSynchronize(s));
          for (size_t i = 0; i < h.size(); ++i)
            if (h[i] != 3.0f * (i % 7)) return "element " + std::to_string(i) + " wrong";
          cudaFree(buf);
          cudaStreamDestroy(s);
          (void)n;
          return "";
        }) == "");
}

TEST_CASE("device memory: refused without a stream, pageable memory refused with one", "[cuda]") {
  if (!haveDevice()) return;
  CHECK(wtest::runThreads(1, [](weft_comm_t comm, int, int) -> std::string {
          float* dev = nullptr;
          TRY_CUDA(cudaMalloc(&dev, 64));
          float host[16] = {};
          cudaStream_t s;
          TRY_CUDA(cudaStreamCreate(&s));
          weft_result_t r = weft_allreduce(dev, dev, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
          if (r != WEFT_ERR_INVALID_USAGE) return "device memory without a stream was accepted";
          if (!strstr(weft_get_last_error(comm), "stream is NULL"))
            return weft_get_last_error(comm);
          r = weft_allreduce(host, dev, 16, WEFT_FLOAT32, WEFT_SUM, comm, s);
          if (r != WEFT_ERR_INVALID_USAGE) return "pageable memory with a stream was accepted";
          if (!strstr(weft_get_last_error(comm), "pageable")) return weft_get_last_error(comm);
          weft_group_start();
          weft_allreduce(dev, dev, 16, WEFT_FLOAT32, WEFT_SUM, comm, s);
          weft_allreduce(host, host, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
          r = weft_group_end();
          if (r != WEFT_ERR_INVALID_USAGE) return "a group mixing host and stream calls was issued";
          cudaFree(dev);
          cudaStreamDestroy(s);
          return "";
        }) == "");
}
TEST_CASE("a large allreduce on a stream is pipelined: piece copies overlap earlier pieces",
          "[cuda]") {
  if (!haveDevice()) return;
  uint64_t pieces0 = 0, overlapped0 = 0;
  weft::cuda::pieceCounters(&pieces0, &overlapped0);
  const size_t count = size_t{16} << 20;  // 64 MiB of float: 16 pieces of 4 MiB
  // Pieces are the staged path's: no cuda_ipc device path for these comms.
  wtest::ScopedEnv ipcOff("WEFT_CUDA_IPC", "off");
  CHECK(wtest::runThreads(2, [&](weft_comm_t comm, int rank, int) -> std::string {
          TRY_CUDA(cudaSetDevice(0));
          cudaStream_t s;
          TRY_CUDA(cudaStreamCreate(&s));
          float* buf = nullptr;
          TRY_CUDA(cudaMalloc(&buf, count * sizeof(float)));
          std::vector<float> h(count);
          for (size_t i = 0; i < count; ++i) h[i] = static_cast<float>((i % 1024) * (rank + 1));
          TRY_CUDA(cudaMemcpy(buf, h.data(), count * 4, cudaMemcpyHostToDevice));
          TRY_WEFT(weft_allreduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, s));
          TRY_CUDA(cudaMemcpyAsync(h.data(), buf, count * 4, cudaMemcpyDeviceToHost, s));
          TRY_CUDA(cudaStreamSynchronize(s));
          for (size_t i = 0; i < count; ++i)
            if (h[i] != static_cast<float>((i % 1024) * 3))
              return "element " + std::to_string(i) + " is " + std::to_string(h[i]);
          cudaFree(buf);
          cudaStreamDestroy(s);
          return "";
        }) == "");
  uint64_t pieces1 = 0, overlapped1 = 0;
  weft::cuda::pieceCounters(&pieces1, &overlapped1);
  const size_t want = weft::cuda::cutPieces(count, 4).size();
  INFO("pieces " << pieces1 - pieces0 << ", overlapped " << overlapped1 - overlapped0);
  CHECK(pieces1 - pieces0 == 2 * want);
  CHECK(overlapped1 - overlapped0 > 0);
  WARN("pipeline: " << pieces1 - pieces0 << " pieces, " << overlapped1 - overlapped0
                    << " started while an earlier piece was running");
}
#else
TEST_CASE("stream-ordered collectives on device memory, ranks sharing one GPU", "[cuda]") {
  haveDevice();
}
#endif

// Runs on every machine: without a usable device the API refuses a stream
// with the reason, writes nothing, and host calls keep working.
TEST_CASE("CUDA absent: a stream is refused with the reason, host memory still works",
          "[cuda-absent]") {
#if WEFT_HAS_CUDA
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) {
    WARN("a CUDA device is present: the no-device path is not what runs here");
    return;
  }
  cudaGetLastError();
  const char* why = "no CUDA device";
#else
  const char* why = "built without CUDA";
#endif
  CHECK(
      wtest::runThreads(2, [&](weft_comm_t comm, int rank, int) -> std::string {
        float send[16], recv[16];
        for (int i = 0; i < 16; ++i) {
          send[i] = static_cast<float>(rank + i);
          recv[i] = -1.0f;
        }
        int fakeStream = 0;
        weft_result_t r = weft_allreduce(send, recv, 16, WEFT_FLOAT32, WEFT_SUM, comm, &fakeStream);
        if (r != WEFT_ERR_INVALID_USAGE) return "a stream was accepted without a device";
        if (!strstr(weft_get_last_error(comm), why) || !strstr(weft_get_last_error(comm), "stream"))
          return std::string("message: ") + weft_get_last_error(comm);
        for (int i = 0; i < 16; ++i)
          if (recv[i] != -1.0f) return "recvbuf written by a refused call";
        TRY_WEFT(weft_allreduce(send, recv, 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr));
        for (int i = 0; i < 16; ++i)
          if (recv[i] != static_cast<float>(1 + 2 * i)) return "host allreduce wrong";
        return "";
      }) == "");
}
