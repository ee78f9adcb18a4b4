// weft-perf: the per-rank benchmark driver.
#pragma once

#include <cstddef>
#include <string>

#include "options.h"
#include "weft.h"

namespace weftperf {

// The buffer shapes of one row of the table.
struct Layout {
  size_t count;      // the count argument of the weft call (the "count" column)
  size_t bytes;      // the "size" column: total bytes of the collective
  size_t sendElems;  // elements in the send buffer (out of place)
  size_t recvElems;  // elements in the receive buffer
};

// Size semantics (see docs/weft-perf.md). count == 0 means the row is skipped.
Layout layoutFor(Coll c, size_t sizeBytes, size_t elemBytes, int nranks);
// Bus bandwidth factor: busbw = algbw * factor.
double busBwFactor(Coll c, int nranks);

// Runs the whole sweep on one rank of `comm` and destroys the comm.
// Returns the exit code: 0 = all good, 1 = wrong values, 2 = bad arguments
// (e.g. root out of range). A failing weft call prints the error and ends the
// process with exit code 3 (after aborting the comm).
int runRank(weft_comm_t comm, const Options& o, const std::string& modeDesc);

// Prints "weft-perf: rank R: what: <error string> (<last error>)" to stderr,
// aborts `comm` (if any) and ends the process with exit code 3.
[[noreturn]] void fatal(weft_comm_t comm, int rank, const char* what, weft_result_t r);

}  // namespace weftperf
