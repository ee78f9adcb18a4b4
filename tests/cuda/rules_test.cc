// CPU tests of what the CUDA path decides without a device: the memory-type
// rules (src/cuda/mem_rules.h) and the head / vector / tail split the
// kernels use (kernels/cuda/vector_plan.h). Both are pure code, run here
// exactly as they run next to a GPU.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/mem_rules.h"
#include "cuda/pieces.h"
#include "cuda/stream_batch.h"
#include "kernels/cuda/vector_plan.h"

using namespace weft;
using namespace weft::cuda;

namespace {

BufferDesc buf(const char* role, MemKind kind, int device = 0, bool mapped = true) {
  static char storage[64];
  BufferDesc b;
  b.role = role;
  b.ptr = storage + (role[0] == 's' ? 0 : 32);
  b.kind = kind;
  b.device = (kind == MemKind::Device || kind == MemKind::Managed) ? device : -1;
  b.devicePtr = (kind == MemKind::Host || (kind == MemKind::Pinned && !mapped))
                    ? nullptr
                    : const_cast<void*>(b.ptr);
  return b;
}

CudaState usable(int device = 0) {
  CudaState s;
  s.usable = true;
  s.device = device;
  return s;
}

CudaState unusable(const char* why) {
  CudaState s;
  s.why = why;
  return s;
}

// The path, or the error message ("" with the path on success).
std::string decide(std::vector<BufferDesc> bufs, bool stream, const CudaState& cuda,
                   ExecPath* path) {
  *path = static_cast<ExecPath>(-1);
  Status st =
      choosePath("allreduce", bufs.data(), static_cast<int>(bufs.size()), stream, cuda, path);
  if (st.isOk()) return "";
  CHECK(st.code() == WEFT_ERR_INVALID_USAGE);
  CHECK(*path == static_cast<ExecPath>(-1));  // not written on refusal
  return st.message();
}

}  // namespace

TEST_CASE("memory rules: stream NULL runs host, pinned and managed memory on the host",
          "[cuda-rules]") {
  ExecPath p;
  for (MemKind k : {MemKind::Host, MemKind::Pinned, MemKind::Managed}) {
    for (const CudaState& c : {usable(), unusable("no CUDA device: test")}) {
      CHECK(decide({buf("sendbuf", k), buf("recvbuf", k)}, false, c, &p) == "");
      CHECK(p == ExecPath::Host);
    }
  }
  // Mixed host kinds are fine on the host path too.
  CHECK(decide({buf("sendbuf", MemKind::Pinned), buf("recvbuf", MemKind::Host)}, false, usable(),
               &p) == "");
  CHECK(p == ExecPath::Host);
}

TEST_CASE("memory rules: device memory without a stream is refused, naming the buffer",
          "[cuda-rules]") {
  ExecPath p;
  std::string e = decide({buf("sendbuf", MemKind::Host), buf("recvbuf", MemKind::Device, 3)}, false,
                         usable(), &p);
  CHECK(e.find("recvbuf") != std::string::npos);
  CHECK(e.find("device 3") != std::string::npos);
  CHECK(e.find("stream is NULL") != std::string::npos);
}

TEST_CASE("memory rules: a stream with device, managed or mapped pinned memory is stream-ordered",
          "[cuda-rules]") {
  ExecPath p;
  for (MemKind s : {MemKind::Device, MemKind::Managed, MemKind::Pinned})
    for (MemKind r : {MemKind::Device, MemKind::Managed, MemKind::Pinned}) {
      CHECK(decide({buf("sendbuf", s, 1), buf("recvbuf", r, 1)}, true, usable(1), &p) == "");
      CHECK(p == ExecPath::Stream);
    }
  // No buffers at all (a barrier, count 0) on a stream: still stream-ordered.
  CHECK(decide({}, true, usable(), &p) == "");
  CHECK(p == ExecPath::Stream);
  // An unused (NULL) buffer is not looked at.
  BufferDesc none;
  none.role = "recvbuf";
  CHECK(decide({buf("sendbuf", MemKind::Device), none}, true, usable(), &p) == "");
  CHECK(p == ExecPath::Stream);
}

TEST_CASE("memory rules: a stream refuses pageable memory, other devices, unmapped pinned memory",
          "[cuda-rules]") {
  ExecPath p;
  std::string e =
      decide({buf("sendbuf", MemKind::Device), buf("recvbuf", MemKind::Host)}, true, usable(), &p);
  CHECK(e.find("recvbuf") != std::string::npos);
  CHECK(e.find("pageable") != std::string::npos);
  e = decide({buf("sendbuf", MemKind::Device, 2), buf("recvbuf", MemKind::Device, 0)}, true,
             usable(0), &p);
  CHECK(e.find("sendbuf") != std::string::npos);
  CHECK(e.find("device 2") != std::string::npos);
  CHECK(e.find("cudaSetDevice(2)") != std::string::npos);
  // Managed memory of another device is reachable through the page tables.
  CHECK(decide({buf("sendbuf", MemKind::Managed, 2)}, true, usable(0), &p) == "");
  e = decide({buf("sendbuf", MemKind::Pinned, 0, false)}, true, usable(), &p);
  CHECK(e.find("cudaHostRegisterMapped") != std::string::npos);
}

TEST_CASE("memory rules: a stream without usable CUDA says why", "[cuda-rules]") {
  ExecPath p;
  std::string e = decide({buf("sendbuf", MemKind::Host)}, true,
                         unusable("this weft was built without CUDA"), &p);
  CHECK(e.find("stream") != std::string::npos);
  CHECK(e.find("built without CUDA") != std::string::npos);
  e = decide({}, true, unusable("no CUDA device: no driver"), &p);
  CHECK(e.find("no CUDA device: no driver") != std::string::npos);
}

TEST_CASE("vector plan: head, 16-byte body and tail cover every element once", "[cuda-rules]") {
  for (size_t elt : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    const size_t per = 16 / elt;
    for (uintptr_t off = 0; off < 16; off += elt) {
      for (size_t count : {size_t{0}, size_t{1}, per - 1, per, 2 * per - 1, 2 * per, 3 * per + 1,
                           size_t{1000}, size_t{4097}}) {
        const uintptr_t base = 0x10000;
        uintptr_t addrs[3] = {base + off, base + 4096 + off, base + 8192 + off};
        VecPlan v = planVectors(addrs, 3, count, elt);
        INFO("elt " << elt << " offset " << off << " count " << count);
        CHECK(v.head + v.vecs * per + v.tail == count);
        if (v.vecs) {
          for (uintptr_t a : addrs) CHECK((a + v.head * elt) % 16 == 0);  // the body is aligned
          CHECK(v.head * elt < 16);
          CHECK(v.tail < per);
        }
        if (count >= 2 * per) CHECK(v.vecs > 0);  // same misalignment: vectorized
      }
    }
  }
}

TEST_CASE("vector plan: pointers of different misalignment run as scalars", "[cuda-rules]") {
  uintptr_t addrs[2] = {0x1000, 0x2004};
  VecPlan v = planVectors(addrs, 2, 1000, 4);
  CHECK(v.head == 1000);
  CHECK(v.vecs == 0);
  CHECK(v.tail == 0);
  uintptr_t same[2] = {0x1008, 0x2008};
  v = planVectors(same, 2, 1000, 4);
  CHECK(v.head == 2);
  CHECK(v.vecs == 249);
  CHECK(v.tail == 2);
}

TEST_CASE("staging layout keeps the in-place relation of the user's buffers", "[cuda-rules]") {
  static char user[4096];
  // Out of place: two regions, the receive one 256-aligned after the send one.
  StagingLayout l = layoutStaging(user, 100, user + 2048, 400);
  CHECK(l.hasSend);
  CHECK(l.hasRecv);
  CHECK(l.sendOff == 0);
  CHECK(l.recvOff == 256);
  CHECK(l.bytes == 656);
  // Allreduce in place: one region.
  l = layoutStaging(user, 400, user, 400);
  CHECK(l.sendOff == 0);
  CHECK(l.recvOff == 0);
  CHECK(l.bytes == 400);
  // Allgather in place (rank 2 of 4): send is block 2 of recv.
  l = layoutStaging(user + 200, 100, user, 400);
  CHECK(l.recvOff == 0);
  CHECK(l.sendOff == 200);
  CHECK(l.bytes == 400);
  // Reduce-scatter in place: recv is block 1 of send.
  l = layoutStaging(user, 400, user + 100, 100);
  CHECK(l.sendOff == 0);
  CHECK(l.recvOff == 100);
  CHECK(l.bytes == 400);
  // A buffer the call does not use (a non-root's broadcast send).
  l = layoutStaging(nullptr, 0, user, 400);
  CHECK(!l.hasSend);
  CHECK(l.recvOff == 0);
  CHECK(l.bytes == 400);
}

TEST_CASE("pieces of a cut call cover it once, aligned, and small calls stay whole",
          "[cuda-rules]") {
  CHECK(cutPieces(0, 4).size() == 1);
  CHECK(cutPieces(1000, 4).size() == 1);
  CHECK(cutPieces((2 * kPieceBytes - 4) / 4, 4).size() == 1);
  for (size_t elt : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t bytes : {2 * kPieceBytes, 2 * kPieceBytes + 8, 10 * kPieceBytes + 24,
                         size_t{1} << 30, (size_t{3} << 30) + 64}) {
      const size_t count = bytes / elt;
      std::vector<Piece> p = cutPieces(count, elt);
      INFO("elt " << elt << " bytes " << bytes);
      CHECK(p.size() >= 2);
      CHECK(p.size() <= kMaxPieces);
      size_t next = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        CHECK(p[i].first == next);
        CHECK(p[i].count > 0);
        CHECK((p[i].first * elt) % 256 == 0);
        if (i + 1 < p.size()) CHECK(p[i].count * elt >= kPieceBytes);
        next += p[i].count;
      }
      CHECK(next == count);
      // Every rank cuts the same way.
      std::vector<Piece> again = cutPieces(count, elt);
      REQUIRE(again.size() == p.size());
      for (size_t i = 0; i < p.size(); ++i) CHECK(again[i].count == p[i].count);
    }
  }
}
