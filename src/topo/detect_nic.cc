// NICs: RDMA devices through libibverbs (dlopen'ed: weft must run where it
// is not installed), their ports' rate and link layer from the device's
// sysfs directory (the same attributes ibv_query_port reports), then the
// Ethernet interfaces of /sys/class/net that sit on a PCI device.
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>

#include "core/file.h"
#include "topo/detect.h"

namespace weft {
namespace topo {
namespace {

// The PCI device a sysfs device link leads to: the last path component of
// its real path that reads as a bus id (virtio and other buses sit below it).
std::string pciOfSysfs(const std::string& deviceLink) {
  char buf[PATH_MAX];
  if (!realpath(deviceLink.c_str(), buf)) return "";
  std::string p(buf), found;
  size_t pos = 0;
  while (pos < p.size()) {
    size_t slash = p.find('/', pos);
    if (slash == std::string::npos) slash = p.size();
    const std::string id = normalizeBusId(p.substr(pos, slash - pos));
    if (!id.empty()) found = id;
    pos = slash + 1;
  }
  return found;
}

void findRdma(std::vector<NicInfo>* out, std::vector<std::string>* notes) {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    notes->push_back("ibverbs: libibverbs.so.1 not found, no RDMA NICs");
    return;
  }
  using GetList = void** (*)(int*);
  using FreeList = void (*)(void**);
  using GetName = const char* (*)(void*);
  auto getList = reinterpret_cast<GetList>(dlsym(lib, "ibv_get_device_list"));
  auto freeList = reinterpret_cast<FreeList>(dlsym(lib, "ibv_free_device_list"));
  auto getName = reinterpret_cast<GetName>(dlsym(lib, "ibv_get_device_name"));
  if (!getList || !freeList || !getName) {
    notes->push_back("ibverbs: libibverbs.so.1 lacks ibv_get_device_list");
    dlclose(lib);
    return;
  }
  int n = 0;
  void** list = getList(&n);
  for (int i = 0; list && i < n; ++i) {
    const char* name = getName(list[i]);
    if (!name) continue;
    const std::string dir = std::string("/sys/class/infiniband/") + name;
    NicInfo nic;
    nic.name = name;
    nic.busId = pciOfSysfs(dir + "/device");
    // Port 1: "100 Gb/sec (4X EDR)", "InfiniBand" or "Ethernet".
    const std::string rate = readFirstLine(dir + "/ports/1/rate");
    double gbps = 0;
    if (sscanf(rate.c_str(), "%lf", &gbps) == 1) nic.speedGbps = gbps;
    nic.type = readFirstLine(dir + "/ports/1/link_layer") == "Ethernet" ? "roce" : "ib";
    nic.gid = readFirstLine(dir + "/ports/1/gids/0");
    out->push_back(nic);
  }
  notes->push_back(strFormat("ibverbs: %d RDMA device(s)", list ? n : 0));
  if (list) freeList(list);
  dlclose(lib);
}

void findEthernet(std::vector<NicInfo>* out, std::vector<std::string>* notes) {
  DIR* d = opendir("/sys/class/net");
  if (!d) {
    notes->push_back("sysfs: /sys/class/net not readable, no Ethernet NICs");
    return;
  }
  int found = 0;
  std::string skipped;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string dir = "/sys/class/net/" + name;
    const std::string bus = pciOfSysfs(dir + "/device");
    if (bus.empty()) {
      skipped += (skipped.empty() ? "" : ",") + name;
      continue;
    }
    bool dup = false;
    for (const NicInfo& n : *out) dup = dup || n.busId == bus;
    if (dup) continue;
    NicInfo nic;
    nic.name = name;
    nic.busId = bus;
    nic.type = "eth";
    // Mb/s; -1 (or an error) when the driver does not know (virtio).
    const long mbps = atol(readFirstLine(dir + "/speed").c_str());
    if (mbps > 0) nic.speedGbps = mbps / 1000.0;
    out->push_back(nic);
    ++found;
  }
  closedir(d);
  notes->push_back(strFormat("sysfs: %d Ethernet interface(s) on PCI devices%s%s", found,
                             skipped.empty() ? "" : "; without a PCI device: ", skipped.c_str()));
}

}  // namespace

std::string normalizeBusId(const std::string& s) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  // sscanf's %x would also take "0x" prefixes and signs: hex digits, two
  // colons and a dot only.
  if (s.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) return "";
  if (sscanf(s.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) return "";
  if (s.size() < 12 || bus > 0xff || dev > 0x1f || fn > 7 || dom > 0xffffffu) return "";
  return strFormat("%04x:%02x:%02x.%x", dom, bus, dev, fn);
}

std::vector<NicInfo> findNics(std::vector<std::string>* notes) {
  std::vector<NicInfo> out;
  findRdma(&out, notes);
  findEthernet(&out, notes);
  return out;
}

}  // namespace topo
}  // namespace weft
