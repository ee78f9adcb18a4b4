// ScratchCache (src/cuda/scratch_cache.h): the GPU backend's scratch policy,
// with a host allocator standing in for cudaMalloc / cudaHostAlloc (the
// policy is what is tested; on a GPU the same class calls those). [cuda-rules]
#include "cuda/scratch_cache.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <vector>

using namespace weft;
using namespace weft::cuda;

namespace {

int gAllocs = 0;
bool gFail = false;
// The blocks hostAlloc made: the cache never frees one (weft's lives as
// long as the process), so the test does at its end (LeakSanitizer).
std::vector<void*> gBlocks;

Status hostAlloc(ScratchCache::Kind, size_t bytes, void** out) {
  if (gFail) return Status(WEFT_ERR_CUDA, "cudaMalloc: out of memory (test)");
  ++gAllocs;
  *out = malloc(bytes);
  gBlocks.push_back(*out);
  return Status();
}

struct FreeBlocksAtEnd {
  ~FreeBlocksAtEnd() {
    for (void* p : gBlocks) free(p);
    gBlocks.clear();
  }
};

}  // namespace

TEST_CASE("scratch cache: a block let go serves the next op of its size class", "[cuda-rules]") {
  gAllocs = 0;
  gFail = false;
  FreeBlocksAtEnd freeBlocks;
  ScratchCache c(&hostAlloc);
  CHECK(ScratchCache::sizeClass(1) == 4096);
  CHECK(ScratchCache::sizeClass(4097) == 8192);
  CHECK(ScratchCache::sizeClass(size_t{3} << 20) == size_t{4} << 20);

  // Ops of repeating sizes: after the first round nothing is allocated.
  std::set<uint8_t*> seen;
  for (int round = 0; round < 50; ++round) {
    std::vector<uint8_t*> held;
    for (size_t bytes : {size_t{100}, size_t{70000}, size_t{1} << 20, size_t{65536}}) {
      uint8_t* p = nullptr;
      REQUIRE(c.take(ScratchCache::kDevice, 0, bytes, &p).isOk());
      REQUIRE(p != nullptr);
      held.push_back(p);
      seen.insert(p);
    }
    // Two ops in flight at once need two blocks of a class.
    CHECK(std::set<uint8_t*>(held.begin(), held.end()).size() == held.size());
    for (uint8_t* p : held) c.put(p);
  }
  CHECK(gAllocs == 4);
  CHECK(c.allocated() == 4);
  CHECK(c.waiting() == 4);
  CHECK(seen.size() == 4);

  // Kind and device keep blocks apart: pinned or another device's memory
  // never serves a device-0 op.
  uint8_t *a = nullptr, *b = nullptr;
  REQUIRE(c.take(ScratchCache::kPinned, 0, 100, &a).isOk());
  REQUIRE(c.take(ScratchCache::kDevice, 1, 100, &b).isOk());
  CHECK(gAllocs == 6);
  CHECK(seen.count(a) == 0);
  CHECK(seen.count(b) == 0);
  c.put(a);
  c.put(b);

  // A failed allocation is the caller's error, with the allocator's words;
  // a pointer the cache did not hand out is ignored.
  gFail = true;
  uint8_t* p = nullptr;
  Status st = c.take(ScratchCache::kDevice, 0, size_t{1} << 30, &p);
  CHECK(st.code() == WEFT_ERR_CUDA);
  CHECK(st.message().find("out of memory") != std::string::npos);
  uint8_t stranger[8];
  c.put(stranger);
  CHECK(c.waiting() == 6);
  // Cached blocks are handed out again even while the allocator fails.
  REQUIRE(c.take(ScratchCache::kDevice, 0, 70000, &p).isOk());
  CHECK(seen.count(p) == 1);
}
