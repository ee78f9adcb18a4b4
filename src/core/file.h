// The first line of a small text file (sysfs, procfs attributes), without
// its newline; "" when the file cannot be read.
#pragma once

#include <fstream>
#include <string>

namespace weft {

inline std::string readFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (f) std::getline(f, s);
  return s;
}

}  // namespace weft
