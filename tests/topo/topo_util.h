// Shared by the topology tests: the shipped files and loading them.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "topo/topo_file.h"

namespace ttest {

// docs/topologies/, found from this file's path (CMake compiles with
// absolute paths).
inline std::string topologyDir() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind("/tests/")) + "/docs/topologies/";
}

inline const std::vector<std::string>& shippedFiles() {
  static const std::vector<std::string> files = {"dgx1-v100.xml", "dgx-a100.xml", "dgx-h100.xml",
                                                 "pcie-2s-4gpu-2nic.xml", "cpu-2s.xml"};
  return files;
}

inline weft::topo::System load(const std::string& name) {
  weft::topo::System s;
  weft::Status st = weft::topo::loadSystemFile(topologyDir() + name, &s);
  INFO(st.message());
  REQUIRE(st.isOk());
  return s;
}

}  // namespace ttest
