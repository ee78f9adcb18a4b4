// The C API for collectives and point-to-point: argument checks (a clear
// error and no buffer written on bad input), then one call of a group.
#include "api/api_state.h"
#include "api/call_guard.h"
#include "core/clock.h"
#include "cuda/runtime.h"
#include "kernels/cpu/reduce.h"

using namespace weft;

namespace {

// The datatype and op travel as the ints the caller passed: a C caller may
// pass any int there, and in C++ reading a value outside an enum's range
// from memory is undefined (UBSan's enum check caught the tests' bad
// arguments). They become enums once check() has found them in range.
struct Call {
  Call(CollType t, const void* s, void* r, size_t n, weft_datatype_t d, weft_op_t o, int rt)
      : type(t),
        send(s),
        recv(r),
        count(n),
        dtype(static_cast<int>(d)),
        op(static_cast<int>(o)),
        root(rt) {}
  CollType type;
  const void* send;
  void* recv;
  size_t count;
  int dtype;
  int op;
  int root;  // or peer
  weft_datatype_t dt() const { return static_cast<weft_datatype_t>(dtype); }
};

bool isReduction(CollType t) {
  return t == CollType::AllReduce || t == CollType::Reduce || t == CollType::ReduceScatter;
}

// The call's arguments, checked; *needSend / *needRecv: whether this rank
// reads sendbuf / writes recvbuf.
Status check(const Comm* c, const Call& k, CollArgs* out, bool* needSendOut, bool* needRecvOut) {
  const char* name = collName(k.type);
  const int n = c->nranks();
  if (k.dtype < 0 || k.dtype >= WEFT_NUM_DATATYPES)
    return invalidArgument(strFormat("%s: datatype %d is not a weft_datatype_t", name, k.dtype));
  const bool reduces = isReduction(k.type);
  // An op of weft_op_create_wire: its base op, and the format asked for
  // this call instead of the comm's.
  int op = k.op;
  Wire asked = c->wire();
  weft_op_t base = WEFT_SUM;
  if (reduces && decodeWireOp(k.op, &base, &asked)) {
    if (k.dt() != WEFT_FLOAT32)
      return invalidArgument(strFormat("%s: op %d (weft_op_create_wire: %s carried as %s) "
                                       "takes float32 only, not %s",
                                       name, k.op, opName(base), wireName(asked),
                                       datatypeName(k.dt())));
    op = base;
  }
  if (reduces && (op < 0 || op >= WEFT_NUM_OPS))
    return invalidArgument(strFormat("%s: op %d is not a weft_op_t", name, k.op));
  if (reduces && !opSupported(k.dt(), static_cast<weft_op_t>(op)))
    return invalidArgument(strFormat("%s: op %s takes integer datatypes only, not %s", name,
                                     opName(static_cast<weft_op_t>(op)), datatypeName(k.dt())));
  const bool rooted = k.type == CollType::Broadcast || k.type == CollType::Reduce;
  if (rooted && (k.root < 0 || k.root >= n))
    return invalidArgument(strFormat("%s: root %d is outside [0, %d)", name, k.root, n));
  const bool p2p = k.type == CollType::Send || k.type == CollType::Recv;
  if (p2p && (k.root < 0 || k.root >= n))
    return invalidArgument(strFormat("%s: peer %d is outside [0, %d)", name, k.root, n));
  const size_t elt = datatypeSize(k.dt());
  // count * elt * n must stay below SIZE_MAX / 2 (multiplications instead
  // of two divisions, which took a tenth of this function's time).
  size_t total = 0;
  if (__builtin_mul_overflow(k.count, elt, &total) ||
      __builtin_mul_overflow(total, static_cast<size_t>(n), &total) || total > SIZE_MAX / 2)
    return invalidArgument(strFormat("%s: count %zu is too large", name, k.count));
  CollArgs a;
  a.type = k.type;
  a.count = k.count;
  a.eltSize = elt;
  a.op = reduces ? static_cast<weft_op_t>(op) : WEFT_SUM;
  if (reduces) a.repro = c->reproFor(k.dt(), a.op);
  a.wire = Comm::wireFor(asked, k.type, k.dt(), a.op);
  a.root = rooted ? k.root : 0;
  a.peer = p2p ? k.root : -1;
  const size_t sb = sendBytes(a, n, c->rank()), rb = recvBytes(a, n, c->rank());
  const bool needSend = sb > 0 && !(k.type == CollType::Broadcast && c->rank() != k.root);
  const bool needRecv = rb > 0 && !(k.type == CollType::Reduce && c->rank() != k.root);
  if (needSend && !k.send)
    return invalidArgument(strFormat("%s: sendbuf is NULL with count %zu", name, k.count));
  if (needRecv && !k.recv)
    return invalidArgument(strFormat("%s: recvbuf is NULL with count %zu", name, k.count));
  // In place, as NCCL: same pointer, or (allgather) sendbuf at this rank's
  // block of recvbuf, (reduce_scatter) recvbuf at this rank's block of sendbuf.
  const auto* s8 = static_cast<const uint8_t*>(k.send);
  const auto* r8 = static_cast<const uint8_t*>(k.recv);
  const size_t blk = k.count * elt;
  switch (k.type) {
    case CollType::AllGather:
      a.inPlace = k.send && s8 == r8 + c->rank() * blk;
      break;
    case CollType::ReduceScatter:
      a.inPlace = k.recv && r8 == s8 + c->rank() * blk;
      break;
    case CollType::Send:
    case CollType::Recv:
    case CollType::Barrier:
      a.inPlace = false;
      break;
    default:
      a.inPlace = k.send && k.send == k.recv;
      break;
  }
  if (!a.inPlace && needSend && needRecv && overlaps(k.send, sb, k.recv, rb))
    return invalidArgument(strFormat("%s: sendbuf and recvbuf overlap but are not in place", name));
  *out = a;
  *needSendOut = needSend;
  *needRecvOut = needRecv;
  return Status();
}

weft_result_t submitPremul(weft_comm_t comm, Comm* c, const Call& k, weft_stream_t stream);

weft_result_t submit(weft_comm_t comm, const Call& k, weft_stream_t stream) {
  Status st;
  // Declared first, so the thread leaves its call on the comm (which
  // lookupCommCached entered) after every use of it, setError included.
  callguard::Scope inCall;
  Comm* c = lookupCommCached(comm, &st);
  GroupState& g = threadGroup();
  if (!c) {
    if (g.depth > 0 && g.error.isOk()) g.error = st;
    return setError(static_cast<Comm*>(nullptr), st);
  }
  if (k.op >= WEFT_NUM_OPS && !isWireOp(k.op) && isReduction(k.type))
    return submitPremul(comm, c, k, stream);
  // The call's one clock reading: the CUDA driver check and, for a call
  // that runs now, the telemetry's entry time.
  const uint64_t now = nowNs();
  CollArgs checked;
  const CollArgs* ap = &checked;  // the checked arguments, here or in the memo
  bool needSend = false, needRecv = false;
  CheckMemo& m = g.memo;
  const uint64_t gen = registryGen();
  if (m.comm == c && m.gen == gen && m.type == static_cast<int>(k.type) && m.send == k.send &&
      m.recv == k.recv && m.count == k.count && m.dtype == k.dtype && m.op == k.op &&
      m.root == k.root) {
    ap = &m.args;
    needSend = m.needSend;
    needRecv = m.needRecv;
  } else {
    st = check(c, k, &checked, &needSend, &needRecv);
    if (st.isOk()) {
      m.comm = c;
      m.gen = gen;
      m.type = static_cast<int>(k.type);
      m.send = k.send;
      m.recv = k.recv;
      m.count = k.count;
      m.dtype = k.dtype;
      m.op = k.op;
      m.root = k.root;
      m.args = checked;
      m.needSend = needSend;
      m.needRecv = needRecv;
    }
  }
  // Host memory, outside a group, and no CUDA driver in the process: run it
  // (resolveMemory would find nothing to resolve).
  if (st.isOk() && !stream && g.depth == 0 && !cuda::driverLoaded(now)) {
    st = c->runNow(*ap, k.dt(), k.send, k.recv, now);
    return st.isOk() ? WEFT_SUCCESS : setError(c, st);
  }
  PendingCall pc;
  pc.send = k.send;
  pc.recv = k.recv;
  if (st.isOk()) st = resolveMemory(collName(k.type), stream, needSend, needRecv, &pc, now);
  if (st.isOk() && pc.onStream && isWireOp(k.op) && isReduction(k.type))
    st = invalidUsage(strFormat("%s: op %d (weft_op_create_wire) runs on host memory only: weft "
                                "narrows and widens on the host",
                                collName(k.type), k.op));
  if (st.isError()) {
    if (g.depth > 0 && g.error.isOk()) g.error = st;
    return setError(c, st);
  }
  if (g.depth > 0 || pc.onStream) {
    // Kept beyond this call: hold a reference.
    pc.comm = lookupComm(comm, &st);
    if (!pc.comm) return setError(static_cast<Comm*>(nullptr), st);
  }
  pc.args = *ap;
  // The engine narrows and widens on the host: stream-ordered calls (CUDA
  // memory) run uncompressed (docs/compression.md).
  if (pc.onStream) pc.args.wire = Wire::None;
  pc.dtype = k.dt();
  if (g.depth > 0) {
    g.calls.push_back(pc);
    return WEFT_SUCCESS;
  }
  if (pc.onStream) {  // enqueued on the stream; runs in the comm's progress thread
    std::vector<PendingCall> one{pc};
    st = issueStreamCalls(one, nullptr, nullptr);
    return st.isOk() ? WEFT_SUCCESS : setError(c, st);
  }
  st = c->runNow(*ap, k.dt(), k.send, k.recv, now);
  return st.isOk() ? WEFT_SUCCESS : setError(c, st);
}

// A pre-multiplied sum: the call is checked as a SUM, its input scaled on
// the host by the op's scalar (straight into recvbuf where the result lands
// there whole: allreduce, and reduce at its root; else into a copy kept
// until the call or its group completes), then run as a SUM. Refused on
// device memory: the scaling runs on the host.
weft_result_t submitPremul(weft_comm_t comm, Comm* c, const Call& k, weft_stream_t stream) {
  GroupState& g = threadGroup();
  auto refuse = [&](const Status& st) {
    if (g.depth > 0 && g.error.isOk()) g.error = st;
    return setError(c, st);
  };
  const char* name = collName(k.type);
  unsigned char scalar[8];
  Status st = premulScalar(c, k.op, k.dtype, name, scalar);
  if (st.isError()) return refuse(st);
  Call sum = k;
  sum.op = WEFT_SUM;
  CollArgs a;
  bool needSend = false, needRecv = false;
  st = check(c, sum, &a, &needSend, &needRecv);
  if (st.isOk()) {
    PendingCall pc;
    pc.send = k.send;
    pc.recv = k.recv;
    st = resolveMemory(name, stream, needSend, needRecv, &pc);
    if (st.isOk() && pc.onStream)
      st = invalidUsage(strFormat("%s: a pre-multiplied sum on CUDA device memory is not supported "
                                  "yet (weft scales the input on the host)",
                                  name));
  }
  if (st.isError()) return refuse(st);
  if (!needSend) return submit(comm, sum, stream);  // nothing to scale
  const size_t n = sendBytes(a, c->nranks(), c->rank()) / a.eltSize;
  const bool intoRecv = k.type == CollType::AllReduce ||
                        (k.type == CollType::Reduce && c->rank() == k.root);
  if (intoRecv) {
    scaleHost(k.recv, k.send, n, k.dt(), scalar);
    sum.send = k.recv;
    return submit(comm, sum, stream);
  }
  std::shared_ptr<unsigned char[]> copy(new (std::nothrow) unsigned char[n * a.eltSize]);
  if (!copy)
    return refuse(Status(WEFT_ERR_SYSTEM,
                         strFormat("%s: no memory for the scaled copy of %zu bytes", name,
                                   n * a.eltSize)));
  scaleHost(copy.get(), k.send, n, k.dt(), scalar);
  sum.send = copy.get();
  if (g.depth > 0) g.keep.push_back(copy);  // read when the group is issued
  return submit(comm, sum, stream);
}

}  // namespace

extern "C" {

weft_result_t weft_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                             weft_datatype_t datatype, weft_op_t op, weft_comm_t comm,
                             weft_stream_t stream) {
  return submit(comm, {CollType::AllReduce, sendbuf, recvbuf, count, datatype, op, 0}, stream);
}

weft_result_t weft_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                             weft_datatype_t datatype, int root, weft_comm_t comm,
                             weft_stream_t stream) {
  return submit(comm, {CollType::Broadcast, sendbuf, recvbuf, count, datatype, WEFT_SUM, root},
                stream);
}

weft_result_t weft_reduce(const void* sendbuf, void* recvbuf, size_t count,
                          weft_datatype_t datatype, weft_op_t op, int root, weft_comm_t comm,
                          weft_stream_t stream) {
  return submit(comm, {CollType::Reduce, sendbuf, recvbuf, count, datatype, op, root}, stream);
}

weft_result_t weft_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                             weft_datatype_t datatype, weft_comm_t comm, weft_stream_t stream) {
  return submit(comm, {CollType::AllGather, sendbuf, recvbuf, sendcount, datatype, WEFT_SUM, 0},
                stream);
}

weft_result_t weft_reduce_scatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                  weft_datatype_t datatype, weft_op_t op, weft_comm_t comm,
                                  weft_stream_t stream) {
  return submit(comm, {CollType::ReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, 0},
                stream);
}

weft_result_t weft_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                            weft_datatype_t datatype, weft_comm_t comm, weft_stream_t stream) {
  return submit(comm, {CollType::AllToAll, sendbuf, recvbuf, count, datatype, WEFT_SUM, 0}, stream);
}

weft_result_t weft_send(const void* buf, size_t count, weft_datatype_t datatype, int peer,
                        weft_comm_t comm, weft_stream_t stream) {
  return submit(comm, {CollType::Send, buf, nullptr, count, datatype, WEFT_SUM, peer}, stream);
}

weft_result_t weft_recv(void* buf, size_t count, weft_datatype_t datatype, int peer,
                        weft_comm_t comm, weft_stream_t stream) {
  return submit(comm, {CollType::Recv, nullptr, buf, count, datatype, WEFT_SUM, peer}, stream);
}

weft_result_t weft_barrier(weft_comm_t comm, weft_stream_t stream) {
  return submit(comm, {CollType::Barrier, nullptr, nullptr, 0, WEFT_UINT8, WEFT_SUM, 0}, stream);
}

}  // extern "C"
