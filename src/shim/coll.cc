// Collectives and point-to-point, each onto its weft call (Gather and
// Scatter onto a group of weft sends and receives, as NCCL builds them).
//
// Memory and streams: a call on CUDA device memory is handed to weft with
// its stream (stream 0 becomes cudaStreamLegacy, NCCL's reading of it), so
// it is stream-ordered as NCCL's: enqueued, and done when the stream gets
// there (src/cuda/stream_batch.h). A call on host memory never hands weft a
// stream (weft refuses pageable memory with one): with a CUDA runtime in the
// process the shim first waits for the stream, so host memory written by
// work queued on it is complete; then the operation runs on weft's host path
// and is complete when the call (or the outermost ncclGroupEnd) returns,
// which is also complete "in stream order". Without CUDA a stream is an
// opaque handle and ignored, so CPU-only callers may pass any value.
#include <initializer_list>
#include <memory>
#include <string>

#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "shim/shim.h"

using namespace weft::shim;

namespace {

// One NCCL call: resolves and checks what every collective shares, then
// records the outcome (a refusal inside a group fails the group).
class Call {
 public:
  Call(const char* fn, ncclComm_t comm, cudaStream_t stream)
      : fn_(fn), comm_(comm), stream_(stream) {}

  // The comm, the datatype, the buffers' memory, the stream.
  bool begin(ncclDataType_t datatype, std::initializer_list<const void*> bufs) {
    if (!ok(acquire(comm_, fn_, &ref_))) return false;
    c_ = ref_.get();
    if (!ok(refuseIfSuspended(c_, fn_))) return false;
    wc = c_->wc;
    if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes) {
      invalid("datatype " + std::to_string(datatype) + " is not an ncclDataType_t");
      return false;
    }
    dt = static_cast<weft_datatype_t>(datatype);
    for (const void* p : bufs) {
      if (isDeviceMemory(p)) {
        // cudaStreamLegacy: the handle both this runtime and weft's read as
        // the legacy default stream.
        wstream = stream_ ? static_cast<void*>(stream_) : reinterpret_cast<void*>(uintptr_t{1});
        return true;
      }
    }
    return ok(syncStream(c_, fn_, stream_));
  }

  bool op(ncclRedOp_t op) { return ok(resolveOp(c_, fn_, op, &wop)); }

  ncclResult_t invalid(const std::string& what) {
    ok(setError(c_, ncclInvalidArgument, std::string(fn_) + ": " + what));
    return result_;
  }

  ncclResult_t finish(weft_result_t w) {
    if (w == WEFT_SUCCESS) return ncclSuccess;
    return groupRefused(fromWeft(c_, w, fn_));
  }

  ncclResult_t result() const { return result_; }
  int rank() const { return c_->rank; }
  int nranks() const { return c_->nranks; }

  weft_comm_t wc = nullptr;
  void* wstream = nullptr;  // the stream handed to weft: set for device memory
  weft_datatype_t dt = WEFT_UINT8;
  weft_op_t wop = WEFT_SUM;

 private:
  bool ok(ncclResult_t r) {
    result_ = groupRefused(r);
    return r == ncclSuccess;
  }

  const char* fn_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  CommRef ref_;  // keeps the comm alive for the whole call
  ncclComm* c_ = nullptr;
  ncclResult_t result_ = ncclSuccess;
};

// Keeps the first failure of a sequence of weft calls.
struct FirstError {
  weft_result_t w = WEFT_SUCCESS;
  void operator()(weft_result_t x) {
    if (w == WEFT_SUCCESS) w = x;
  }
};

// Gather (`gather`: rank i's sendbuff lands in block i of the root's
// recvbuff) and scatter (block i of the root's sendbuff goes to rank i's
// recvbuff), as one group of sends and receives. The root's own block is a
// send to itself unless it is already in place.
ncclResult_t rootedBlocks(Call& k, bool gather, const void* sendbuff, void* recvbuff, size_t count,
                          int root) {
  const int n = k.nranks(), me = k.rank();
  if (root < 0 || root >= n)
    return k.invalid("root " + std::to_string(root) + " is outside [0, " + std::to_string(n) + ")");
  // The root's n-block buffer, and every rank's one block.
  const void* rootBuf = gather ? recvbuff : sendbuff;
  const void* block = gather ? sendbuff : recvbuff;
  if (count > 0 && (!block || (me == root && !rootBuf)))
    return k.invalid("a buffer is NULL with count " + std::to_string(count));
  const size_t blk = count * weft::datatypeSize(k.dt);
  FirstError e;
  e(weft_group_start());
  if (me == root) {
    for (int i = 0; i < n; ++i) {
      unsigned char* b =
          static_cast<unsigned char*>(const_cast<void*>(rootBuf)) + static_cast<size_t>(i) * blk;
      // What rank i sends and what the root receives, for gather; the
      // other way round for scatter.
      const void* src = gather ? sendbuff : b;
      void* dst = gather ? static_cast<void*>(b) : recvbuff;
      if (i != me) {
        e(gather ? weft_recv(dst, count, k.dt, i, k.wc, k.wstream)
                 : weft_send(src, count, k.dt, i, k.wc, k.wstream));
      } else if (count > 0 && dst != src) {
        e(weft_send(src, count, k.dt, me, k.wc, k.wstream));
        e(weft_recv(dst, count, k.dt, me, k.wc, k.wstream));
      }
    }
  } else if (gather) {
    e(weft_send(sendbuff, count, k.dt, root, k.wc, k.wstream));
  } else {
    e(weft_recv(recvbuff, count, k.dt, root, k.wc, k.wstream));
  }
  e(weft_group_end());
  return k.finish(e.w);
}

}  // namespace

extern "C" {

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream) {
  Call k("ncclAllReduce", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff}) || !k.op(op)) return k.result();
  return k.finish(weft_allreduce(sendbuff, recvbuff, count, k.dt, k.wop, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclAllReduce)

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  Call k("ncclReduce", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff}) || !k.op(op)) return k.result();
  return k.finish(weft_reduce(sendbuff, recvbuff, count, k.dt, k.wop, root, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclReduce)

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream) {
  Call k("ncclReduceScatter", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff}) || !k.op(op)) return k.result();
  return k.finish(weft_reduce_scatter(sendbuff, recvbuff, recvcount, k.dt, k.wop, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclReduceScatter)

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  Call k("ncclBroadcast", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff})) return k.result();
  return k.finish(weft_broadcast(sendbuff, recvbuff, count, k.dt, root, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclBroadcast)

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclBcast", comm, stream);
  if (!k.begin(datatype, {buff})) return k.result();
  return k.finish(weft_broadcast(buff, buff, count, k.dt, root, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclBcast)

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclAllGather", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff})) return k.result();
  return k.finish(weft_allgather(sendbuff, recvbuff, sendcount, k.dt, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclAllGather)

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclAlltoAll", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff})) return k.result();
  return k.finish(weft_alltoall(sendbuff, recvbuff, count, k.dt, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclAlltoAll)

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclGather", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff})) return k.result();
  return rootedBlocks(k, true, sendbuff, recvbuff, count, root);
}
WEFT_NCCL_ALIAS(ncclGather)

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclScatter", comm, stream);
  if (!k.begin(datatype, {sendbuff, recvbuff})) return k.result();
  return rootedBlocks(k, false, sendbuff, recvbuff, count, root);
}
WEFT_NCCL_ALIAS(ncclScatter)

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclSend", comm, stream);
  if (!k.begin(datatype, {sendbuff})) return k.result();
  return k.finish(weft_send(sendbuff, count, k.dt, peer, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclSend)

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  Call k("ncclRecv", comm, stream);
  if (!k.begin(datatype, {recvbuff})) return k.result();
  return k.finish(weft_recv(recvbuff, count, k.dt, peer, k.wc, k.wstream));
}
WEFT_NCCL_ALIAS(ncclRecv)

}  // extern "C"
