// Fuzz target: the init blob (src/api/init_blob.h), what a communicator's
// ranks send each other at init over the bootstrap's allgather.
//
// Checks: the reader never reads past the blob on any bytes (words,
// sections, skipped sections, the rest); and what the writer writes the
// reader reads back: the input, cut at its first byte's count into
// sections, round trips.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/init_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string blob(reinterpret_cast<const char*>(data), size);
  {
    weft::InitBlobReader in(blob);
    (void)in.u64();
    (void)in.section();
    (void)in.section(size ? data[0] % 8 : 0);
    (void)in.u64();
    (void)in.rest();
  }
  // Round trip: a word, sections of the lengths the input's bytes say,
  // then the rest.
  if (size == 0) return 0;
  std::vector<std::string> parts;
  size_t pos = 1;
  for (size_t i = 0; i < data[0] % 6 && pos <= size; ++i) {
    size_t len = pos < size ? data[pos] % 17 : 0;
    ++pos;
    if (len > size - std::min(pos, size)) len = size - std::min(pos, size);
    parts.push_back(blob.substr(std::min(pos, size), len));
    pos += len;
  }
  const std::string rest = pos < size ? blob.substr(pos) : std::string();
  weft::InitBlobWriter w;
  w.u64(size);
  for (const std::string& p : parts) w.section(p);
  w.rest(rest);
  weft::InitBlobReader r(w.blob());
  if (r.u64() != size) abort();
  for (const std::string& p : parts)
    if (r.section() != p) abort();
  if (r.rest() != rest) abort();
  return 0;
}
