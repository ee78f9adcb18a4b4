// The board: one small shared-memory segment per host and communicator, a
// cache line per rank, where each rank posts the op it last entered and
// last finished. Only that rank writes its line (two stores per op), so it
// costs nothing while nobody looks; a rank whose op stalls reads the lines
// of the other ranks of its host to name those that have not entered it and
// say what they did last. Ranks on other hosts are not on this board.
//
// The host's lowest rank creates the segment (O_EXCL), the others open it;
// the creator removes the name after the init barrier, so nothing is left
// in /dev/shm even when a process is killed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace weft {
namespace telemetry {

struct alignas(64) BoardLine {
  std::atomic<uint64_t> enteredSeq;  // collective number last entered (0: none)
  std::atomic<uint64_t> doneSeq;     // last finished
  uint64_t entryNs;                  // when it entered it (host clock)
  uint64_t endNs;                    // when it finished the last one
  uint64_t count;
  uint8_t type, dtype, op, pad;
  int32_t pid;
};

class Board {
 public:
  ~Board();
  // Maps the board of `name` with `nranks` lines; `create` on the host's
  // lowest rank, else opens it (waiting up to timeoutS for the creator).
  Status map(const std::string& name, int nranks, bool create, double timeoutS);
  void unlink();
  BoardLine& line(int r) { return lines_[r]; }
  const BoardLine& line(int r) const { return lines_[r]; }

 private:
  std::string name_;
  BoardLine* lines_ = nullptr;
  size_t bytes_ = 0;
  bool creator_ = false;
  bool linked_ = false;
};

}  // namespace telemetry
}  // namespace weft
