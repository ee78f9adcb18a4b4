// Shared by the tests that run every collective over one network transport
// (test_ucx.cc, test_ibverbs.cc): the sweep each rank runs, and the check
// of the INFO log that every peer really went through that transport.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "coll/check.h"

namespace wtest {

// Every collective, three datatypes, counts 0 .. 300,000 (eager and
// rendezvous sizes), in and out of place, each checked element by element.
inline std::string allCollectives(weft_comm_t c, int r, int n) {
  for (Coll coll : kAllColls)
    for (weft_datatype_t dt : {WEFT_INT32, WEFT_FLOAT32, WEFT_FLOAT64})
      for (size_t count : {size_t(0), size_t(1), size_t(3000), size_t(300000)})
        for (bool inPlace : {false, true}) {
          weft_op_t op = dt == WEFT_INT32 ? WEFT_MAX : WEFT_SUM;
          std::string e =
              runAndCheck(c, r, n, coll, dt, op, count, inPlace, static_cast<int>(count % n));
          if (!e.empty()) return std::string(collName(coll)) + ": " + e;
        }
  return "";
}

// The INFO log (WEFT_DEBUG_SUBSYS=INIT) has one "transports per peer" line
// per rank; every peer but the rank itself must be on `transport`.
inline void checkAllOn(const std::string& log, int n, const std::string& transport) {
  int lines = 0;
  bool other = false;
  size_t pos = 0;
  while ((pos = log.find("transports per peer ", pos)) != std::string::npos) {
    size_t end = log.find('\n', pos);
    std::string line = log.substr(pos, end - pos);
    ++lines;
    for (const char* t : {":shm", ":tcp", ":ucx", ":ibverbs"})
      if (":" + transport != t) other |= line.find(t) != std::string::npos;
    pos = end;
  }
  CHECK(lines == n);
  CHECK_FALSE(other);
}

}  // namespace wtest
