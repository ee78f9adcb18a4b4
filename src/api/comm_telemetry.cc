// The communicator's side of telemetry: what it tells src/telemetry at init
// (ranks, hosts, transports, the common clock) and per op (what it is).
#include <algorithm>
#include <cstring>

#include "api/comm.h"
#include "core/clock.h"
#include "core/log.h"
#include "kernels/cpu/reduce.h"

namespace weft {

void Comm::setUpTelemetry() {
  telemetry::Setup s;
  s.rank = rank_;
  s.nranks = nranks_;
  s.boardTag = deriveTag(boot_->commKey(), "weft board name");
  s.commId = boot_->commId();
  s.config = cfg_;
  s.repro = reproName(repro_);
  s.wire = wireName(wire_);
  // The common clock: realtime, as the lowest rank of each host reads it
  // (so ranks of one host agree exactly; hosts agree as well as NTP/PTP
  // keeps their realtime clocks).
  int leader = rank_;
  for (int r = 0; r < nranks_; ++r)
    if (peers_[r].hostHash == peers_[rank_].hostHash) leader = std::min(leader, r);
  s.clockOffsetNs = clockDelta_[leader];
  for (const PeerInfo& p : peers_) {
    s.hostnames.push_back(p.hostname);
    s.hostHashes.push_back(p.hostHash);
    s.pids.push_back(p.pid);
  }
  std::vector<int> peerTx(nranks_, 0);
  for (size_t t = 0; t < transports_.size() && t < static_cast<size_t>(telemetry::kMaxTransports);
       ++t) {
    const TransportCaps caps = transports_[t]->caps();
    s.transports.push_back(transports_[t]->name());
    s.transportGBs.push_back(caps.bandwidthGBs);
    int peers = 0;
    for (int p = 0; p < nranks_; ++p) {
      if (transportNames_[p] != transports_[t]->name()) continue;
      peerTx[p] = static_cast<int>(t);
      ++peers;
    }
    s.transportPeers.push_back(peers);
    if (caps.hostArena) shmTx_ = static_cast<int>(t);
  }
  tel_.reset(new telemetry::Telemetry(s));
  Status st = tel_->openBoard();
  if (st.isError()) WEFT_WARN(kTelemetry, "%s", st.message().c_str());
  engine_->setTelemetry(tel(), peerTx);
}

void Comm::startRecord(telemetry::OpRecord& r, const CollArgs& args, weft_datatype_t dt,
                       uint64_t seq, const char* algo, uint64_t callNs) {
  describeRecord(r, args, dt, algo);
  r.seq = seq;
  tel_->begin(r, callNs ? callNs : nowNs());
}

telemetry::OpRecord& Comm::openArenaRecord(const CollArgs& args, weft_datatype_t dt, uint64_t seq,
                                           uint64_t callNs) {
  // What the op is, kept for the next call of the same shape (a training
  // loop's, a benchmark's): then only copied.
  if (shapeDt_ != dt || shapeArgs_.type != args.type || shapeArgs_.count != args.count ||
      shapeArgs_.eltSize != args.eltSize || shapeArgs_.op != args.op ||
      shapeArgs_.root != args.root || shapeArgs_.peer != args.peer) {
    shapeRec_ = telemetry::OpRecord();
    describeRecord(shapeRec_, args, dt, "shm");
    shapeArgs_ = args;
    shapeDt_ = dt;
  }
  telemetry::OpRecord& r = tel_->openInRing(shapeRec_);
  r.seq = seq;
  tel_->begin(r, callNs ? callNs : nowNs());
  return r;
}

void Comm::copyDescription(const telemetry::OpRecord& from, telemetry::OpRecord* to) {
  to->type = from.type;
  to->dtype = from.dtype;
  to->op = from.op;
  to->root = from.root;
  to->count = from.count;
  to->bytes = from.bytes;
  to->algo = from.algo;
  to->repro = from.repro;
  to->wire = from.wire;
  to->timeWork = from.timeWork;
}

// copyDescription copies what this writes: a field added here goes there too.
void Comm::describeRecord(telemetry::OpRecord& r, const CollArgs& args, weft_datatype_t dt,
                          const char* algo) const {
  r.type = static_cast<uint8_t>(args.type);
  r.dtype = static_cast<uint8_t>(dt);
  r.op = static_cast<uint8_t>(args.op);
  r.repro = static_cast<uint8_t>(args.repro);
  // The arena reduces in shared memory: nothing travels, nothing narrows.
  r.wire = std::strcmp(algo, "shm") == 0 ? 0 : static_cast<uint8_t>(args.wire);
  const bool p2p = args.type == CollType::Send || args.type == CollType::Recv;
  r.root = p2p ? args.peer : args.root;
  r.count = args.count;
  const uint64_t blk = static_cast<uint64_t>(args.count) * args.eltSize;
  switch (args.type) {
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AllToAll:
      r.bytes = blk * static_cast<uint64_t>(nranks_);
      break;
    case CollType::Barrier:
      r.bytes = 0;
      break;
    default:
      r.bytes = blk;
      break;
  }
  r.algo = p2p ? "p2p" : algo;
  r.timeWork = r.bytes >= telemetry::kTimedWorkBytes || tel_->wantSpans();
}

void Comm::timelineSpan(const std::string& track, const std::string& name, uint64_t beginNs,
                        uint64_t endNs,
                        const std::vector<std::pair<std::string, std::string>>& args) {
  if (telemetry::Telemetry* t = tel()) t->span(track, name, beginNs, endNs, args);
}

}  // namespace weft
