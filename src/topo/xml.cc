#include "topo/xml.h"

#include <cstring>

namespace weft {
namespace topo {
namespace {

constexpr int kMaxDepth = 32;
constexpr size_t kMaxElements = 100000;
constexpr size_t kMaxAttrs = 32;
constexpr size_t kMaxName = 64;
constexpr size_t kMaxValue = 4096;

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  Status run(XmlElement* root) {
    skipSpace();
    if (t_.compare(pos_, 5, "<?xml") == 0) {
      size_t end = t_.find("?>", pos_);
      if (end == std::string::npos) return error("unterminated <?xml declaration");
      advanceTo(end + 2);
    }
    WEFT_RETURN_IF_ERROR(skipMisc());
    if (pos_ >= t_.size() || t_[pos_] != '<') return error("expected the root element");
    WEFT_RETURN_IF_ERROR(element(root, 1));
    WEFT_RETURN_IF_ERROR(skipMisc());
    if (pos_ < t_.size()) return error("content after the root element");
    return Status();
  }

 private:
  Status error(const std::string& what) const {
    return invalidArgument(strFormat("line %d, column %d: %s", line_, col_, what.c_str()));
  }
  void advance() {
    if (t_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void advanceTo(size_t p) {
    while (pos_ < p) advance();
  }
  void skipSpace() {
    while (pos_ < t_.size() && strchr(" \t\r\n", t_[pos_]) && t_[pos_]) advance();
  }
  // White space and comments; anything else that starts with "<!" or "<?"
  // (DOCTYPE, ENTITY, CDATA, processing instructions) is refused.
  Status skipMisc() {
    for (;;) {
      skipSpace();
      if (t_.compare(pos_, 4, "<!--") == 0) {
        size_t end = t_.find("-->", pos_ + 4);
        if (end == std::string::npos) return error("unterminated comment");
        advanceTo(end + 3);
        continue;
      }
      if (t_.compare(pos_, 2, "<!") == 0)
        return error("DOCTYPE, ENTITY and CDATA sections are not accepted");
      if (t_.compare(pos_, 2, "<?") == 0) return error("processing instructions are not accepted");
      return Status();
    }
  }
  static bool nameChar(char c, bool first) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
  }
  Status name(std::string* out) {
    out->clear();
    while (pos_ < t_.size() && nameChar(t_[pos_], out->empty())) {
      if (out->size() >= kMaxName) return error("name longer than 64 characters");
      out->push_back(t_[pos_]);
      advance();
    }
    if (out->empty()) return error("expected a name");
    return Status();
  }
  Status value(std::string* out) {
    if (pos_ >= t_.size() || (t_[pos_] != '"' && t_[pos_] != '\''))
      return error("expected a quoted value");
    const char q = t_[pos_];
    advance();
    out->clear();
    while (pos_ < t_.size() && t_[pos_] != q) {
      const char c = t_[pos_];
      if (c == '<') return error("'<' inside a value");
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
        return error("control character inside a value");
      if (out->size() >= kMaxValue) return error("value longer than 4096 characters");
      if (c == '&') {
        static const char* const kEnt[][2] = {
            {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}, {"&quot;", "\""}, {"&apos;", "'"}};
        bool found = false;
        for (const auto& e : kEnt) {
          if (t_.compare(pos_, strlen(e[0]), e[0]) == 0) {
            out->append(e[1]);
            advanceTo(pos_ + strlen(e[0]));
            found = true;
            break;
          }
        }
        if (!found) return error("unknown entity or character reference");
        continue;
      }
      out->push_back(c);
      advance();
    }
    if (pos_ >= t_.size()) return error("unterminated value");
    advance();
    return Status();
  }
  Status element(XmlElement* e, int depth) {
    if (depth > kMaxDepth) return error("elements nested deeper than 32");
    if (++elements_ > kMaxElements) return error("more than 100000 elements");
    e->line = line_;
    advance();  // '<'
    WEFT_RETURN_IF_ERROR(name(&e->name));
    for (;;) {
      const size_t before = pos_;
      skipSpace();
      if (pos_ >= t_.size()) return error("unterminated element <" + e->name + ">");
      if (t_.compare(pos_, 2, "/>") == 0) {
        advanceTo(pos_ + 2);
        return Status();
      }
      if (t_[pos_] == '>') {
        advance();
        break;
      }
      if (pos_ == before) return error("expected white space before an attribute");
      std::string key, val;
      WEFT_RETURN_IF_ERROR(name(&key));
      skipSpace();
      if (pos_ >= t_.size() || t_[pos_] != '=') return error("expected '=' after " + key);
      advance();
      skipSpace();
      WEFT_RETURN_IF_ERROR(value(&val));
      if (e->attr(key)) return error("attribute " + key + " given twice");
      if (e->attrs.size() >= kMaxAttrs) return error("more than 32 attributes");
      e->attrs.emplace_back(key, val);
    }
    // Content: child elements, comments and white space, then the end tag.
    for (;;) {
      WEFT_RETURN_IF_ERROR(skipMisc());
      if (pos_ >= t_.size()) return error("unterminated element <" + e->name + ">");
      if (t_[pos_] != '<') return error("text content is not accepted");
      if (t_.compare(pos_, 2, "</") == 0) {
        advanceTo(pos_ + 2);
        std::string end;
        WEFT_RETURN_IF_ERROR(name(&end));
        if (end != e->name) return error("</" + end + "> closes <" + e->name + ">");
        skipSpace();
        if (pos_ >= t_.size() || t_[pos_] != '>') return error("expected '>'");
        advance();
        return Status();
      }
      e->children.emplace_back();
      WEFT_RETURN_IF_ERROR(element(&e->children.back(), depth + 1));
    }
  }

  const std::string& t_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  size_t elements_ = 0;
};

}  // namespace

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

Status parseXml(const std::string& text, XmlElement* root) {
  if (text.size() > kXmlMaxBytes)
    return invalidArgument(
        strFormat("%zu bytes: more than the 4 MiB a topology file may have", text.size()));
  if (text.find('\0') != std::string::npos) return invalidArgument("a NUL byte: not a text file");
  XmlElement r;
  WEFT_RETURN_IF_ERROR(Parser(text).run(&r));
  *root = std::move(r);
  return Status();
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace topo
}  // namespace weft
