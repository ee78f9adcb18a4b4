// chooseDevicePath (src/cuda/device_path.h): when a stream-ordered call may
// run directly on device buffers through cuda_ipc, case by case. The rule
// is pure; it runs here exactly as next to a GPU. src/api/stream_calls.cc
// applies it to every stream-ordered call.
#include "cuda/device_path.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::cuda;

namespace {

BufferDesc buf(const char* role, MemKind kind, bool used = true) {
  static char storage[64];
  BufferDesc b;
  b.role = role;
  b.ptr = used ? storage : nullptr;
  b.kind = kind;
  return b;
}

struct Case {
  const char* name;
  MemKind send, recv;
  bool recvUsed;
  int nranks, hosts;
  bool allowed, built;
  std::vector<bool> reach;  // empty: all true
  DevicePath want;
  const char* says;
};

}  // namespace

TEST_CASE("device path: direct only for device buffers on one host that CUDA IPC joins",
          "[cuda-rules]") {
  const MemKind D = MemKind::Device, M = MemKind::Managed, P = MemKind::Pinned;
  const DevicePath S = DevicePath::Staged, X = DevicePath::Direct;
  const Case cases[] = {
      {"4 ranks, one host, all reach", D, D, true, 4, 1, true, true, {}, X, "all 4 ranks"},
      {"several ranks on one GPU (processes)", D, D, true, 3, 1, true, true, {}, X, "direct"},
      {"one rank", D, D, true, 1, 1, true, true, {}, X, "one rank"},
      {"one rank, WEFT_TRANSPORTS without cuda_ipc",
       D,
       D,
       true,
       1,
       1,
       false,
       true,
       {},
       X,
       "one rank"},
      {"two hosts", D, D, true, 4, 2, true, true, {}, S, "4 ranks are on 2 hosts"},
      {"WEFT_TRANSPORTS=shm", D, D, true, 2, 1, false, true, {}, S, "leaves cuda_ipc out"},
      {"IPC fails to rank 2",
       D,
       D,
       true,
       3,
       1,
       true,
       true,
       {true, true, false},
       S,
       "does not reach rank 2"},
      {"fewer reach entries than ranks",
       D,
       D,
       true,
       3,
       1,
       true,
       true,
       {true, true},
       S,
       "does not reach rank 2"},
      {"managed send buffer", M, D, true, 2, 1, true, true, {}, S, "sendbuf is managed memory"},
      {"mapped pinned receive buffer",
       D,
       P,
       true,
       2,
       1,
       true,
       true,
       {},
       S,
       "recvbuf is pinned host memory"},
      {"unused receive buffer of another kind is skipped",
       D,
       M,
       false,
       2,
       1,
       true,
       true,
       {},
       X,
       "direct"},
      {"built without CUDA", D, D, true, 2, 1, true, false, {}, S, "without CUDA"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    BufferDesc bufs[2] = {buf("sendbuf", c.send), buf("recvbuf", c.recv, c.recvUsed)};
    DevicePathFacts f;
    f.bufs = bufs;
    f.nbufs = 2;
    f.nranks = c.nranks;
    f.hosts = c.hosts;
    f.ipcAllowed = c.allowed;
    f.ipcBuilt = c.built;
    f.ipcReach = c.reach.empty() ? std::vector<bool>(c.nranks, true) : c.reach;
    std::string why;
    CHECK(chooseDevicePath(f, &why) == c.want);
    INFO(why);
    CHECK(why.find(c.says) != std::string::npos);
  }
}

TEST_CASE("device path: no GPU backend, another device, a transfer to oneself, or a racing group stage",
          "[cuda-rules]") {
  BufferDesc bufs[2] = {buf("sendbuf", MemKind::Device), buf("recvbuf", MemKind::Device)};
  auto facts = [&] {
    DevicePathFacts f;
    f.bufs = bufs;
    f.nbufs = 2;
    f.nranks = 2;
    f.ipcReach = {true, true};
    return f;
  };
  std::string why;
  DevicePathFacts f = facts();
  CHECK(chooseDevicePath(f, &why) == DevicePath::Direct);
  f.gpuBackend = false;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("no GPU backend") != std::string::npos);
  f = facts();
  f.selfTransfer = true;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("to this rank itself") != std::string::npos);
  f = facts();
  f.nranks = 1;
  f.ipcReach = {true};
  f.selfTransfer = true;  // sendrecv with oneself on a one-rank comm
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  f = facts();
  f.crossOverlap = true;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("another call receives into") != std::string::npos);
  // A reproducible reduction (WEFT_REPRO) folds on the host: staged.
  f = facts();
  f.repro = true;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("WEFT_REPRO") != std::string::npos);
  // Buffers of another device than the one the device path was set up on.
  f = facts();
  f.device = 0;
  bufs[0].device = 0;
  bufs[1].device = 0;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Direct);
  bufs[1].device = 1;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("recvbuf is on device 1, the communicator's device path on device 0") !=
        std::string::npos);
  f.device = -1;  // not known: not checked
  CHECK(chooseDevicePath(f, &why) == DevicePath::Direct);
  // Buffer kinds come first: the message names the buffer.
  bufs[1] = buf("recvbuf", MemKind::Managed);
  f = facts();
  f.gpuBackend = false;
  CHECK(chooseDevicePath(f, &why) == DevicePath::Staged);
  CHECK(why.find("recvbuf is managed memory") != std::string::npos);
}
