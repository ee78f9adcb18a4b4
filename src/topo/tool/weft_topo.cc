// weft-topo: prints the machine as weft sees it (detected, or loaded from a
// topology file), the path class and bandwidth between its devices, and the
// rings and trees weft builds for a number of nodes and ranks per node.
//
//   weft-topo                                   this machine
//   weft-topo -f docs/topologies/dgx-h100.xml --nodes 4 --ranks-per-node 8
//   weft-topo -f FILE --dot | dot -Tsvg > topo.svg
//   weft-topo -f FILE --simulate                allreduce busbw per algorithm
//   weft-topo --dump FILE                       the detected system as XML
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "topo/detect.h"
#include "topo/simulate.h"
#include "topo/topo_file.h"
#include "topo/view.h"

namespace {

using namespace weft;
using namespace weft::topo;

struct Options {
  std::string file, dump;
  int nodes = 1, rpn = 0;
  bool dot = false, simulate = false;
};

void usage(FILE* f) {
  fprintf(
      f,
      "usage: weft-topo [-f FILE] [--nodes N] [--ranks-per-node R] [--dot] [--simulate]\n"
      "                 [--dump FILE]\n"
      "  -f, --file FILE         load a topology file instead of detecting (also WEFT_TOPO_FILE)\n"
      "  -N, --nodes N           nodes for the rings and trees (default 1)\n"
      "  -R, --ranks-per-node R  ranks per node (default: GPUs, else NUMA nodes)\n"
      "      --dot               print the system as a Graphviz graph, nothing else\n"
      "      --simulate          estimated allreduce bus bandwidth per algorithm\n"
      "      --dump FILE         write the system as XML\n");
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

std::string fmtGBs(double v) { return v >= 1e17 ? "inf" : strFormat("%.1f", v); }

std::string linkText(const Link& l) {
  std::string t = linkTypeName(l.type);
  if (l.type == LinkType::Pcie && l.gen) t += strFormat(" gen%d x%d", l.gen, l.width);
  if (l.type == LinkType::NvLink) t += strFormat("%d x%d", l.gen, l.count);
  if (l.type == LinkType::Smp) t += strFormat(" %s x%d", l.tech.c_str(), l.count);
  return t + " " + fmtGBs(l.bwGBs) + " GB/s";
}

std::string nodeText(const System& s, int i) {
  const Node& n = s.nodes[i];
  std::string t = n.id;
  if (!n.name.empty()) t += " \"" + n.name + "\"";
  if (!n.busId.empty()) t += " " + n.busId;
  if (n.cores) t += strFormat(" %d cores", n.cores);
  if (n.memGB > 0) t += strFormat(" %.0f GB", n.memGB);
  if (n.type == NodeType::Gpu && n.gpuArch) t += strFormat(" sm_%d", n.gpuArch);
  if (n.type == NodeType::Nic)
    t += " " + n.nicType + (n.speedGbps > 0 ? strFormat(" %.0f Gb/s", n.speedGbps) : " speed ?");
  return t;
}

void printTree(const System& s, int i, int depth) {
  std::string up;
  for (const Link& l : s.links)
    if (l.b == i && l.a == s.nodes[i].parent && s.nodes[i].parent >= 0)
      up = "  [" + linkText(l) + "]";
  printf("%*s%s%s\n", 2 * depth, "", nodeText(s, i).c_str(), up.c_str());
  for (size_t c = 0; c < s.nodes.size(); ++c)
    if (s.nodes[c].parent == i) printTree(s, static_cast<int>(c), depth + 1);
}

void printSystem(const System& s) {
  printf("system \"%s\": %zu cpu, %zu numa, %zu gpu, %zu nic, %zu nvswitch\n", s.name.c_str(),
         s.nodesOf(NodeType::Cpu).size(), s.nodesOf(NodeType::Numa).size(),
         s.nodesOf(NodeType::Gpu).size(), s.nodesOf(NodeType::Nic).size(),
         s.nodesOf(NodeType::NvSwitch).size());
  for (size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].parent < 0) printTree(s, static_cast<int>(i), 1);
  bool header = false;
  for (const Link& l : s.links) {
    if (l.type != LinkType::NvLink && l.type != LinkType::Smp) continue;
    if (!header) printf("links:\n");
    header = true;
    printf("  %s - %s  %s\n", s.nodes[l.a].id.c_str(), s.nodes[l.b].id.c_str(),
           linkText(l).c_str());
  }
  // Paths between the devices ranks use and the NICs (NUMA nodes when
  // there is no GPU).
  std::vector<int> ends = s.nodesOf(NodeType::Gpu);
  if (ends.empty()) ends = s.nodesOf(NodeType::Numa);
  for (int n : s.nodesOf(NodeType::Nic)) ends.push_back(n);
  printf("paths (class bandwidth GB/s):\n%8s", "");
  for (int b : ends) printf(" %9s", s.nodes[b].id.c_str());
  printf("\n");
  for (int a : ends) {
    printf("%8s", s.nodes[a].id.c_str());
    for (int b : ends) {
      const Path& p = s.path(a, b);
      printf(" %9s", (std::string(pathClassName(p.cls)) + " " + fmtGBs(p.bwGBs)).c_str());
    }
    printf("\n");
  }
}

void printView(const View& v) {
  printf("view: %s\n", v.describe().c_str());
  for (size_t c = 0; c < v.channels.size(); ++c)
    printf(
        "  channel %zu: %s, %d socket crossing(s)\n", c,
        v.nvlinkOnly(static_cast<int>(c)) ? "NVLink or same-device hops only" : "uses PCI/SMP hops",
        v.crossings(static_cast<int>(c)));
  std::string dev;
  for (int r = 0; r < v.ranksPerNode; ++r)
    dev += strFormat("%s%d:%s", r ? " " : "", r, v.system->nodes[v.device[r]].id.c_str());
  printf("  ranks per node on: %s\n", dev.c_str());
  if (v.nodes > 1) {
    printf("  global ring, channel 0: ");
    const std::vector<int> ring = v.globalRing(0);
    for (size_t i = 0; i < ring.size() && i < 64; ++i) printf("%d ", ring[i]);
    printf("%s\n", ring.size() > 64 ? "..." : "");
    for (int t = 0; t < 2; ++t) {
      printf("  tree %d across nodes (enters each node at local rank %d), root node %d:\n", t,
             v.treeHead(t), binaryTreeRoot(v.nodes, t));
      for (int n = 0; n < v.nodes && n < 16; ++n) {
        const TreeLinks l = v.nodeTree(t, n);
        printf("    node %d: parent %d, children %d %d\n", n, l.parent, l.child[0], l.child[1]);
      }
      if (v.nodes > 16) printf("    ... (%d nodes)\n", v.nodes);
    }
  }
  if (v.nranks() > (1 << 20)) {
    printf("  groups: not listed for more than 2^20 ranks\n");
    return;
  }
  const char* names[] = {"host", "numa", "nvlink island"};
  const Group gs[] = {Group::Host, Group::Numa, Group::NvLinkIsland};
  for (int g = 0; g < 3; ++g) {
    const auto groups = v.groups(gs[g]);
    printf("  %s groups (%zu):", names[g], groups.size());
    for (size_t i = 0; i < groups.size() && i < 8; ++i) {
      printf(" {");
      for (size_t k = 0; k < groups[i].size(); ++k) printf("%s%d", k ? "," : "", groups[i][k]);
      printf("}");
    }
    printf("%s\n", groups.size() > 8 ? " ..." : "");
  }
}

// A string safe inside a Graphviz double-quoted label.
std::string dotQuote(const std::string& in) {
  std::string out;
  for (char c : in) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  }
  return out;
}

void printDot(const System& s) {
  printf("graph weft_topology {\n  node [shape=box, fontname=\"Helvetica\"];\n");
  printf("  label=\"%s\";\n", dotQuote(s.name).c_str());
  for (const Node& n : s.nodes) {
    const char* color = n.type == NodeType::Gpu                               ? "palegreen"
                        : n.type == NodeType::Nic                             ? "lightblue"
                        : n.type == NodeType::Cpu || n.type == NodeType::Numa ? "lightgray"
                                                                              : "white";
    printf("  \"%s\" [label=\"%s\\n%s\", style=filled, fillcolor=%s];\n", dotQuote(n.id).c_str(),
           dotQuote(n.id).c_str(), dotQuote(n.name).c_str(), color);
  }
  for (const Link& l : s.links) {
    const char* color = l.type == LinkType::NvLink ? "darkgreen"
                        : l.type == LinkType::Smp  ? "red"
                                                   : "black";
    printf("  \"%s\" -- \"%s\" [label=\"%s\", color=%s];\n", dotQuote(s.nodes[l.a].id).c_str(),
           dotQuote(s.nodes[l.b].id).c_str(), linkText(l).c_str(), color);
  }
  printf("}\n");
}

void printSimulation(const View& v) {
  const CostModel m = costModelFor(v);
  std::string inter =
      v.nodes > 1 ? strFormat(", inter %.1f GB/s %.1f us", m.inter.bandwidthGBs, m.inter.latencyUs)
                  : "";
  printf(
      "simulate: allreduce, %d rank(s) = %d node(s) x %d; model: intra %.1f GB/s %.2f us%s, "
      "reduce %.0f GB/s\n",
      v.nranks(), v.nodes, v.ranksPerNode, m.intra.bandwidthGBs, m.intra.latencyUs, inter.c_str(),
      m.reduceGBs);
  std::vector<size_t> sizes = {size_t(1) << 20, size_t(64) << 20, size_t(1) << 30, size_t(8) << 30};
  const std::vector<SimRow> rows = simulateAllReduce(v, sizes);
  printf("%12s %10s %10s %12s %14s\n", "size", "algorithm", "chunk", "time (us)", "busbw (GB/s)");
  for (const SimRow& r : rows)
    printf("%12zu %10s %10zu %12.1f %14.1f\n", r.bytes, algoName(r.algo), r.chunkBytes, r.us,
           r.busGBs);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* f = getenv("WEFT_TOPO_FILE")) o.file = f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "weft-topo: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "-f" || a == "--file") {
      o.file = next();
    } else if (a == "-N" || a == "--nodes") {
      if (!parseInt(next(), 1, 65536, &o.nodes)) {
        fprintf(stderr, "weft-topo: --nodes takes 1..65536\n");
        return 2;
      }
    } else if (a == "-R" || a == "--ranks-per-node") {
      if (!parseInt(next(), 1, 1024, &o.rpn)) {
        fprintf(stderr, "weft-topo: --ranks-per-node takes 1..1024\n");
        return 2;
      }
    } else if (a == "--dot") {
      o.dot = true;
    } else if (a == "--simulate") {
      o.simulate = true;
    } else if (a == "--dump") {
      o.dump = next();
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "weft-topo: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  System sys;
  std::vector<std::string> notes;
  Status st = o.file.empty() ? detectSystem(&sys, &notes) : loadSystemFile(o.file, &sys);
  if (st.isError()) {
    fprintf(stderr, "weft-topo: %s\n", st.message().c_str());
    return 1;
  }
  if (!o.dump.empty()) {
    st = dumpSystemFile(sys, o.dump);
    if (st.isError()) {
      fprintf(stderr, "weft-topo: %s\n", st.message().c_str());
      return 1;
    }
  }
  if (o.dot) {
    printDot(sys);
    return 0;
  }
  if (o.rpn == 0) {
    o.rpn = static_cast<int>(sys.nodesOf(NodeType::Gpu).size());
    if (o.rpn == 0) o.rpn = static_cast<int>(sys.nodesOf(NodeType::Numa).size());
  }
  printf("source: %s\n",
         o.file.empty() ? "detected (hwloc, sysfs, ibverbs, NVML/CUDA)" : o.file.c_str());
  for (const std::string& n : notes) printf("  note: %s\n", n.c_str());
  printSystem(sys);
  View v;
  st = View::build(sys, o.nodes, o.rpn, &v);
  if (st.isError()) {
    fprintf(stderr, "weft-topo: %s\n", st.message().c_str());
    return 1;
  }
  printView(v);
  if (o.simulate) printSimulation(v);
  return 0;
}
