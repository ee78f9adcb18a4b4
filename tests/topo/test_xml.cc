// Topology files: the dump of every shipped file loads back to the same
// graph; malformed and hostile files are refused with an error that says
// why (and where).
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "topo/topo_file.h"
#include "topo/view.h"
#include "topo/xml.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

namespace {

const char* kMinimal =
    "<system name=\"m\"><cpu id=\"cpu0\"><numa id=\"numa0\">"
    "<gpu id=\"gpu0\" gen=\"4\" width=\"16\"/></numa></cpu></system>";

// Loading `text` fails and the message contains `why`.
void refused(const std::string& text, const std::string& why) {
  System s;
  const Status st = loadSystemXml(text, &s);
  INFO("input: " << text.substr(0, 200) << "\nmessage: " << st.message());
  REQUIRE(st.code() == WEFT_ERR_INVALID_ARGUMENT);
  REQUIRE(st.message().find(why) != std::string::npos);
}

std::string withBody(const std::string& body) {
  return std::string("<system><cpu id=\"cpu0\"><numa id=\"numa0\">") + body +
         "</numa></cpu></system>";
}

}  // namespace

TEST_CASE("dump and load give the same graph for every shipped file", "[topo]") {
  for (const std::string& f : ttest::shippedFiles()) {
    INFO(f);
    const System a = ttest::load(f);
    System b;
    REQUIRE(loadSystemXml(dumpSystemXml(a), &b).isOk());
    REQUIRE(b.name == a.name);
    REQUIRE(b.nodes.size() == a.nodes.size());
    REQUIRE(b.links.size() == a.links.size());
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      const int j = b.find(a.nodes[i].id);
      REQUIRE(j >= 0);
      REQUIRE(b.nodes[j].type == a.nodes[i].type);
      for (size_t k = 0; k < a.nodes.size(); ++k) {
        const int l = b.find(a.nodes[k].id);
        REQUIRE(b.path(j, l).cls == a.path(i, k).cls);
        REQUIRE(b.path(j, l).bwGBs == Approx(a.path(i, k).bwGBs));
      }
    }
  }
  // Through a file, too.
  char path[] = "/tmp/weft-topo-dumpXXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  const System a = ttest::load("dgx-h100.xml");
  REQUIRE(dumpSystemFile(a, path).isOk());
  System b;
  REQUIRE(loadSystemFile(path, &b).isOk());
  REQUIRE(b.nodes.size() == a.nodes.size());
  unlink(path);
}

TEST_CASE("a minimal file loads", "[topo]") {
  System s;
  const Status st = loadSystemXml(kMinimal, &s);
  INFO(st.message());
  REQUIRE(st.isOk());
  REQUIRE(s.nodes.size() == 3);
}

TEST_CASE("malformed XML is refused with line and column", "[topo]") {
  refused("", "expected the root element");
  refused("<system>", "unterminated element <system>");
  refused("<system></cpu>", "</cpu> closes <system>");
  refused("<system a=1/>", "expected a quoted value");
  refused("<system a=\"1/>", "unterminated value");
  refused("<system a=\"1\" a=\"2\"/>", "attribute a given twice");
  refused("<system>text</system>", "text content is not accepted");
  refused("<system/><system/>", "content after the root element");
  refused("<system a=\"&foo;\"/>", "unknown entity");
  refused("<system a=\"&#65;\"/>", "unknown entity or character reference");
  refused("<!-- never closed <system/>", "unterminated comment");
  refused("<system a=\"x\"b=\"y\"/>", "expected white space before an attribute");
  refused("<1system/>", "expected a name");
  refused(std::string("<system>\0</system>", 18), "NUL byte");
  refused("<system/>\n\n  <", "line 3, column 3");
}

TEST_CASE("hostile XML is refused before it costs anything", "[topo]") {
  // Entity expansion ("billion laughs") and external entities: no DTD at all.
  refused(
      "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
      "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;\">]><system a=\"&lol2;\"/>",
      "DOCTYPE");
  refused("<!DOCTYPE s SYSTEM \"file:///etc/passwd\"><system/>", "DOCTYPE");
  refused("<system><![CDATA[x]]></system>", "CDATA");
  refused("<system><?php evil ?></system>", "processing instructions");
  // Depth, size, counts and lengths are bounded.
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  refused(deep, "nested deeper than 32");
  refused(std::string(kXmlMaxBytes + 1, ' '), "more than the 4 MiB");
  std::string wide = "<system>";
  for (int i = 0; i < 100001; ++i) wide += "<a/>";
  refused(wide + "</system>", "more than 100000 elements");
  std::string attrs = "<system";
  for (int i = 0; i < 33; ++i) attrs += " a" + std::to_string(i) + "=\"1\"";
  refused(attrs + "/>", "more than 32 attributes");
  refused("<" + std::string(65, 'a') + "/>", "longer than 64");
  refused("<system name=\"" + std::string(5000, 'x') + "\"/>", "longer than 4096");
}

TEST_CASE("files that parse but do not describe a machine are refused", "[topo]") {
  refused("<machine/>", "root element must be <system>");
  refused("<system version=\"2\"/>", "version 2 is not supported");
  refused("<system/>", "no cpu");
  refused("<system color=\"red\"><cpu id=\"c\"/></system>", "no attribute color");
  refused(withBody("<gpu id=\"g\" gen=\"4\" width=\"16\" color=\"red\"/>"), "no attribute color");
  refused(withBody("<disk id=\"d\"/>"), "<disk> cannot sit in <numa>");
  refused("<system><gpu id=\"g\"/></system>", "<gpu> cannot sit in <system>");
  refused("<system><cpu id=\"c\"><gpu id=\"g\" gen=\"4\" width=\"16\"/></cpu></system>",
          "<gpu> cannot sit in <cpu>");
  refused(withBody("<gpu id=\"numa0\" gen=\"4\" width=\"16\"/>"), "id numa0 is used twice");
  refused(withBody("<gpu gen=\"4\" width=\"16\"/>"), "needs an id");
  refused(withBody("<gpu id=\"g\"/>"), "needs gen and width");
  refused(withBody("<gpu id=\"g\" gen=\"9\" width=\"16\"/>"),
          "gen=\"9\" is not a number in [1, 6]");
  refused(withBody("<gpu id=\"g\" gen=\"4\" width=\"16x\"/>"), "width=\"16x\"");
  refused(withBody("<gpu id=\"g\" gen=\"4\" width=\"2.5\"/>"), "must be an integer");
  refused(withBody("<gpu id=\"g\" bw=\"nan\"/>"), "bw=\"nan\"");
  refused(withBody("<gpu id=\"g\" bw=\"1e999\"/>"), "bw=\"1e999\"");
  refused(withBody("<gpu id=\"g\" bw=\"-3\"/>"), "bw=\"-3\"");
  refused(withBody("<nic id=\"n\" type=\"carrier-pigeon\" bw=\"1\"/>"), "nic type must be");
  const std::string gpus = "<gpu id=\"g0\" bw=\"10\"/><gpu id=\"g1\" bw=\"10\"/>";
  auto withLink = [&](const std::string& link) {
    return "<system><cpu id=\"cpu0\"><numa id=\"numa0\">" + gpus + "</numa></cpu>" + link +
           "</system>";
  };
  REQUIRE(System().nodes.empty());
  refused(withLink("<link a=\"g0\" b=\"g9\" type=\"nvlink\" gen=\"4\"/>"), "g9 is not a node");
  refused(withLink("<link a=\"g0\" b=\"g0\" type=\"nvlink\" gen=\"4\"/>"), "to itself");
  refused(withLink("<link a=\"g0\" b=\"g1\" type=\"nvlink\"/>"), "does not price this link");
  refused(withLink("<link a=\"g0\" b=\"g1\" type=\"nvlink\" gen=\"4\" count=\"65\"/>"),
          "count=\"65\"");
  refused(withLink("<link a=\"g0\" b=\"g1\" type=\"pcie\"/>"), "link type must be nvlink or smp");
  refused(withLink("<link a=\"g0\" b=\"cpu0\" type=\"nvlink\" gen=\"4\"/>"),
          "a nvlink link cannot join g0 (gpu) and cpu0 (cpu)");
  refused(withLink("<link a=\"g0\" b=\"g1\" type=\"smp\" tech=\"upi\"/>"),
          "a smp link cannot join");
  refused(withLink("<link a=\"g0\" type=\"nvlink\"/>"), "needs a, b and type");
}

TEST_CASE("topology files that are not regular, readable files are refused", "[topo]") {
  System s;
  Status st = loadSystemFile("/nonexistent/weft-topo.xml", &s);
  REQUIRE(st.isError());
  REQUIRE(st.message().find("/nonexistent/weft-topo.xml") != std::string::npos);
  st = loadSystemFile("/dev/zero", &s);
  REQUIRE(st.isError());
  REQUIRE(st.message().find("not a regular file") != std::string::npos);
  st = loadSystemFile("/tmp", &s);
  REQUIRE(st.isError());
  // A malformed file names itself and the line.
  char path[] = "/tmp/weft-topo-badXXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string bad = "<system>\n<cpu id=\"c\">\n</system>\n";
  REQUIRE(write(fd, bad.data(), bad.size()) == static_cast<ssize_t>(bad.size()));
  close(fd);
  st = loadSystemFile(path, &s);
  unlink(path);
  INFO(st.message());
  REQUIRE(st.message().find(path) != std::string::npos);
  REQUIRE(st.message().find("line 3") != std::string::npos);
}

TEST_CASE("large files load in bounded time or are refused", "[topo]") {
  // 200 GPUs on 8 NVSwitches and 40 NICs: within the limits.
  auto machine = [](int gpus, int nics) {
    std::string x = "<system><cpu id=\"cpu0\"><numa id=\"numa0\">";
    for (int s = 0; s < 10; ++s) {
      x += "<pci id=\"sw" + std::to_string(s) + "\" gen=\"5\" width=\"16\">";
      for (int g = s; g < gpus; g += 10)
        x += "<gpu id=\"gpu" + std::to_string(g) + "\" gen=\"5\" width=\"16\"/>";
      for (int n = s; n < nics; n += 10)
        x += "<nic id=\"nic" + std::to_string(n) + "\" gen=\"5\" width=\"16\" speed_gbps=\"400\"/>";
      x += "</pci>";
    }
    x += "</numa></cpu>";
    for (int s = 0; s < 8; ++s) x += "<nvswitch id=\"nvs" + std::to_string(s) + "\"/>";
    for (int g = 0; g < gpus; ++g)
      for (int s = 0; s < 8; ++s)
        x += "<link a=\"gpu" + std::to_string(g) + "\" b=\"nvs" + std::to_string(s) +
             "\" type=\"nvlink\" gen=\"4\" count=\"2\"/>";
    return x + "</system>";
  };
  System s;
  const Status st = loadSystemXml(machine(200, 40), &s);
  INFO(st.message());
  REQUIRE(st.isOk());
  REQUIRE(s.path(s.find("gpu0"), s.find("gpu199")).cls == PathClass::Nvl);
  REQUIRE(s.path(s.find("gpu0"), s.find("gpu199")).bwGBs == Approx(400));
  // More ranks per node than the ring search takes: the grouped ring.
  View v;
  REQUIRE(View::build(s, 2, 200, &v).isOk());
  REQUIRE(v.channels.size() >= 1);
  REQUIRE(v.channels[0].ring.size() == 200);
  // Over the limits: refused, not computed.
  refused(machine(250, 40), "more than weft models");
}
