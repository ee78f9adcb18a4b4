#include "core/tag.h"

#include <atomic>

#include "core/status.h"

namespace weft {
namespace {
std::atomic<TagDescriber> gDescriber{nullptr};
}  // namespace

void setTagDescriber(TagDescriber d) { gDescriber.store(d, std::memory_order_release); }

std::string describeTag(uint64_t tag) {
  TagDescriber d = gDescriber.load(std::memory_order_acquire);
  if (d) return d(tag);
  return strFormat("tag 0x%llx", static_cast<unsigned long long>(tag));
}

}  // namespace weft
