// The timeline: Chrome trace JSON (the "traceEvents" object form) that
// Perfetto and chrome://tracing open. One process per rank, one thread per
// communicator; per op a slice named after the collective with its args
// (seq, bytes, algorithm, busbw, last rank), and inside it WAIT_FOR_PEERS,
// TRANSFER and, within TRANSFER, REDUCE and COPY slices. Frameworks add
// their own spans on tracks of their own (weft_timeline_span: weft.torch's
// per-tensor QUEUE and ALLREDUCE), so one file shows both.
//
// The file is valid JSON at every moment: events are buffered and written
// with ONE pwrite that overwrites the closing "]}" with the new events and a
// new closing "]}" (under the file's lock: several communicators of a
// process may share it). A process killed at any point leaves the file as it was
// after the last flush (at most WEFT_TIMELINE's buffer, 64 KiB, or 0.5 s of
// events lost). Times are microseconds on the communicator's common clock,
// so the files of all ranks line up (weft-report --timeline merges them).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "telemetry/record.h"

namespace weft {
namespace telemetry {

// One timeline file of this process, shared by every communicator that
// writes it (timeline.cc).
class TimelineFile;

class Timeline {
 public:
  ~Timeline();
  // Joins the file `pattern` names for `rank` (`%r`) in this process,
  // creating (truncating) it for the first communicator that opens it: a
  // process's communicators with the same rank (a framework's second group
  // of the same ranks) share one file, each on its own track "comm C (rank
  // r of n)", instead of overwriting each other's.
  Status open(const std::string& pattern, int rank, int nranks, uint64_t commId,
              const std::string& host);
  // Adds the op's events; `globalOffsetNs` maps the record's local times to
  // the common clock; busbw in GB/s.
  void add(const OpRecord& r, int64_t globalOffsetNs, double busbwGBs);
  // A framework's span (weft_timeline_span) on a track of its own, named
  // `track`, beside the communicator's: `name` from beginNs to endNs (the
  // common clock), args as string keys and values (a value that is a
  // finite number is written as one).
  void span(const std::string& track, const std::string& name, uint64_t beginNs, uint64_t endNs,
            const std::vector<std::pair<std::string, std::string>>& args);
  // Hands what is buffered to the file, which writes it.
  void flush();

 private:
  void event(const char* name, uint64_t beginNs, uint64_t endNs, const char* args) {
    eventOn(tid_, name, beginNs, endNs, args);
  }
  void eventOn(uint64_t tid, const char* name, uint64_t beginNs, uint64_t endNs,
               const char* args);
  void maybeFlush();
  std::shared_ptr<TimelineFile> file_;
  int pid_ = 0;
  uint64_t tid_ = 0;
  std::string buf_;  // events not handed to the file yet
  uint64_t lastFlushNs_ = 0;
  std::map<std::string, uint64_t> tracks_;  // span()'s tracks and their thread ids
};

}  // namespace telemetry
}  // namespace weft
