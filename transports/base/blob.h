// Address blobs (Transport::localAddress, Transport::connect): what a
// transport publishes for its peers, written and read here instead of by
// hand in every transport. A blob is a header struct and then arrays or
// bytes, laid out as they are in memory: every rank runs the same build on
// the same architecture (as the transports' wire formats assume).
//
//   BlobWriter(blob).put(header).putArray(entries);
//
//   BlobReader in("tcp", blobs, p);
//   Header h;
//   if (!in.get(&h) || h.magic != kBlobMagic || !in.atEnd()) return in.bad();
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace weft {

class BlobWriter {
 public:
  // Starts `*out` afresh.
  explicit BlobWriter(std::string* out) : out_(out) { out_->clear(); }
  template <class T>
  BlobWriter& put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain structs");
    return bytes(&v, sizeof v);
  }
  template <class T>
  BlobWriter& putArray(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain structs");
    return bytes(v.data(), v.size() * sizeof(T));
  }
  BlobWriter& bytes(const void* p, size_t n) {
    if (n) out_->append(static_cast<const char*>(p), n);
    return *this;
  }

 private:
  std::string* out_;
};

// Reads rank `rank`'s blob among `blobs` (indexed by rank), front to back.
// Every read checks the length: a short blob makes it return false, never
// read past the end. bad() is the error a transport returns for a blob it
// cannot use.
class BlobReader {
 public:
  BlobReader(const char* transport, const std::vector<std::string>& blobs, int rank)
      : transport_(transport),
        rank_(rank),
        blob_(rank >= 0 && static_cast<size_t>(rank) < blobs.size() ? &blobs[rank] : nullptr) {}

  template <class T>
  bool get(T* v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain structs");
    const char* p = take(sizeof(T));
    if (p) memcpy(v, p, sizeof(T));
    return p != nullptr;
  }
  // n elements into v[0..n).
  template <class T>
  bool getArray(T* v, size_t n) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain structs");
    if (n && n > left() / sizeof(T)) return false;
    const char* p = take(n * sizeof(T));
    if (p && n) memcpy(v, p, n * sizeof(T));
    return p != nullptr;
  }
  // The next n bytes (unaligned), or null when fewer are left.
  const char* take(size_t n) {
    if (!blob_ || n > left()) return nullptr;
    const char* p = blob_->data() + off_;
    off_ += n;
    return p;
  }
  bool skip(size_t n) { return take(n) != nullptr; }
  size_t left() const { return blob_ ? blob_->size() - off_ : 0; }
  bool atEnd() const { return blob_ && left() == 0; }

  // INVALID_ARGUMENT "<transport> transport: bad address blob of rank <rank>".
  Status bad() const {
    return invalidArgument(
        strFormat("%s transport: bad address blob of rank %d", transport_, rank_));
  }

 private:
  const char* transport_;
  int rank_;
  const std::string* blob_;
  size_t off_ = 0;
};

}  // namespace weft
