// [cuda] The cuda_ipc transport on device buffers: every message size with
// the recv posted before or after the send, 100 messages in flight, slots
// smaller than the messages, tag and length mismatches, and three ranks
// sharing one GPU; ranks as processes (each maps the others' FIFOs through
// CUDA IPC) and as threads (same process: raw addresses). Without a device
// every case skips, saying why. The probe runs in a child process: CUDA
// initialized in this process would be unusable in the ranks it forks.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "transport/harness.h"

#if WEFT_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace weft;
using namespace weft::tpt;

namespace {

// A device is here: asked in a forked child, so this process stays clean.
bool haveDevice() {
#if WEFT_HAS_CUDA
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1);
  }
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return true;
  WARN("SKIP [cuda]: no CUDA device here; the cuda_ipc transport tests need one");
#else
  WARN("SKIP [cuda]: this weft was built without CUDA; the cuda_ipc transport needs it");
#endif
  return false;
}

#if WEFT_HAS_CUDA
GroupSpec ipcSpec(Mode m, int nranks) {
  GroupSpec s = groupSpec(Kind::CudaIpc, m, nranks);
  s.timeoutS = 120;
  return s;
}

// A device buffer with a host twin for filling and checking.
struct DevBuf {
  explicit DevBuf(size_t n) : len(n), host(n) {
    if (cudaMalloc(&dev, n ? n : 1) != cudaSuccess) dev = nullptr;
  }
  ~DevBuf() { cudaFree(dev); }
  bool upload() { return cudaMemcpy(dev, host.data(), len, cudaMemcpyHostToDevice) == cudaSuccess; }
  bool download() {
    return cudaMemcpy(host.data(), dev, len, cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  size_t len;
  Buffer host;
  void* dev = nullptr;
};

// Every rank exchanges messages of every size with every other rank.
Body exchangeBody(bool recvFirst, std::vector<size_t> sizes) {
  return [=](Rank& r) -> std::string {
    TP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    TP_OK(r.setup());
    for (size_t len : sizes) {
      std::vector<std::unique_ptr<DevBuf>> sb, rb;
      std::vector<Completion> cs(r.nranks), cr(r.nranks);
      std::vector<Completion*> all;
      for (int p = 0; p < r.nranks; ++p) {
        sb.emplace_back(new DevBuf(len));
        rb.emplace_back(new DevBuf(len));
        TP_CHECK(sb[p]->dev && rb[p]->dev, "cudaMalloc(%zu)", len);
        fillPattern(sb[p]->host.data(), len, seedOf(r.rank, p, len));
        memset(rb[p]->host.data(), 0xee, len);
        TP_CHECK(sb[p]->upload() && rb[p]->upload(), "upload");
      }
      for (int pass = 0; pass < 2; ++pass) {
        const bool recvs = (pass == 0) == recvFirst;
        for (int p : r.peers()) {
          const uint64_t tag = 0x1000 + len;
          if (recvs) {
            TP_POST(r.ep(p).postRecv(rb[p]->dev, len, tag, MemType::Cuda, &cr[p]));
            all.push_back(&cr[p]);
          } else {
            TP_POST(r.ep(p).postSend(sb[p]->dev, len, tag, MemType::Cuda, &cs[p]));
            all.push_back(&cs[p]);
          }
        }
        if (pass == 0) TP_CHECK(r.barrier(), "barrier");
      }
      TP_OK(r.drive(all, 60));
      for (int p : r.peers()) {
        TP_CHECK(rb[p]->download(), "download");
        size_t bad = checkPattern(rb[p]->host.data(), len, seedOf(p, r.rank, len));
        TP_CHECK(bad == len, "message of %zu bytes from rank %d differs at byte %zu", len, p, bad);
      }
      TP_CHECK(r.barrier(), "barrier");
    }
    return "";
  };
}

// 100 messages of mixed sizes each way, all posted before any progress.
Body manyInFlightBody() {
  return [=](Rank& r) -> std::string {
    TP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    TP_OK(r.setup());
    const int p = r.partner(), n = 100;
    auto sizeOf = [](int i) -> size_t {
      if (i % 10 == 0) return 0;
      if (i % 17 == 3) return 300000 + static_cast<size_t>(i);
      return static_cast<size_t>(i) * 977 % 20000;
    };
    std::vector<std::unique_ptr<DevBuf>> sb, rb;
    std::vector<Completion> cs(n), cr(n);
    std::vector<Completion*> all;
    for (int i = 0; i < n; ++i) {
      sb.emplace_back(new DevBuf(sizeOf(i)));
      rb.emplace_back(new DevBuf(sizeOf(i)));
      fillPattern(sb[i]->host.data(), sizeOf(i), seedOf(r.rank, p, i));
      TP_CHECK(sb[i]->dev && rb[i]->dev && sb[i]->upload(), "device buffer %d", i);
    }
    for (int i = 0; i < n; ++i) {
      TP_POST(r.ep(p).postSend(sb[i]->dev, sizeOf(i), 7000 + i, MemType::Cuda, &cs[i]));
      TP_POST(r.ep(p).postRecv(rb[i]->dev, sizeOf(i), 7000 + i, MemType::Cuda, &cr[i]));
      all.push_back(&cs[i]);
      all.push_back(&cr[i]);
    }
    TP_OK(r.drive(all, 60));
    for (int i = 0; i < n; ++i) {
      TP_CHECK(rb[i]->download(), "download");
      size_t bad = checkPattern(rb[i]->host.data(), sizeOf(i), seedOf(p, r.rank, i));
      TP_CHECK(bad == sizeOf(i), "message %d (%zu bytes) differs at byte %zu", i, sizeOf(i), bad);
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  };
}

// Rank 0 sends tag 0x5a5, rank 1 expects 0x6b6: INVALID_USAGE naming the peer
// and both calls.
Body mismatchBody() {
  return [=](Rank& r) -> std::string {
    TP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    TP_OK(r.setup());
    const int p = r.partner();
    DevBuf b(100);
    TP_CHECK(b.dev != nullptr, "cudaMalloc");
    Completion c;
    std::vector<int> none;
    if (r.rank == 0) {
      Status st = r.ep(p).postSend(b.dev, 100, 0x5a5, MemType::Cuda, &c);
      if (!st.isError()) r.drive({&c}, 3, &none);
    } else {
      Status st = r.ep(p).postRecv(b.dev, 100, 0x6b6, MemType::Cuda, &c);
      if (!st.isError()) st = r.drive({&c}, 10, &none);
      const std::string why = mismatchProblem(st, p, 0x5a5, 100, 0x6b6, 100);
      TP_CHECK(why.empty(), "%s", why.c_str());
      TP_CHECK(c.done && c.status.code() == WEFT_ERR_INVALID_USAGE, "completion not failed");
    }
    TP_CHECK(r.barrier(), "barrier");
    return "";
  };
}

// Host memory is refused with a clear error.
Body hostRefusedBody() {
  return [=](Rank& r) -> std::string {
    TP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    TP_OK(r.setup());
    char buf[16];
    Completion c;
    Status st = r.ep(r.partner()).postSend(buf, sizeof buf, 1, MemType::Host, &c);
    TP_CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT, "host memory accepted: %s",
             st.message().c_str());
    TP_CHECK(r.barrier(), "barrier");
    return "";
  };
}

const std::vector<size_t> kSizes = {0, 1, 7, 4096, (1u << 20) + 3, 64u << 20};
#endif

}  // namespace

// Processes first: each case runs in its own ctest process, and a threads
// case in the same process would initialize CUDA before the fork.
TEST_CASE("cuda_ipc: every size with the recv before or after the send as processes",
          "[cuda][transport]") {
  if (!haveDevice()) return;
#if WEFT_HAS_CUDA
  for (bool recvFirst : {true, false}) {
    INFO((recvFirst ? "recv first" : "send first"));
    expectPass(runGroup(ipcSpec(Mode::Procs, 2), exchangeBody(recvFirst, kSizes)));
  }
#endif
}

TEST_CASE("cuda_ipc: three processes share one GPU with small slots", "[cuda][transport]") {
  if (!haveDevice()) return;
#if WEFT_HAS_CUDA
  GroupSpec s = ipcSpec(Mode::Procs, 3);
  s.config.shmSlots = 3;
  s.config.shmSlotBytes = 4096;
  expectPass(runGroup(s, exchangeBody(false, {0, 5, 4096, 3 * 4096 + 5, 1u << 20})));
  expectPass(runGroup(ipcSpec(Mode::Procs, 2), manyInFlightBody()));
#endif
}

TEST_CASE("cuda_ipc: mismatches and host memory are reported as processes", "[cuda][transport]") {
  if (!haveDevice()) return;
#if WEFT_HAS_CUDA
  expectPass(runGroup(ipcSpec(Mode::Procs, 2), mismatchBody()));
  expectPass(runGroup(ipcSpec(Mode::Procs, 2), hostRefusedBody()));
#endif
}

TEST_CASE("cuda_ipc: ranks as threads of one process (raw addresses)", "[cuda][transport]") {
  if (!haveDevice()) return;
#if WEFT_HAS_CUDA
  expectPass(runGroup(ipcSpec(Mode::Threads, 3), exchangeBody(true, kSizes)));
  expectPass(runGroup(ipcSpec(Mode::Threads, 2), manyInFlightBody()));
#endif
}
