// Fuzz target: topology files (loadSystemXml, src/topo/topo_file.h), which
// WEFT_TOPO_FILE points at, and the XML reader under them (src/topo/xml.h).
//
// Checks: no crash, UB or runaway allocation on any text (the reader's
// limits: 4 MiB, depth 32, 100000 elements); a file that loads dumps to XML
// that loads again and dumps to the same text.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "topo/topo_file.h"
#include "topo/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (setenv("WEFT_DEBUG", "NONE", 1), true);
  (void)quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  weft::topo::XmlElement root;
  (void)weft::topo::parseXml(text, &root);
  weft::topo::System s;
  if (!weft::topo::loadSystemXml(text, &s).isOk()) return 0;
  const std::string dumped = weft::topo::dumpSystemXml(s);
  weft::topo::System again;
  weft::Status st = weft::topo::loadSystemXml(dumped, &again);
  if (!st.isOk()) {
    fprintf(stderr, "dump does not load: %s\n%s\n", st.message().c_str(), dumped.c_str());
    abort();
  }
  if (weft::topo::dumpSystemXml(again) != dumped) abort();
  return 0;
}
