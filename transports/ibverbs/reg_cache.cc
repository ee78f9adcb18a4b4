#include "transports/ibverbs/reg_cache.h"

#include <vector>

namespace weft {
namespace ib {

Status RegCache::acquire(const void* addr, size_t len, const Registration** out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t start = a / page_ * page_;
  const uintptr_t end = (a + (len ? len : 1) + page_ - 1) / page_ * page_;
  // The entry starting at or before `start` with the highest start; entries
  // may overlap, so look back over a few candidates.
  auto it = entries_.upper_bound(start);
  for (int look = 0; look < 4 && it != entries_.begin(); ++look) {
    --it;
    Entry& e = it->second;
    if (e.reg.start <= start && e.reg.start + e.reg.len >= end) {
      if (e.refs++ == 0) lru_.erase(e.lru);
      ++hits_;
      *out = &e.reg;
      return Status::ok();
    }
  }
  ++misses_;
  evictIdle();
  Registration r;
  WEFT_RETURN_IF_ERROR(reg_(start, end - start, &r));
  r.start = start;
  r.len = end - start;
  auto ins = entries_.emplace(start, Entry());
  if (!ins.second) {
    // A shorter entry starts here: replace it once idle, else keep both by
    // using the new one for this message only.
    Entry& old = ins.first->second;
    if (old.refs == 0) {
      lru_.erase(old.lru);
      dereg_(old.reg);
      old.reg = r;
      old.refs = 1;
      *out = &old.reg;
      return Status::ok();
    }
    dereg_(r);
    return Status(WEFT_ERR_SYSTEM, "registration cache: overlapping buffers in use at once");
  }
  ins.first->second.reg = r;
  ins.first->second.refs = 1;
  *out = &ins.first->second.reg;
  return Status::ok();
}

void RegCache::release(const Registration* r) {
  auto it = entries_.find(r->start);
  if (it == entries_.end() || &it->second.reg != r || it->second.refs == 0) return;
  if (--it->second.refs == 0) it->second.lru = lru_.insert(lru_.end(), r->start);
  evictIdle();
}

void RegCache::evictIdle() {
  while (entries_.size() >= capacity_ && !lru_.empty()) {
    auto it = entries_.find(lru_.front());
    lru_.pop_front();
    dereg_(it->second.reg);
    entries_.erase(it);
  }
}

void RegCache::invalidate(const void* addr, size_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::vector<uintptr_t> gone;
  for (auto& kv : entries_) {
    const Registration& r = kv.second.reg;
    if (r.start < a + len && a < r.start + r.len && kv.second.refs == 0) gone.push_back(kv.first);
  }
  for (uintptr_t s : gone) {
    auto it = entries_.find(s);
    lru_.erase(it->second.lru);
    dereg_(it->second.reg);
    entries_.erase(it);
  }
}

void RegCache::clear() {
  for (auto& kv : entries_) dereg_(kv.second.reg);
  entries_.clear();
  lru_.clear();
}

}  // namespace ib
}  // namespace weft
