#include "topo/topo_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "topo/link_table.h"
#include "topo/xml.h"

namespace weft {
namespace topo {
namespace {

constexpr size_t kMaxNodes = 4096;

class Loader {
 public:
  explicit Loader(System* s) : s_(s) {}

  Status system(const XmlElement& e) {
    if (e.name != "system")
      return err(e, "the root element must be <system>, not <" + e.name + ">");
    WEFT_RETURN_IF_ERROR(allowed(e, {"name", "version"}));
    if (const std::string* v = e.attr("version"))
      if (*v != "1") return err(e, "version " + *v + " is not supported (1 is)");
    if (const std::string* n = e.attr("name")) s_->name = *n;
    // Nodes first (links may name any of them), then links.
    for (const XmlElement& c : e.children) {
      if (c.name == "cpu") {
        WEFT_RETURN_IF_ERROR(node(c, NodeType::Cpu, -1));
      } else if (c.name == "nvswitch") {
        WEFT_RETURN_IF_ERROR(node(c, NodeType::NvSwitch, -1));
      } else if (c.name != "link") {
        return err(c, "<" + c.name + "> cannot sit in <system> (cpu, nvswitch, link can)");
      }
    }
    for (const XmlElement& c : e.children)
      if (c.name == "link") WEFT_RETURN_IF_ERROR(link(c));
    return Status();
  }

 private:
  Status err(const XmlElement& e, const std::string& what) const {
    return invalidArgument(strFormat("line %d: %s", e.line, what.c_str()));
  }
  Status allowed(const XmlElement& e, std::initializer_list<const char*> keys) const {
    for (const auto& kv : e.attrs) {
      bool ok = false;
      for (const char* k : keys) ok = ok || kv.first == k;
      if (!ok) return err(e, "<" + e.name + "> has no attribute " + kv.first);
    }
    return Status();
  }
  // A number in [lo, hi]; `def` when absent and not required.
  Status number(const XmlElement& e, const char* key, double lo, double hi, bool required,
                double* out) const {
    const std::string* v = e.attr(key);
    if (!v) {
      if (required) return err(e, strFormat("<%s> needs %s", e.name.c_str(), key));
      return Status();
    }
    char* end = nullptr;
    errno = 0;
    const double d = strtod(v->c_str(), &end);
    if (v->empty() || *end || errno || !std::isfinite(d) || d < lo || d > hi)
      return err(e, strFormat("%s=\"%s\" is not a number in [%g, %g]", key, v->c_str(), lo, hi));
    *out = d;
    return Status();
  }
  Status integer(const XmlElement& e, const char* key, int lo, int hi, bool required,
                 int* out) const {
    double d = *out;
    WEFT_RETURN_IF_ERROR(number(e, key, lo, hi, required, &d));
    if (d != std::floor(d)) return err(e, strFormat("%s must be an integer", key));
    *out = static_cast<int>(d);
    return Status();
  }
  Status id(const XmlElement& e, std::string* out) {
    const std::string* v = e.attr("id");
    if (!v || v->empty()) return err(e, "<" + e.name + "> needs an id");
    if (!ids_.insert(*v).second) return err(e, "id " + *v + " is used twice");
    *out = *v;
    return Status();
  }
  // The upstream PCIe link of a device or switch.
  Status pcieLink(const XmlElement& e, int parent, int child) {
    Link l;
    l.a = parent;
    l.b = child;
    l.type = LinkType::Pcie;
    WEFT_RETURN_IF_ERROR(integer(e, "gen", 1, 6, false, &l.gen));
    WEFT_RETURN_IF_ERROR(integer(e, "width", 1, 32, false, &l.width));
    WEFT_RETURN_IF_ERROR(number(e, "bw", 0.001, 10000, false, &l.bwGBs));
    WEFT_RETURN_IF_ERROR(number(e, "lat", 0, 1000, false, &l.latUs));
    if (l.bwGBs <= 0 && (l.gen == 0 || l.width == 0))
      return err(e, "<" + e.name + "> needs gen and width (or bw) for its PCIe link");
    s_->addLink(l);
    return Status();
  }
  Status node(const XmlElement& e, NodeType t, int parent) {
    if (s_->nodes.size() >= kMaxNodes) return err(e, "more than 4096 nodes");
    Node n;
    n.type = t;
    n.parent = parent;
    WEFT_RETURN_IF_ERROR(id(e, &n.id));
    if (const std::string* v = e.attr("name")) n.name = *v;
    if (const std::string* v = e.attr("busid")) n.busId = *v;
    switch (t) {
      case NodeType::Cpu:
        WEFT_RETURN_IF_ERROR(allowed(e, {"id", "name", "cores"}));
        WEFT_RETURN_IF_ERROR(integer(e, "cores", 0, 1 << 20, false, &n.cores));
        break;
      case NodeType::Numa:
        WEFT_RETURN_IF_ERROR(allowed(e, {"id", "cores", "memory_gb", "bw", "lat"}));
        WEFT_RETURN_IF_ERROR(integer(e, "cores", 0, 1 << 20, false, &n.cores));
        WEFT_RETURN_IF_ERROR(number(e, "memory_gb", 0, 1 << 24, false, &n.memGB));
        break;
      case NodeType::Pci:
        WEFT_RETURN_IF_ERROR(allowed(e, {"id", "name", "busid", "gen", "width", "bw", "lat"}));
        break;
      case NodeType::Gpu:
        WEFT_RETURN_IF_ERROR(
            allowed(e, {"id", "name", "busid", "arch", "gen", "width", "bw", "lat"}));
        WEFT_RETURN_IF_ERROR(integer(e, "arch", 0, 1000, false, &n.gpuArch));
        break;
      case NodeType::Nic: {
        WEFT_RETURN_IF_ERROR(
            allowed(e, {"id", "name", "busid", "type", "speed_gbps", "gen", "width", "bw", "lat"}));
        const std::string* ty = e.attr("type");
        n.nicType = ty ? *ty : "eth";
        if (n.nicType != "ib" && n.nicType != "roce" && n.nicType != "eth")
          return err(e, "nic type must be ib, roce or eth, not " + n.nicType);
        WEFT_RETURN_IF_ERROR(number(e, "speed_gbps", 0, 100000, false, &n.speedGbps));
        break;
      }
      case NodeType::NvSwitch:
        WEFT_RETURN_IF_ERROR(allowed(e, {"id", "name"}));
        break;
    }
    const int me = s_->addNode(n);
    if (t == NodeType::Numa) {
      Link l;
      l.a = parent;
      l.b = me;
      l.type = LinkType::Mem;
      WEFT_RETURN_IF_ERROR(number(e, "bw", 0.001, 100000, false, &l.bwGBs));
      WEFT_RETURN_IF_ERROR(number(e, "lat", 0, 1000, false, &l.latUs));
      s_->addLink(l);
    } else if (parent >= 0) {
      WEFT_RETURN_IF_ERROR(pcieLink(e, parent, me));
    }
    for (const XmlElement& c : e.children) {
      NodeType ct;
      if (c.name == "numa" && t == NodeType::Cpu) {
        ct = NodeType::Numa;
      } else if ((t == NodeType::Numa || t == NodeType::Pci) &&
                 (c.name == "pci" || c.name == "gpu" || c.name == "nic")) {
        ct = c.name == "pci" ? NodeType::Pci : c.name == "gpu" ? NodeType::Gpu : NodeType::Nic;
      } else {
        return err(c, "<" + c.name + "> cannot sit in <" + e.name + ">");
      }
      WEFT_RETURN_IF_ERROR(node(c, ct, me));
    }
    return Status();
  }
  Status link(const XmlElement& e) {
    WEFT_RETURN_IF_ERROR(allowed(e, {"a", "b", "type", "gen", "count", "tech", "bw", "lat"}));
    if (!e.children.empty()) return err(e, "<link> has no children");
    Link l;
    const std::string* a = e.attr("a");
    const std::string* b = e.attr("b");
    const std::string* ty = e.attr("type");
    if (!a || !b || !ty) return err(e, "<link> needs a, b and type");
    l.a = s_->find(*a);
    l.b = s_->find(*b);
    if (l.a < 0) return err(e, "link end " + *a + " is not a node");
    if (l.b < 0) return err(e, "link end " + *b + " is not a node");
    if (l.a == l.b) return err(e, "a link from " + *a + " to itself");
    if (*ty == "nvlink") {
      l.type = LinkType::NvLink;
    } else if (*ty == "smp") {
      l.type = LinkType::Smp;
      if (const std::string* t = e.attr("tech")) l.tech = *t;
    } else {
      return err(e, "link type must be nvlink or smp (PCIe links come from nesting), not " + *ty);
    }
    WEFT_RETURN_IF_ERROR(integer(e, "gen", 1, 5, false, &l.gen));
    WEFT_RETURN_IF_ERROR(integer(e, "count", 1, 64, false, &l.count));
    WEFT_RETURN_IF_ERROR(number(e, "bw", 0.001, 100000, false, &l.bwGBs));
    WEFT_RETURN_IF_ERROR(number(e, "lat", 0, 1000, false, &l.latUs));
    if (!fillLinkDefaults(&l))
      return err(e,
                 "the link table does not price this link: give gen (nvlink), tech "
                 "(smp: qpi, upi, upi16, xgmi) or bw");
    s_->addLink(l);
    return Status();
  }

  System* s_;
  std::set<std::string> ids_;
};

std::string num(double v) { return strFormat("%.6g", v); }

void writeNode(const System& s, int i, int indent, std::string* out) {
  const Node& n = s.nodes[i];
  std::string pad(indent, ' ');
  std::string line = pad + "<" + nodeTypeName(n.type) + " id=\"" + xmlEscape(n.id) + "\"";
  auto attr = [&](const char* k, const std::string& v) {
    if (!v.empty()) line += std::string(" ") + k + "=\"" + xmlEscape(v) + "\"";
  };
  attr("name", n.name);
  attr("busid", n.busId);
  if (n.cores) attr("cores", std::to_string(n.cores));
  if (n.memGB > 0) attr("memory_gb", num(n.memGB));
  if (n.type == NodeType::Gpu && n.gpuArch) attr("arch", std::to_string(n.gpuArch));
  if (n.type == NodeType::Nic) {
    attr("type", n.nicType);
    if (n.speedGbps > 0) attr("speed_gbps", num(n.speedGbps));
  }
  for (const Link& l : s.links) {
    if (l.b != i || l.a != n.parent || l.type == LinkType::NvLink || l.type == LinkType::Smp)
      continue;
    if (l.gen) attr("gen", std::to_string(l.gen));
    if (l.width) attr("width", std::to_string(l.width));
    attr("bw", num(l.bwGBs));
    attr("lat", num(l.latUs));
  }
  std::vector<int> kids;
  for (size_t c = 0; c < s.nodes.size(); ++c)
    if (s.nodes[c].parent == i) kids.push_back(static_cast<int>(c));
  if (kids.empty()) {
    *out += line + "/>\n";
    return;
  }
  *out += line + ">\n";
  for (int c : kids) writeNode(s, c, indent + 2, out);
  *out += pad + "</" + nodeTypeName(n.type) + ">\n";
}

}  // namespace

Status loadSystemXml(const std::string& text, System* out) {
  XmlElement root;
  WEFT_RETURN_IF_ERROR(parseXml(text, &root));
  System s;
  WEFT_RETURN_IF_ERROR(Loader(&s).system(root));
  WEFT_RETURN_IF_ERROR(s.finalize());
  *out = std::move(s);
  return Status();
}

Status loadSystemFile(const std::string& path, System* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return systemError("topology file " + path, errno);
  struct stat st;
  std::string text;
  Status result;
  if (fstat(fd, &st) != 0) {
    result = systemError("topology file " + path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    result = invalidArgument("topology file " + path + ": not a regular file");
  } else if (static_cast<size_t>(st.st_size) > kXmlMaxBytes) {
    result = invalidArgument(strFormat("topology file %s: %lld bytes, more than 4 MiB",
                                       path.c_str(), static_cast<long long>(st.st_size)));
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t r = read(fd, &text[got], text.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    text.resize(got);
  }
  close(fd);
  WEFT_RETURN_IF_ERROR(result);
  Status st2 = loadSystemXml(text, out);
  if (st2.isError()) return st2.withContext("topology file " + path);
  return Status();
}

std::string dumpSystemXml(const System& s) {
  std::string out =
      "<?xml version=\"1.0\"?>\n<system version=\"1\" name=\"" + xmlEscape(s.name) + "\">\n";
  for (size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].parent < 0) writeNode(s, static_cast<int>(i), 2, &out);
  for (const Link& l : s.links) {
    if (l.type != LinkType::NvLink && l.type != LinkType::Smp) continue;
    out += "  <link a=\"" + xmlEscape(s.nodes[l.a].id) + "\" b=\"" + xmlEscape(s.nodes[l.b].id) +
           "\" type=\"" + linkTypeName(l.type) + "\"";
    if (l.gen) out += " gen=\"" + std::to_string(l.gen) + "\"";
    if (l.count > 1) out += " count=\"" + std::to_string(l.count) + "\"";
    if (!l.tech.empty()) out += " tech=\"" + xmlEscape(l.tech) + "\"";
    out += " bw=\"" + num(l.bwGBs) + "\" lat=\"" + num(l.latUs) + "\"/>\n";
  }
  out += "</system>\n";
  return out;
}

Status dumpSystemFile(const System& s, const std::string& path) {
  const std::string tmp = path + strFormat(".tmp%d", static_cast<int>(getpid()));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return systemError("topology dump " + tmp, errno);
  const std::string text = dumpSystemXml(s);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      close(fd);
      unlink(tmp.c_str());
      return systemError("topology dump " + tmp, e);
    }
    done += static_cast<size_t>(w);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return systemError("topology dump " + path, e);
  }
  return Status();
}

}  // namespace topo
}  // namespace weft
