// The timeline: Chrome trace JSON (the "traceEvents" object form) that
// Perfetto and chrome://tracing open. One process per rank, one thread per
// communicator; per op a slice named after the collective with its args
// (seq, bytes, algorithm, busbw, last rank), and inside it WAIT_FOR_PEERS,
// TRANSFER and, within TRANSFER, REDUCE and COPY slices.
//
// The file is valid JSON at every moment: events are buffered and written
// with ONE pwrite that overwrites the closing "]}" with the new events and a
// new closing "]}". A process killed at any point leaves the file as it was
// after the last flush (at most WEFT_TIMELINE's buffer, 64 KiB, or 0.5 s of
// events lost). Times are microseconds on the communicator's common clock,
// so the files of all ranks line up (weft-report --timeline merges them).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "telemetry/record.h"

namespace weft {
namespace telemetry {

class Timeline {
 public:
  ~Timeline();
  // Creates (truncates) `path`; names the track "rank R" / "comm C".
  Status open(const std::string& path, int rank, uint64_t commId, const std::string& host);
  // Adds the op's events; `globalOffsetNs` maps the record's local times to
  // the common clock; busbw in GB/s.
  void add(const OpRecord& r, int64_t globalOffsetNs, double busbwGBs);
  // Writes what is buffered.
  void flush();

 private:
  void event(const char* name, uint64_t beginNs, uint64_t endNs, const char* args);
  int fd_ = -1;
  int pid_ = 0;
  uint64_t tid_ = 0;
  uint64_t trailerOff_ = 0;  // where the closing "]}" starts
  bool first_ = true;
  std::string buf_;
  uint64_t lastFlushNs_ = 0;
  std::string path_;
};

}  // namespace telemetry
}  // namespace weft
