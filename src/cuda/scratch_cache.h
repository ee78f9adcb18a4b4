// Scratch memory for GPU local work that is never freed while weft runs.
//
// The engine lets an op's scratch go on a comm's progress thread, while
// callers' streams may be held by weft's flag waits; cudaFree and
// cudaFreeHost wait for the whole device, so freeing there can deadlock
// (seen on an H200: docs/cuda.md). A block let go comes back here, with no
// CUDA call, and serves a later take() of its kind, device and size class.
// Sizes are rounded up to powers of two (4 KiB at least) so that blocks fit
// again: a program that repeats its sizes stops allocating.
//
// The allocator is a parameter so that the policy is tested on any machine
// (tests/cuda/scratch_cache_test.cc); src/cuda/device_local_work.cc gives
// it cudaMalloc and cudaHostAlloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace weft {
namespace cuda {

class ScratchCache {
 public:
  enum Kind { kDevice, kPinned };
  using AllocFn = Status (*)(Kind kind, size_t bytes, void** out);

  explicit ScratchCache(AllocFn alloc) : alloc_(alloc) {}

  static size_t sizeClass(size_t bytes) {
    size_t size = 4096;
    while (size < bytes) size *= 2;
    return size;
  }

  Status take(Kind kind, int dev, size_t bytes, uint8_t** out) {
    const size_t size = sizeClass(bytes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        const Block& b = free_[i];
        if (b.kind == kind && b.dev == dev && b.size == size) {
          *out = b.p;
          free_.erase(free_.begin() + static_cast<long>(i));
          return Status();
        }
      }
    }
    void* p = nullptr;
    WEFT_RETURN_IF_ERROR(alloc_(kind, size, &p));
    std::lock_guard<std::mutex> lk(mu_);
    *out = static_cast<uint8_t*>(p);
    live_.push_back(Block{kind, dev, size, *out});
    return Status();
  }

  // No allocator call: the block waits for the next take(). A pointer this
  // cache did not hand out is ignored.
  void put(uint8_t* p) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const Block& b : live_)
      if (b.p == p) {
        free_.push_back(b);
        return;
      }
  }

  // Blocks ever allocated, and of them the ones waiting in the cache.
  size_t allocated() {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.size();
  }
  size_t waiting() {
    std::lock_guard<std::mutex> lk(mu_);
    return free_.size();
  }

 private:
  struct Block {
    Kind kind;
    int dev;
    size_t size;
    uint8_t* p;
  };
  AllocFn alloc_;
  std::mutex mu_;
  std::vector<Block> live_;  // every block ever allocated
  std::vector<Block> free_;  // of them, the ones let go
};

}  // namespace cuda
}  // namespace weft
