// Hierarchical allreduce, for ranks spread over several hosts with more
// than one rank per host. Networks between hosts are slower than memory
// inside one, so each byte should cross a host boundary as few times as
// possible, and every rank of a host should use its share of the network:
//
//   1. intra-host reduce-scatter: the L ranks of a host split the vector
//      into L segments; local rank l receives segment l from its host mates
//      and reduces it (direct exchange: L is small);
//   2. inter-host allreduce per rail: the ranks with local index l on each
//      of the H hosts (rail l) allreduce segment l with a ring among
//      themselves; the L rails run side by side, each on 1/L of the data;
//   3. intra-host allgather: local rank l sends its reduced segment to its
//      host mates and receives theirs.
//
// Cost (S bytes, L ranks per host, H hosts): on the host 2(L-1)/L * S per
// rank; across hosts, per rank, 2(H-1)/H * S/L: the ring's traffic, divided
// among the rails. Steps: 2 + 2(H-1).
//
// The rails need the same number of ranks on every host (BuildParams::hosts
// gives each rank's host); any other layout, or none, runs the same code as
// one rank per host: a flat ring over all ranks.
#include <algorithm>
#include <vector>

#include "algo/step_util.h"

namespace weft {
namespace {

constexpr uint32_t kNone = Schedule::kNoStep;

struct Layout {
  int hosts = 1, local = 1;  // H, L
  int host = 0, lrank = 0;   // this rank's host and local index
  std::vector<std::vector<int>> members;  // ranks of each host, ascending
};

// The rails, or the flat fallback (L = 1).
Layout layoutOf(const BuildParams& p) {
  Layout L;
  std::vector<int> ids;
  bool ok = static_cast<int>(p.hosts.size()) == p.nranks;
  if (ok) {
    for (int r = 0; r < p.nranks; ++r) {
      auto it = std::find(ids.begin(), ids.end(), p.hosts[r]);
      int h = static_cast<int>(it - ids.begin());
      if (it == ids.end()) {
        ids.push_back(p.hosts[r]);
        L.members.emplace_back();
      }
      L.members[h].push_back(r);
    }
    for (const auto& m : L.members) ok = ok && m.size() == L.members[0].size();
  }
  if (!ok || L.members.size() < 2 || L.members[0].size() < 2) {
    L.members.assign(p.nranks, {});
    for (int r = 0; r < p.nranks; ++r) L.members[r] = {r};
  }
  L.hosts = static_cast<int>(L.members.size());
  L.local = static_cast<int>(L.members[0].size());
  for (int h = 0; h < L.hosts; ++h)
    for (int i = 0; i < L.local; ++i)
      if (L.members[h][i] == p.rank) {
        L.host = h;
        L.lrank = i;
      }
  return L;
}

BufRef shifted(BufRef b, BufId id, size_t off) { return BufRef{id, b.off + off}; }

// Appends `sub` (built for the rail: rank = host index, peers = host
// indexes) with peers mapped to real ranks and buffers into segment `seg`
// of the receive buffer, its scratch after `scratchBase`. Steps without
// dependencies wait for `entry`. Returns the indexes of the appended steps.
std::vector<uint32_t> appendRail(const Schedule& sub, const Layout& L, size_t segOff,
                                 size_t scratchBase, uint32_t entry, Schedule* s) {
  std::vector<uint32_t> idx(sub.steps.size());
  auto map = [&](BufRef b) {
    return b.buf == BufId::Scratch ? shifted(b, BufId::Scratch, scratchBase)
                                   : shifted(b, BufId::Recv, segOff);
  };
  for (size_t i = 0; i < sub.steps.size(); ++i) {
    Step st = sub.steps[i];
    if (st.peer >= 0) st.peer = L.members[st.peer][L.lrank];
    st.a = map(st.a);
    st.b = map(st.b);
    st.dst = map(st.dst);
    idx[i] = s->add(st, {sub.steps[i].depCount == 0 ? entry : kNone});
    for (uint32_t d = 0; d < sub.steps[i].depCount; ++d)
      s->addDep(idx[i], idx[sub.deps[sub.steps[i].depBegin + d]]);
  }
  return idx;
}

// A zero-byte local step that completes when all of `steps` have.
uint32_t join(const std::vector<uint32_t>& steps, Schedule* s) {
  uint32_t j = s->add(copyStep(recvAt(0), recvAt(0), 0));
  for (uint32_t d : steps) s->addDep(j, d);
  return j;
}

}  // namespace

void buildHierarchicalAllReduce(const CollArgs& a, const BuildParams& p, Schedule* s) {
  s->algorithm = "hier";
  const size_t elt = a.eltSize, bytes = a.count * elt;
  const Layout L = layoutOf(p);
  if (bytes == 0) return;
  const int l = L.lrank;
  const auto segOff = [&](int i) { return partOffset(a.count, L.local, i) * elt; };
  const auto segLen = [&](int i) { return partCount(a.count, L.local, i) * elt; };
  const Chunker mine(segLen(l), p.chunkBytes, elt);
  const int slots = std::max(1, p.slots);
  const size_t slotBytes = mine.chunk;
  std::vector<uint32_t> phaseA;

  // 1. Reduce-scatter inside the host: segment j of the send buffer goes to
  // local rank j; segment l accumulates here, host mates in index order.
  if (L.local == 1) {
    if (!a.inPlace) phaseA.push_back(s->add(copyStep(sendAt(0), recvAt(0), bytes)));
  } else {
    s->scratchBytes = std::max(s->scratchBytes, slotBytes * slots * (L.local - 1));
    for (int k = 1; k < L.local; ++k) {
      const int j = (l + k) % L.local, to = L.members[L.host][j];
      const Chunker ch(segLen(j), p.chunkBytes, elt);
      for (size_t c = 0; c < ch.count(); ++c)
        phaseA.push_back(s->add(sendStep(to, sendAt(segOff(j) + ch.off(c)), ch.len(c))));
    }
    std::vector<uint32_t> acc(mine.count(), kNone);       // last reduction into each chunk
    std::vector<uint32_t> slotUser(slots * (L.local - 1), kNone);
    for (int k = 1; k < L.local; ++k) {
      const int j = (l - k + L.local) % L.local, from = L.members[L.host][j];
      for (size_t c = 0; c < mine.count(); ++c) {
        const size_t off = segOff(l) + mine.off(c);
        const int slot = (k - 1) * slots + static_cast<int>(c % slots);
        BufRef own = acc[c] == kNone ? sendAt(off) : recvAt(off);
        uint32_t st = s->add(recvReduceStep(from, own, scratchAt(slot * slotBytes), recvAt(off),
                                            mine.len(c)),
                             {acc[c], slotUser[slot]});
        acc[c] = slotUser[slot] = st;
      }
    }
    phaseA.insert(phaseA.end(), acc.begin(), acc.end());
  }
  const uint32_t afterA = join(phaseA, s);

  // 2. Allreduce of segment l among the rail (one rank per host), by ring.
  std::vector<uint32_t> phaseB;
  if (L.hosts > 1 && segLen(l) > 0) {
    CollArgs ra = a;
    ra.count = partCount(a.count, L.local, l);
    ra.inPlace = true;
    if (ra.op == WEFT_AVG) ra.op = WEFT_SUM;  // divided by all ranks below
    BuildParams rp = p;
    rp.rank = L.host;
    rp.nranks = L.hosts;
    rp.hosts.clear();
    Schedule sub;
    buildRingAllReduce(ra, rp, &sub);
    const size_t base = s->scratchBytes;
    s->scratchBytes += sub.scratchBytes;
    phaseB = appendRail(sub, L, segOff(l), base, afterA, s);
  }
  uint32_t afterB = phaseB.empty() ? afterA : join(phaseB, s);
  if (a.op == WEFT_AVG && segLen(l) > 0) afterB = s->add(divideStep(recvAt(segOff(l)), segLen(l)), {afterB});

  // 3. Allgather inside the host: send segment l, receive the others. The
  // receives overwrite segments the first phase read: they wait for it.
  for (int k = 1; k < L.local; ++k) {
    const int j = (l + k) % L.local, to = L.members[L.host][j];
    const int i = (l - k + L.local) % L.local, from = L.members[L.host][i];
    const Chunker out(segLen(l), p.chunkBytes, elt), in(segLen(i), p.chunkBytes, elt);
    for (size_t c = 0; c < out.count(); ++c)
      s->add(sendStep(to, recvAt(segOff(l) + out.off(c)), out.len(c)), {afterB});
    for (size_t c = 0; c < in.count(); ++c)
      s->add(recvStep(from, recvAt(segOff(i) + in.off(c)), in.len(c)), {afterA});
  }
}

}  // namespace weft
