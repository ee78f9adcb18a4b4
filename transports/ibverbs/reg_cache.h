// A registration cache: registering memory with the NIC pins it and costs
// tens of microseconds, so buffers are registered once, over whole pages, and
// reused for every later message inside them. Entries in use are never
// evicted; past `capacity` entries the least recently used idle one is
// deregistered. The register / deregister actions are given by the owner
// (ibv_reg_mr / ibv_dereg_mr in ibverbs_transport.cc), which keeps this
// logic free of the verbs header and unit-testable without a device.
//
// Not thread-safe: one per transport, used under the communicator's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>

#include "core/status.h"

namespace weft {
namespace ib {

struct Registration {
  uintptr_t start = 0;  // page aligned
  size_t len = 0;       // whole pages
  void* handle = nullptr;  // the owner's (an ibv_mr*)
  uint32_t lkey = 0, rkey = 0;
};

class RegCache {
 public:
  using RegisterFn = std::function<Status(uintptr_t start, size_t len, Registration* out)>;
  using DeregisterFn = std::function<void(const Registration&)>;

  RegCache(size_t capacity, size_t pageSize, RegisterFn reg, DeregisterFn dereg)
      : capacity_(capacity), page_(pageSize), reg_(std::move(reg)), dereg_(std::move(dereg)) {}
  ~RegCache() { clear(); }
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A registration covering [addr, addr + len), registered now if no entry
  // covers it; held (not evictable) until release().
  Status acquire(const void* addr, size_t len, const Registration** out);
  void release(const Registration* r);
  // Deregisters every entry (shutdown); entries in use too.
  void clear();
  // Forgets entries overlapping a range the owner freed or remapped.
  void invalidate(const void* addr, size_t len);

  size_t size() const { return entries_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    Registration reg;
    int refs = 0;
    std::list<uintptr_t>::iterator lru;
  };
  void evictIdle();

  size_t capacity_, page_;
  RegisterFn reg_;
  DeregisterFn dereg_;
  std::map<uintptr_t, Entry> entries_;  // by start
  std::list<uintptr_t> lru_;            // idle order, most recent at the back
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace ib
}  // namespace weft
