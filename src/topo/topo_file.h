// Topology files: a System as XML (docs/topology.md has the format). The
// nesting gives the tree (cpu > numa > pci... > gpu/nic) and each nested
// element's upstream link (gen, width, or bw in GB/s); <link> elements give
// NVLink and socket links. Loading is strict: an unknown element or
// attribute, a duplicate or dangling id, a number out of range or a link the
// model cannot price is an error that names the line.
#pragma once

#include <string>

#include "topo/system.h"

namespace weft {
namespace topo {

// Parses `text` into a finalized System (paths computed).
Status loadSystemXml(const std::string& text, System* out);
// The same from a file: regular files of at most 4 MiB only; errors name
// the path.
Status loadSystemFile(const std::string& path, System* out);

// The XML of `s` (loadSystemXml of it gives the same graph).
std::string dumpSystemXml(const System& s);
// Writes dumpSystemXml(s) to `path` (through a temporary file and rename).
Status dumpSystemFile(const System& s, const std::string& path);

}  // namespace topo
}  // namespace weft
