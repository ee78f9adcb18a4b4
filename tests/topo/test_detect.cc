// Detection on the machine the tests run on, for real: hwloc must find its
// CPUs; GPUs and RDMA NICs are found when present (none is a correct
// answer), and every Ethernet interface on a PCI device is a NIC.
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "topo/detect.h"
#include "topo/view.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

TEST_CASE("detection finds this machine's CPUs, NICs and (no) GPUs", "[topo]") {
  System s;
  std::vector<std::string> notes;
  const Status st = detectSystem(&s, &notes);
  INFO(st.message());
  REQUIRE(st.isOk());
  for (const std::string& n : notes) UNSCOPED_INFO(n);
  REQUIRE(!s.nodesOf(NodeType::Cpu).empty());
  REQUIRE(!s.nodesOf(NodeType::Numa).empty());
  int cores = 0;
  for (int c : s.nodesOf(NodeType::Cpu)) cores += s.nodes[c].cores;
  REQUIRE(cores >= 1);
  REQUIRE(cores <= sysconf(_SC_NPROCESSORS_ONLN));
  // GPUs: only with NVIDIA's libraries; without them, "no GPU".
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml && !cuda) {
    REQUIRE(s.nodesOf(NodeType::Gpu).empty());
    REQUIRE(std::find(notes.begin(), notes.end(), "no GPU") != notes.end());
  }
  if (nvml) dlclose(nvml);
  if (cuda) dlclose(cuda);
  // NICs: one per Ethernet interface with a PCI device, or RDMA device.
  int withPci = 0;
  DIR* d = opendir("/sys/class/net");
  REQUIRE(d);
  while (dirent* e = readdir(d)) {
    char buf[PATH_MAX];
    const std::string link = std::string("/sys/class/net/") + e->d_name + "/device";
    if (e->d_name[0] != '.' && realpath(link.c_str(), buf) && strstr(buf, "/pci")) ++withPci;
  }
  closedir(d);
  int eth = 0;
  for (int n : s.nodesOf(NodeType::Nic)) {
    REQUIRE(!s.nodes[n].busId.empty());
    REQUIRE(normalizeBusId(s.nodes[n].busId) == s.nodes[n].busId);
    eth += s.nodes[n].nicType == "eth";
  }
  REQUIRE(eth <= withPci);
  if (access("/sys/class/infiniband", F_OK) != 0) REQUIRE(eth == withPci);
  // What weft builds on it, and the dump loads back.
  View v;
  REQUIRE(View::build(s, 2, 2, &v).isOk());
  REQUIRE(!v.channels.empty());
  System back;
  REQUIRE(loadSystemXml(dumpSystemXml(s), &back).isOk());
  REQUIRE(back.nodes.size() == s.nodes.size());
}

TEST_CASE("bus ids are normalized or refused", "[topo]") {
  REQUIRE(normalizeBusId("00000000:1B:00.0") == "0000:1b:00.0");
  REQUIRE(normalizeBusId("0000:00:03.0") == "0000:00:03.0");
  REQUIRE(normalizeBusId("virtio2").empty());
  REQUIRE(normalizeBusId("pci0000:00").empty());
  REQUIRE(normalizeBusId("0000:00:03.0x1").empty());
  REQUIRE(normalizeBusId("0000:00:40.0").empty());
}
