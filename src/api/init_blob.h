// What a communicator's ranks tell each other at init, over the bootstrap's
// allgather (Comm::exchangePeerInfo, setUpTransports, agreeOnSingleCopy):
// 64-bit words and length-prefixed sections (one per transport's address,
// then the device path's offer), written and read here instead of by hand.
// Every read checks the length: a short or garbled blob reads as zeros and
// empty sections, never past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace weft {

class InitBlobWriter {
 public:
  InitBlobWriter& u64(uint64_t v) {
    blob_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  InitBlobWriter& section(const std::string& s) {
    u64(s.size());
    blob_ += s;
    return *this;
  }
  InitBlobWriter& rest(const std::string& s) {
    blob_ += s;
    return *this;
  }
  const std::string& blob() const { return blob_; }

 private:
  std::string blob_;
};

class InitBlobReader {
 public:
  explicit InitBlobReader(const std::string& blob) : blob_(blob) {}
  // The next word (0 past the end).
  uint64_t u64() {
    uint64_t v = 0;
    if (sizeof v <= blob_.size() - off_) {
      memcpy(&v, blob_.data() + off_, sizeof v);
      off_ += sizeof v;
    } else {
      off_ = blob_.size();
    }
    return v;
  }
  // The next section ("" when the blob ends before it does).
  std::string section() {
    const uint64_t len = u64();
    if (len > blob_.size() - off_) {
      off_ = blob_.size();
      return std::string();
    }
    std::string s = blob_.substr(off_, len);
    off_ += len;
    return s;
  }
  // Section `index` from here on (the ones before it skipped).
  std::string section(size_t index) {
    for (size_t i = 0; i < index; ++i) section();
    return section();
  }
  // What is left.
  std::string rest() { return off_ < blob_.size() ? blob_.substr(off_) : std::string(); }

 private:
  const std::string& blob_;
  size_t off_ = 0;
};

}  // namespace weft
