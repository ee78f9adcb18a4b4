// Calls on CUDA memory with a stream: where each call runs (the memory
// rules of src/cuda/mem_rules.h over what CUDA says of each buffer), and how
// a call or group of stream-ordered calls is issued: one StreamBatch
// (src/cuda/stream_batch.h) stages the data and holds the streams, and the
// comms' engines run the ops on the staging, gated on the streams' earlier
// work. The caller's thread never waits for the GPU.
#include <algorithm>

#include "api/api_state.h"
#include "core/log.h"
#include "cuda/runtime.h"
#include "cuda/stream_batch.h"

namespace weft {

Status resolveMemory(const char* name, weft_stream_t stream, bool needSend, bool needRecv,
                     PendingCall* pc) {
  // Host memory without a stream on a process where CUDA has no device: no
  // CUDA call at all (the host path's latency does not change).
  static const bool usable = cuda::cudaState().usable;
  if (!usable && !stream) return Status();
  cuda::BufferDesc bufs[2];
  int n = 0;
  if (needSend) bufs[n++] = cuda::describePointer("sendbuf", pc->send);
  if (needRecv) bufs[n++] = cuda::describePointer("recvbuf", pc->recv);
  cuda::ExecPath path = cuda::ExecPath::Host;
  WEFT_RETURN_IF_ERROR(cuda::choosePath(name, bufs, n, stream != nullptr, cuda::cudaState(), &path));
  if (path != cuda::ExecPath::Stream) return Status();
  pc->onStream = true;
  pc->stream = stream;
  pc->readsSend = needSend;
  pc->writesRecv = needRecv;
  if (needRecv) pc->recvDevice = bufs[n - 1].devicePtr ? bufs[n - 1].devicePtr : pc->recv;
  return Status();
}

Status issueStreamCalls(std::vector<PendingCall>& calls, std::shared_ptr<OpTracker>* trackerOut,
                        std::vector<std::shared_ptr<Comm>>* commsOut) {
  std::vector<std::shared_ptr<Comm>> comms;
  for (const PendingCall& pc : calls)
    if (std::find(comms.begin(), comms.end(), pc.comm) == comms.end()) comms.push_back(pc.comm);
  auto batch = std::make_shared<cuda::StreamBatch>(comms[0]->config().timeoutS);
  for (const PendingCall& pc : calls) {
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
    batch->add(sc);
  }
  std::vector<void*> sends, recvs;
  // Nothing is enqueued on an engine until the staging is in place; a
  // failure here leaves every stream as it was, but for copies into staging.
  WEFT_RETURN_IF_ERROR(batch->stage(&sends, &recvs));

  auto tracker = std::make_shared<OpTracker>();
  tracker->gate = [batch](bool* open) { return batch->gate(open); };
  tracker->onDone = [batch](const Status& st) { batch->complete(st); };
  tracker->pending++;  // held until every op is enqueued (onDone fires once, at the end)
  Status issued;
  for (size_t i = 0; i < calls.size() && issued.isOk(); ++i) {
    PendingCall& pc = calls[i];
    std::lock_guard<std::mutex> lk(pc.comm->mu);
    issued = pc.comm->enqueue(pc.args, pc.dtype, sends[i], recvs[i], tracker);
  }
  // The streams wait for the batch from here on, even when issuing failed
  // (the failure then releases them, and no user buffer is written).
  Status rel = batch->release();
  if (issued.isOk() && rel.isError()) issued = rel;
  if (issued.isError()) batch->fail(issued);
  tracker->finishOne(Status());
  for (auto& c : comms) c->kickProgressThread();
  if (trackerOut) *trackerOut = tracker;
  if (commsOut) *commsOut = comms;
  return issued;
}

}  // namespace weft
