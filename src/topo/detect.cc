// detectSystem: hwloc gives the sockets (packages), NUMA nodes, cores and
// the PCI tree; findNics / findGpus give the devices, placed in that tree
// by bus id. What hwloc does not say is assumed and noted: the socket links
// (two UPI links per pair) and the PCIe speed of a link hwloc reports as 0
// (virtual devices: gen3 x16).
#include "topo/detect.h"

#include <hwloc.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "topo/link_table.h"

namespace weft {
namespace topo {
namespace {

class Builder {
 public:
  Builder(hwloc_topology_t t, System* s, std::vector<std::string>* notes)
      : t_(t), s_(s), notes_(notes) {}

  void cpusAndNuma() {
    const int npkg = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < std::max(npkg, 1); ++i) {
      hwloc_obj_t o =
          npkg > 0 ? hwloc_get_obj_by_type(t_, HWLOC_OBJ_PACKAGE, i) : hwloc_get_root_obj(t_);
      Node n;
      n.type = NodeType::Cpu;
      n.id = strFormat("cpu%d", i);
      if (const char* m = hwloc_obj_get_info_by_name(o, "CPUModel")) n.name = m;
      n.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t_, o->cpuset, HWLOC_OBJ_CORE);
      cpuSets_.push_back(o->cpuset);
      cpus_.push_back(s_->addNode(n));
    }
    for (size_t a = 0; a < cpus_.size(); ++a)
      for (size_t b = a + 1; b < cpus_.size(); ++b) {
        Link l;
        l.a = cpus_[a];
        l.b = cpus_[b];
        l.type = LinkType::Smp;
        l.tech = "upi";
        l.count = 2;
        s_->addLink(l);
      }
    if (cpus_.size() > 1)
      notes_->push_back("socket links are not detected: assumed 2 UPI links (41.6 GB/s) per pair");
    const int nnuma = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < std::max(nnuma, 1); ++i) {
      hwloc_obj_t o =
          nnuma > 0 ? hwloc_get_obj_by_type(t_, HWLOC_OBJ_NUMANODE, i) : hwloc_get_root_obj(t_);
      Node n;
      n.type = NodeType::Numa;
      n.id = strFormat("numa%d", i);
      n.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t_, o->cpuset, HWLOC_OBJ_CORE);
      if (nnuma > 0) n.memGB = o->attr->numanode.local_memory / 1e9;
      n.parent = cpus_[0];
      for (size_t c = 0; c < cpus_.size(); ++c)
        if (hwloc_bitmap_intersects(cpuSets_[c], o->cpuset)) {
          n.parent = cpus_[c];
          break;
        }
      numaSets_.push_back(o->cpuset);
      const int me = s_->addNode(n);
      numas_.push_back(me);
      Link l;
      l.a = n.parent;
      l.b = me;
      l.type = LinkType::Mem;
      s_->addLink(l);
    }
  }

  // The node a device with this bus id hangs from (creating PCI switch
  // nodes for the bridges above it), and its upstream link.
  int attach(const std::string& busId, Link* up) {
    hwloc_obj_t o = busId.empty() ? nullptr : hwloc_get_pcidev_by_busidstring(t_, busId.c_str());
    if (!o) {
      notes_->push_back(busId + ": not in hwloc's PCI tree, placed below numa0");
      setSpeed(up, 0);
      return numas_[0];
    }
    setSpeed(up, o->attr->pcidev.linkspeed);
    return parentOf(o->parent, o);
  }

  int numa(int i) const { return numas_[i]; }

 private:
  void setSpeed(Link* l, float gbs) {
    l->type = LinkType::Pcie;
    if (gbs > 0) {
      l->bwGBs = gbs;
    } else {
      l->gen = 3;
      l->width = 16;
      if (!assumedNoted_)
        notes_->push_back("PCIe link speed unknown for some devices: assumed gen3 x16");
      assumedNoted_ = true;
    }
  }
  int numaFor(hwloc_obj_t io) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t_, io);
    for (size_t i = 0; anc && i < numaSets_.size(); ++i)
      if (hwloc_bitmap_intersects(numaSets_[i], anc->cpuset)) return numas_[i];
    return numas_[0];
  }
  // A PCI-to-PCI bridge becomes a PCI switch node below its own parent;
  // host bridges and non-I/O objects end at the NUMA node.
  int parentOf(hwloc_obj_t p, hwloc_obj_t child) {
    if (!p || p->type != HWLOC_OBJ_BRIDGE || p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI)
      return numaFor(child);
    auto it = bridges_.find(p);
    if (it != bridges_.end()) return it->second;
    Node n;
    n.type = NodeType::Pci;
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pa = p->attr->bridge.upstream.pci;
    n.busId = strFormat("%04x:%02x:%02x.%x", pa.domain, pa.bus, pa.dev, pa.func);
    n.id = strFormat("pci%zu", bridges_.size());
    Link up;
    setSpeed(&up, pa.linkspeed);
    n.parent = parentOf(p->parent, p);
    const int me = s_->addNode(n);
    up.a = n.parent;
    up.b = me;
    s_->addLink(up);
    bridges_[p] = me;
    return me;
  }

  hwloc_topology_t t_;
  System* s_;
  std::vector<std::string>* notes_;
  std::vector<int> cpus_, numas_;
  std::vector<hwloc_const_cpuset_t> cpuSets_, numaSets_;
  std::map<hwloc_obj_t, int> bridges_;
  bool assumedNoted_ = false;
};

int nvlinkGenOfArch(int arch) {
  if (arch >= 100) return 5;
  if (arch >= 90) return 4;
  if (arch >= 80) return 3;
  if (arch >= 70) return 2;
  return 1;
}

}  // namespace

Status detectSystem(System* out, std::vector<std::string>* notesOut) {
  std::vector<std::string> scratch;
  std::vector<std::string>* notes = notesOut ? notesOut : &scratch;
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) return systemError("hwloc_topology_init", errno);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) {
    const int e = errno;
    hwloc_topology_destroy(t);
    return systemError("hwloc_topology_load", e);
  }
  System s;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  s.name = host;
  Builder b(t, &s, notes);
  b.cpusAndNuma();

  int nicNo = 0, gpuNo = 0;
  for (const NicInfo& nic : findNics(notes)) {
    Node n;
    n.type = NodeType::Nic;
    n.id = strFormat("nic%d", nicNo++);
    n.name = nic.name;
    n.busId = nic.busId;
    n.nicType = nic.type;
    n.speedGbps = nic.speedGbps;
    Link up;
    n.parent = b.attach(nic.busId, &up);
    up.a = n.parent;
    up.b = s.addNode(n);
    s.addLink(up);
  }
  const std::vector<GpuInfo> gpus = findGpus(notes);
  std::map<std::string, int> byBus, switches;
  for (const GpuInfo& g : gpus) {
    Node n;
    n.type = NodeType::Gpu;
    n.id = strFormat("gpu%d", gpuNo++);
    n.name = g.name;
    n.busId = g.busId;
    n.gpuArch = g.arch;
    Link up;
    n.parent = b.attach(g.busId, &up);
    up.a = n.parent;
    up.b = s.addNode(n);
    byBus[g.busId] = up.b;
    s.addLink(up);
  }
  if (gpus.empty()) notes->push_back("no GPU");
  // NVLinks: counted per pair of ends; a GPU-GPU link is seen from both
  // GPUs, so only the end with the smaller bus id counts it.
  std::map<std::pair<int, int>, int> counts;
  for (const GpuInfo& g : gpus) {
    const int me = byBus[g.busId];
    for (const GpuInfo::NvLink& l : g.nvlinks) {
      int other;
      if (l.toSwitch) {
        auto it = switches.find(l.remoteBusId);
        if (it == switches.end()) {
          Node n;
          n.type = NodeType::NvSwitch;
          n.id = strFormat("nvs%zu", switches.size());
          n.busId = l.remoteBusId;
          it = switches.emplace(l.remoteBusId, s.addNode(n)).first;
        }
        other = it->second;
      } else {
        auto it = byBus.find(l.remoteBusId);
        if (it == byBus.end() || !(g.busId < l.remoteBusId)) continue;
        other = it->second;
      }
      ++counts[{me, other}];
    }
  }
  for (const auto& c : counts) {
    Link l;
    l.a = c.first.first;
    l.b = c.first.second;
    l.type = LinkType::NvLink;
    l.gen = nvlinkGenOfArch(s.nodes[l.a].gpuArch);
    l.count = c.second;
    s.addLink(l);
  }
  hwloc_topology_destroy(t);
  WEFT_RETURN_IF_ERROR(s.finalize());
  *out = std::move(s);
  return Status();
}

}  // namespace topo
}  // namespace weft
