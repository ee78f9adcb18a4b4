// A small XML reader and writer for topology files: elements, attributes
// (single or double quotes), comments, an optional <?xml ...?> declaration
// and the five predefined entities. Everything else is refused: DOCTYPE and
// entity declarations (no entity expansion, so no "billion laughs"),
// CDATA, processing instructions after the declaration, character
// references, text other than white space. Limits: 4 MiB of input, depth
// 32, 100000 elements, 32 attributes per element, names of 64 characters,
// values of 4096. Errors name the line and column.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace weft {
namespace topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;
  int line = 0;

  // The value of attribute `key`, or nullptr.
  const std::string* attr(const std::string& key) const;
};

constexpr size_t kXmlMaxBytes = 4u << 20;

// Parses `text` (one root element) into *root. WEFT_ERR_INVALID_ARGUMENT
// with "line L, column C: ..." on anything outside the subset above.
Status parseXml(const std::string& text, XmlElement* root);

// `s` with & < > " ' escaped, for attribute values.
std::string xmlEscape(const std::string& s);

}  // namespace topo
}  // namespace weft
