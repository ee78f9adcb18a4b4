#include "algo/arena_sim.h"

#include <cstring>
#include <random>

#include "kernels/cpu/reduce.h"

namespace weft::sim {
namespace {

// Arena memory: bytes, and the round that last wrote each (0: none).
struct Region {
  std::vector<uint8_t> data;
  std::vector<uint64_t> tag;
  explicit Region(size_t n = 0) : data(n, 0), tag(n, 0) {}
};

struct RankMem {
  Region stage[2], result[2], inl[2];
  std::vector<Region> ring;
  uint64_t seq[2] = {0, 0};  // the two flag lines
};

// Where a location resolved to.
struct Ptr {
  uint8_t* p = nullptr;
  uint64_t* tag = nullptr;  // arena memory only
  size_t avail = 0;         // bytes from p to the end of its buffer
  int owner = -1;           // arena memory and Peer: whose
  const char* what = "";
};

struct RankRun {
  size_t op = 0, round = 0;
  int stage = 0;
  size_t lo = 0, len = 0;
};

class Machine {
 public:
  Machine(const std::vector<CollArgs>& ops, weft_datatype_t dt, const ArenaShape& shape,
          std::vector<std::vector<RankBuffers>>* bufs)
      : ops_(ops), dt_(dt), n_(shape.nranks), shape_(shape), bufs_(bufs), mem_(n_), run_(n_) {
    for (RankMem& m : mem_) {
      for (int i = 0; i < 2; ++i) {
        m.stage[i] = Region(shape.chunk);
        m.result[i] = Region(shape.chunk);
        m.inl[i] = Region(shape.inlineBytes);
      }
      m.ring.assign(kArenaRingSlots, Region(shape.ringPayload));
    }
  }

  bool plan(const PlanTamper& tamper, std::string* err) {
    plans_.resize(ops_.size());
    uint64_t next = 1;
    for (size_t k = 0; k < ops_.size(); ++k) {
      plans_[k].resize(n_);
      for (int r = 0; r < n_; ++r) {
        ArenaShape s = shape_;
        s.rank = r;
        Status st = buildArenaPlan(ops_[k], s, &plans_[k][r]);
        if (st.isError()) return fail(err, "op %zu rank %d: %s", k, r, st.message().c_str());
        if (tamper) tamper(k, r, &plans_[k][r]);
        const ArenaPlan& p = plans_[k][r];
        const ArenaPlan& p0 = plans_[k][0];
        if (p.rounds != p0.rounds || p.step != p0.step || p.mode != p0.mode ||
            p.publishB != p0.publishB)
          return fail(err, "op %zu: ranks 0 and %d disagree on the plan's shape", k, r);
        if (p0.runC && !p0.publishB) return fail(err, "op %zu: a C phase with no B flag", k);
      }
      bases_.push_back(next);
      next += plans_[k][0].rounds;
    }
    for (int r = 0; r < n_; ++r) enter(r);
    return true;
  }

  bool done(int r) const { return run_[r].op >= ops_.size(); }

  // Whether rank r's next phase may run now.
  bool ready(int r) const {
    const RankRun& s = run_[r];
    const ArenaPlan& p = plans_[s.op][r];
    const uint64_t g = bases_[s.op] + s.round;
    if (s.stage == 0) {
      const uint64_t gate = arenaGateOfA(p.mode, g);
      return !gate || reached(gate, -1);
    }
    if (s.stage == 1) return !p.waitB || reached(arenaFlagA(g), p.waitOnly);
    return reached(arenaFlagB(g), -1);
  }

  // Runs rank r's next phase.
  bool step(int r, std::string* err) {
    RankRun& s = run_[r];
    const ArenaPlan& p = plans_[s.op][r];
    const uint64_t g = bases_[s.op] + s.round;
    const ArenaRound& rd = p.round(s.round);
    if (s.stage == 0) {
      if (!phase(r, rd.a, g, err)) return false;
      if (!publish(r, arenaFlagA(g), err)) return false;
      s.stage = 1;
      return true;
    }
    if (s.stage == 1) {
      if (!phase(r, rd.b, g, err)) return false;
      if (p.publishB && !publish(r, arenaFlagB(g), err)) return false;
      if (p.runC) {
        s.stage = 2;
        return true;
      }
    } else if (!phase(r, rd.c, g, err)) {
      return false;
    }
    s.stage = 0;
    s.lo += p.step;
    if (++s.round >= p.rounds) {
      ++s.op;
      enter(r);
    } else {
      s.len = std::min(p.step, p.total - s.lo);
    }
    return true;
  }

  std::string state() const {
    std::string s;
    for (int r = 0; r < n_; ++r)
      s += strFormat(" rank %d: op %zu round %zu stage %d flags %llu/%llu;", r, run_[r].op,
                     run_[r].round, run_[r].stage, (unsigned long long)mem_[r].seq[0],
                     (unsigned long long)mem_[r].seq[1]);
    return s;
  }

 private:
  template <typename... A>
  static bool fail(std::string* err, const char* fmt, A... a) {
    *err = strFormat(fmt, a...);
    return false;
  }

  // Starts rank r's next op (skipping ops of no rounds).
  void enter(int r) {
    RankRun& s = run_[r];
    while (s.op < ops_.size() && plans_[s.op][r].rounds == 0) ++s.op;
    s.round = 0;
    s.stage = 0;
    s.lo = 0;
    if (s.op < ops_.size()) {
      const ArenaPlan& p = plans_[s.op][r];
      s.len = std::min(p.step, p.total);
    }
  }

  static int lineOf(uint64_t v) { return static_cast<int>(((v - 1) >> 1) & 1); }
  bool reached(uint64_t v, int only) const {
    for (int q = 0; q < n_; ++q)
      if ((only < 0 || q == only) && mem_[q].seq[lineOf(v)] < v) return false;
    return true;
  }
  bool publish(int r, uint64_t v, std::string* err) {
    uint64_t& line = mem_[r].seq[lineOf(v)];
    if (line >= v)
      return fail(err, "rank %d publishes %llu over %llu", r, (unsigned long long)v,
                  (unsigned long long)line);
    line = v;
    return true;
  }

  // The user buffers of op k on rank q, bound as the API binds them.
  void userBuffers(size_t k, int q, uint8_t** send, uint8_t** recv, uint8_t** lo, uint8_t** hi) {
    RankBuffers& b = (*bufs_)[k][q];
    const CollArgs& a = ops_[k];
    const size_t blk = a.count * a.eltSize;
    if (!a.inPlace) {
      *send = b.send.data();
      *recv = b.recv.data();
      return;
    }
    uint8_t* base = b.recv.data();
    *lo = base;
    *hi = base + b.recv.size();
    *send = *recv = base;
    if (a.type == CollType::AllGather) *send = base + static_cast<size_t>(q) * blk;
    if (a.type == CollType::ReduceScatter) *recv = base + static_cast<size_t>(q) * blk;
  }

  Ptr user(size_t k, int q, bool isSend, size_t off) {
    RankBuffers& b = (*bufs_)[k][q];
    uint8_t *send, *recv, *lo = nullptr, *hi = nullptr;
    userBuffers(k, q, &send, &recv, &lo, &hi);
    Ptr p;
    p.p = (isSend ? send : recv) + off;
    if (!lo) {
      std::vector<uint8_t>& v = isSend ? b.send : b.recv;
      lo = v.data();
      hi = v.data() + v.size();
    }
    p.avail = p.p >= lo && p.p <= hi ? static_cast<size_t>(hi - p.p) : 0;
    p.what = isSend ? "send" : "recv";
    return p;
  }

  Ptr resolve(int r, const ArenaLoc& l, uint64_t g) {
    const RankRun& s = run_[r];
    const int par = static_cast<int>(g & 1);
    Region* reg = nullptr;
    Ptr p;
    switch (l.space) {
      case ArenaSpace::Send:
        return user(s.op, r, true, s.lo + l.off);
      case ArenaSpace::Recv:
        return user(s.op, r, false, s.lo + l.off);
      case ArenaSpace::Peer:
        p = user(s.op, l.rank, true, s.lo + l.off);
        p.owner = l.rank;
        p.what = "a peer's send buffer";
        return p;
      case ArenaSpace::Stage:
        reg = &mem_[l.rank].stage[par];
        p.what = "staging";
        break;
      case ArenaSpace::Result:
        reg = &mem_[l.rank].result[par];
        p.what = "result";
        break;
      case ArenaSpace::Inline:
        reg = &mem_[l.rank].inl[par];
        p.what = "inline";
        break;
      case ArenaSpace::Ring:
        reg = &mem_[l.rank].ring[g % kArenaRingSlots];
        p.what = "ring slot";
        break;
    }
    p.owner = l.rank;
    if (l.off > reg->data.size()) return p;
    p.p = reg->data.data() + l.off;
    p.tag = reg->tag.data() + l.off;
    p.avail = reg->data.size() - l.off;
    return p;
  }

  bool readable(int r, const Ptr& p, size_t bytes, uint64_t g, size_t k, std::string* err) {
    if (!p.p || bytes > p.avail)
      return fail(err, "op %zu round %llu: rank %d reads %zu bytes past rank %d's %s", k,
                  (unsigned long long)g, r, bytes, p.owner, p.what);
    if (p.owner >= 0 && !p.tag && run_[p.owner].op != k)
      return fail(err, "op %zu: rank %d reads rank %d's send buffer after rank %d left the op", k,
                  r, p.owner, p.owner);
    if (p.tag)
      for (size_t i = 0; i < bytes; ++i)
        if (p.tag[i] != g)
          return fail(err,
                      "op %zu round %llu: rank %d reads byte %zu of rank %d's %s written in round "
                      "%llu",
                      k, (unsigned long long)g, r, i, p.owner, p.what,
                      (unsigned long long)p.tag[i]);
    return true;
  }

  bool writable(int r, const Ptr& p, size_t bytes, uint64_t g, size_t k, std::string* err) {
    if (!p.p || bytes > p.avail)
      return fail(err, "op %zu round %llu: rank %d writes %zu bytes past %s", k,
                  (unsigned long long)g, r, bytes, p.what);
    if (p.tag && p.owner != r)
      return fail(err, "op %zu: rank %d writes rank %d's %s", k, r, p.owner, p.what);
    if (p.tag) std::fill(p.tag, p.tag + bytes, g);
    return true;
  }

  bool phase(int r, const ArenaPhase& ph, uint64_t g, std::string* err) {
    const size_t k = run_[r].op;
    const ArenaPlan& plan = plans_[k][r];
    const CollArgs& a = ops_[k];
    for (const ArenaAct* x = plan.begin(ph); x != plan.end(ph); ++x) {
      Ptr dst = resolve(r, x->dst, g);
      switch (x->kind) {
        case ArenaActKind::Copy:
        case ArenaActKind::Read: {
          if ((x->kind == ArenaActKind::Read) != (x->src.space == ArenaSpace::Peer))
            return fail(err, "op %zu: rank %d: a read is from a peer's buffer, a copy is not", k,
                        r);
          Ptr src = resolve(r, x->src, g);
          if (!readable(r, src, x->bytes, g, k, err)) return false;
          if (src.p == dst.p) {
            if (!writable(r, dst, x->bytes, g, k, err)) return false;
            break;
          }
          std::vector<uint8_t> tmp(src.p, src.p + x->bytes);
          if (!writable(r, dst, x->bytes, g, k, err)) return false;
          memcpy(dst.p, tmp.data(), x->bytes);
          break;
        }
        case ArenaActKind::Reduce: {
          std::vector<const void*> srcs;
          for (uint32_t i = 0; i < x->srcCount; ++i) {
            Ptr s = resolve(r, plan.srcs[x->srcBegin + i], g);
            if (!readable(r, s, x->bytes, g, k, err)) return false;
            // The kernels allow dst to be srcs[0] only.
            if (i > 0 && s.p < dst.p + x->bytes && dst.p < s.p + x->bytes)
              return fail(err, "op %zu: rank %d reduces over its input %u", k, r, i);
            srcs.push_back(s.p);
          }
          if (!writable(r, dst, x->bytes, g, k, err)) return false;
          reduceHostN(dst.p, srcs.data(), static_cast<int>(srcs.size()), x->bytes / a.eltSize, dt_,
                      a.op);
          break;
        }
        case ArenaActKind::Divide:
          if (!readable(r, dst, x->bytes, g, k, err) || !writable(r, dst, x->bytes, g, k, err))
            return false;
          divideByCount(dst.p, x->bytes / a.eltSize, dt_, static_cast<uint64_t>(n_));
          break;
      }
    }
    return true;
  }

  const std::vector<CollArgs>& ops_;
  weft_datatype_t dt_;
  int n_;
  ArenaShape shape_;
  std::vector<std::vector<RankBuffers>>* bufs_;
  std::vector<RankMem> mem_;
  std::vector<RankRun> run_;
  std::vector<std::vector<ArenaPlan>> plans_;
  std::vector<uint64_t> bases_;
};

}  // namespace

ArenaSimResult runArena(const std::vector<CollArgs>& ops, weft_datatype_t dt,
                        const ArenaShape& shape, std::vector<std::vector<RankBuffers>>* bufs,
                        uint64_t seed, int holdRank, const PlanTamper& tamper) {
  ArenaSimResult res;
  Machine m(ops, dt, shape, bufs);
  if (!m.plan(tamper, &res.error)) {
    res.ok = false;
    return res;
  }
  std::mt19937_64 rng(seed);
  std::vector<int> ready;
  for (;;) {
    ready.clear();
    bool all = true;
    for (int r = 0; r < shape.nranks; ++r) {
      if (m.done(r)) continue;
      all = false;
      if (r != holdRank && m.ready(r)) ready.push_back(r);
    }
    if (all) return res;
    if (ready.empty()) {
      res.ok = false;
      res.error = "deadlock:" + m.state();
      return res;
    }
    const int r = ready[rng() % ready.size()];
    if (!m.step(r, &res.error)) {
      res.ok = false;
      return res;
    }
    ++res.phases;
  }
}

}  // namespace weft::sim
