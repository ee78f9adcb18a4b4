// The fuzz targets' reader of their input: fixed-size fields one after
// another, the bytes past the input's end reading as zero.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft {
namespace fuzz {

struct Input {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  template <class T>
  T get() {
    T v;
    memset(&v, 0, sizeof v);
    size_t n = std::min(sizeof v, size - pos);
    memcpy(&v, data + pos, n);
    pos += n;
    return v;
  }
};

}  // namespace fuzz
}  // namespace weft
