// Calls on CUDA memory with a stream: where each call runs (the memory
// rules of src/cuda/mem_rules.h over what CUDA says of each buffer), and how
// a call or group of stream-ordered calls is issued: one StreamBatch
// (src/cuda/stream_batch.h) stages the data and holds the streams, and the
// comms' engines run the ops on the staging, gated on the streams' earlier
// work. Where src/cuda/device_path.h allows (device buffers, one host,
// cuda_ipc connected), the batch is direct: no staging, the ops run on the
// user's device buffers (cuda_ipc transfers, GPU kernels). The caller's
// thread never waits for the GPU.
#include <algorithm>

#include "api/api_state.h"
#include "core/log.h"
#include "cuda/pieces.h"
#include "cuda/runtime.h"
#include "cuda/stream_batch.h"

namespace weft {

Status resolveMemory(const char* name, weft_stream_t stream, bool needSend, bool needRecv,
                     PendingCall* pc, uint64_t now) {
  // No stream and no CUDA driver in the process: host memory, no CUDA call
  // at all (the host path's latency does not change, nothing initializes
  // CUDA behind a CPU-only caller's back).
  if (!stream && !cuda::driverLoaded(now)) return Status();
  const cuda::CudaState cs = cuda::cudaState();
  if (!stream && !cs.usable) return Status();
  cuda::BufferDesc bufs[2];
  int n = 0;
  if (needSend) bufs[n++] = cuda::describePointer("sendbuf", pc->send);
  if (needRecv) bufs[n++] = cuda::describePointer("recvbuf", pc->recv);
  cuda::ExecPath path = cuda::ExecPath::Host;
  WEFT_RETURN_IF_ERROR(cuda::choosePath(name, bufs, n, stream != nullptr, cs, &path));
  if (path != cuda::ExecPath::Stream) return Status();
  pc->onStream = true;
  pc->stream = stream;
  pc->readsSend = needSend;
  pc->writesRecv = needRecv;
  if (needRecv) pc->recvDevice = bufs[n - 1].devicePtr ? bufs[n - 1].devicePtr : pc->recv;
  for (int i = 0; i < n; ++i) pc->bufs[i] = bufs[i];
  pc->nbufs = n;
  return Status();
}

namespace {

// Whether a call's send range overlaps another call's receive range (a
// group): staging keeps them apart, the user's buffers would not.
bool crossOverlap(const std::vector<PendingCall>& calls) {
  for (size_t i = 0; i < calls.size(); ++i) {
    const PendingCall& s = calls[i];
    if (!s.send || !s.readsSend) continue;
    const auto sb = reinterpret_cast<uintptr_t>(s.send);
    const size_t sl = sendBytes(s.args, s.comm->nranks(), s.comm->rank());
    for (size_t j = 0; j < calls.size(); ++j) {
      const PendingCall& r = calls[j];
      if (j == i || !r.recv || !r.writesRecv) continue;
      const auto rb = reinterpret_cast<uintptr_t>(r.recv);
      const size_t rl = recvBytes(r.args, r.comm->nranks(), r.comm->rank());
      if (sl && rl && sb < rb + rl && rb < sb + sl) return true;
    }
  }
  return false;
}

// The device path for a call or group (src/cuda/device_path.h): direct only
// when every call may run on its device buffers; logged at INFO whenever a
// comm's answer changes.
bool chooseDirect(const std::vector<PendingCall>& calls) {
  const bool overlap = calls.size() > 1 && crossOverlap(calls);
  bool direct = true;
  for (const PendingCall& pc : calls) {
    cuda::DevicePathFacts f;
    std::lock_guard<Mutex> lk(pc.comm->mu);
    pc.comm->devicePathFacts(&f);
    f.bufs = pc.bufs;
    f.nbufs = pc.nbufs;
    f.selfTransfer = (pc.args.type == CollType::Send || pc.args.type == CollType::Recv) &&
                     pc.args.peer == pc.comm->rank();
    f.crossOverlap = overlap;
    f.repro = pc.args.repro != Repro::Off;
    std::string why;
    const bool d = cuda::chooseDevicePath(f, &why) == cuda::DevicePath::Direct;
    if (why != pc.comm->lastDevicePath) {
      WEFT_INFO(kColl, "rank %d: stream-ordered %s: %s", pc.comm->rank(), collName(pc.args.type),
                why.c_str());
      pc.comm->lastDevicePath = why;
    }
    direct = direct && d;
  }
  return direct;
}

}  // namespace

namespace {

// One unit of stream-ordered work: a batch (a whole group, or one piece of a
// cut call) with its staging, its ops' tracker and, for pieces, the overlap
// count shared by the pieces of the call.
struct Unit {
  std::vector<PendingCall> calls;
  std::shared_ptr<cuda::StreamBatch> batch;
  std::vector<void*> sends, recvs;
  std::shared_ptr<OpTracker> tracker;
  bool direct = false;  // on the user's device buffers (no staging)
};

// A single allreduce, broadcast or reduce, cut into pieces (src/cuda/pieces.h).
std::vector<Unit> cut(const PendingCall& pc) {
  std::vector<Unit> units;
  const CollType t = pc.args.type;
  const bool splits = t == CollType::AllReduce || t == CollType::Broadcast || t == CollType::Reduce;
  const std::vector<cuda::Piece> pieces =
      splits ? cuda::cutPieces(pc.args.count, pc.args.eltSize)
             : std::vector<cuda::Piece>{cuda::Piece{0, pc.args.count}};
  for (const cuda::Piece& p : pieces) {
    PendingCall q = pc;
    const size_t off = p.first * pc.args.eltSize;
    q.args.count = p.count;
    if (q.send) q.send = static_cast<const uint8_t*>(q.send) + off;
    if (q.recv) q.recv = static_cast<uint8_t*>(q.recv) + off;
    if (q.recvDevice) q.recvDevice = static_cast<uint8_t*>(q.recvDevice) + off;
    units.push_back(Unit{{q}, nullptr, {}, {}, nullptr, false});
  }
  return units;
}

Status stageUnit(Unit* u, double timeoutS) {
  u->batch = std::make_shared<cuda::StreamBatch>(timeoutS, u->direct);
  for (const PendingCall& pc : u->calls) {
    const int n = pc.comm->nranks(), r = pc.comm->rank();
    cuda::StreamCall sc;
    sc.stream = pc.stream;
    sc.send = pc.send;
    sc.sendLen = pc.send ? sendBytes(pc.args, n, r) : 0;
    sc.readSend = pc.readsSend;
    sc.recv = pc.recv;
    sc.recvDevice = pc.recvDevice;
    sc.recvLen = pc.recv ? recvBytes(pc.args, n, r) : 0;
    sc.writeRecv = pc.writesRecv;
    u->batch->add(sc);
  }
  return u->batch->stage(&u->sends, &u->recvs);
}

}  // namespace

Status issueStreamCalls(std::vector<PendingCall>& calls, std::shared_ptr<OpTracker>* trackerOut,
                        std::vector<std::shared_ptr<Comm>>* commsOut) {
  std::vector<std::shared_ptr<Comm>> comms;
  for (const PendingCall& pc : calls)
    if (std::find(comms.begin(), comms.end(), pc.comm) == comms.end()) comms.push_back(pc.comm);
  // A single call outside a group may be cut into pieces; a group (or a
  // call whose request the caller holds) stays one unit with one tracker.
  // Direct calls are one unit: pieces exist to overlap the staging copies.
  const bool direct = chooseDirect(calls);
  std::vector<Unit> units;
  if (calls.size() == 1 && !trackerOut && !direct)
    units = cut(calls[0]);
  else
    units.push_back(Unit{calls, nullptr, {}, {}, nullptr, direct});
  const double timeoutS = comms[0]->config().timeoutS;

  // 1. Every unit's copies in and events, before any wait: the copy engine
  // runs ahead of the host. A failure here leaves the streams waiting for
  // nothing (only copies into staging were queued).
  for (Unit& u : units) WEFT_RETURN_IF_ERROR(stageUnit(&u, timeoutS));

  // 2. The ops, gated on their unit's events; held (pending + 1) until every
  // op is enqueued, so that onDone fires once, at the end.
  auto overlap = std::make_shared<cuda::PieceOverlap>();
  const bool pieces = units.size() > 1;
  for (Unit& u : units) {
    u.tracker = std::make_shared<OpTracker>();
    u.tracker->direct = u.direct;
    std::shared_ptr<cuda::StreamBatch> batch = u.batch;
    // A group's gate may be asked under several comms' locks at once.
    auto started = std::make_shared<std::atomic<bool>>(false);
    u.tracker->gate = [batch, overlap, started, pieces](bool* open) {
      Status st = batch->gate(open);
      if (*open && pieces && !started->exchange(true)) overlap->started();
      return st;
    };
    u.tracker->onDone = [batch, overlap, started, pieces](const Status& st) {
      if (pieces && started->load()) overlap->finished();
      batch->complete(st);
    };
    u.tracker->pending++;
  }
  Status issued;
  for (Unit& u : units) {
    for (size_t i = 0; i < u.calls.size() && issued.isOk(); ++i) {
      PendingCall& pc = u.calls[i];
      std::lock_guard<Mutex> lk(pc.comm->mu);
      issued = pc.comm->enqueue(pc.args, pc.dtype, u.sends[i], u.recvs[i], u.tracker);
    }
  }
  // 3. The flag waits and copies out. The streams wait for every unit from
  // here on, even when issuing failed (the failure then releases them, and
  // no user buffer is written).
  for (Unit& u : units) {
    Status rel = u.batch->release();
    if (issued.isOk() && rel.isError()) issued = rel;
  }
  for (Unit& u : units) {
    if (issued.isError()) u.batch->fail(issued);
    u.tracker->finishOne(Status());
  }
  if (pieces)
    WEFT_TRACE(kColl, "stream-ordered %s of %zu elements cut into %zu pieces",
               collName(calls[0].args.type), calls[0].args.count, units.size());
  for (auto& c : comms) c->kickProgressThread();
  if (trackerOut) *trackerOut = units[0].tracker;
  if (commsOut) *commsOut = comms;
  return issued;
}

}  // namespace weft
