#include "topo/link_table.h"

namespace weft {
namespace topo {

double pcieLaneGBs(int gen) {
  static const double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877};
  return gen >= 1 && gen <= 6 ? kLane[gen] : 0;
}

double nvlinkGBs(int gen) {
  static const double kLink[] = {0, 20, 25, 25, 25, 50};
  return gen >= 1 && gen <= 5 ? kLink[gen] : 0;
}

double smpLinkGBs(const std::string& tech) {
  if (tech == "qpi") return 19.2;
  if (tech == "upi") return 20.8;
  if (tech == "upi16") return 32;
  if (tech == "xgmi") return 36;
  return 0;
}

double linkLatencyUs(LinkType t) {
  switch (t) {
    case LinkType::Pcie:
      return 0.3;
    case LinkType::NvLink:
      return 0.5;
    case LinkType::Smp:
      return 0.2;
    case LinkType::Mem:
      return 0.1;
  }
  return 1;
}

double nicLatencyUs(const std::string& nicType) {
  if (nicType == "ib") return 2;
  if (nicType == "roce") return 3;
  return 20;
}

bool fillLinkDefaults(Link* l) {
  if (l->latUs <= 0) l->latUs = linkLatencyUs(l->type);
  if (l->bwGBs > 0) return true;
  const int count = l->count > 0 ? l->count : 1;
  switch (l->type) {
    case LinkType::Pcie:
      l->bwGBs = pcieLaneGBs(l->gen) * l->width;
      break;
    case LinkType::NvLink:
      l->bwGBs = nvlinkGBs(l->gen) * count;
      break;
    case LinkType::Smp:
      l->bwGBs = smpLinkGBs(l->tech) * count;
      break;
    case LinkType::Mem:
      l->bwGBs = kMemLinkGBs;
      break;
  }
  return l->bwGBs > 0;
}

}  // namespace topo
}  // namespace weft
