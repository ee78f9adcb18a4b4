// Results and error text: weft_result_t -> ncclResult_t, the last-error
// string behind ncclGetLastError, and ncclGetVersion / ncclGetErrorString.
#include <string>

#include "core/log.h"
#include "shim/shim.h"

namespace weft {
namespace shim {
namespace {

thread_local std::string tlsLastError;

}  // namespace

const std::string& threadLastError() { return tlsLastError; }

ncclResult_t toNccl(weft_result_t r) {
  switch (r) {
    case WEFT_SUCCESS:
      return ncclSuccess;
    case WEFT_ERR_INVALID_ARGUMENT:
      return ncclInvalidArgument;
    case WEFT_ERR_INVALID_USAGE:
      return ncclInvalidUsage;
    case WEFT_ERR_SYSTEM:
      return ncclSystemError;
    case WEFT_ERR_INTERNAL:
      return ncclInternalError;
    // A timeout names the peer that made no progress: for a framework that
    // is a remote failure, which it handles by aborting the communicator.
    case WEFT_ERR_REMOTE:
    case WEFT_ERR_TIMEOUT:
      return ncclRemoteError;
    case WEFT_ERR_CUDA:
      return ncclUnhandledCudaError;
    // Work cut short by ncclCommAbort: the caller used an aborted comm.
    case WEFT_ERR_ABORTED:
      return ncclInvalidUsage;
    case WEFT_IN_PROGRESS:
      return ncclInProgress;
    // A peer revoked the comm (or this rank did): a remote failure to recover from.
    case WEFT_ERR_REVOKED:
      return ncclRemoteError;
  }
  return ncclInternalError;
}

ncclResult_t setError(ncclComm* c, ncclResult_t r, const std::string& msg) {
  tlsLastError = msg;
  if (c) {
    std::lock_guard<std::mutex> lk(c->mu);
    c->lastError = msg;
  }
  return r;
}

ncclResult_t fromWeft(ncclComm* c, weft_result_t r, const char* fn) {
  if (r == WEFT_SUCCESS) return ncclSuccess;
  // weft records every failure as the calling thread's last error too.
  return setError(c, toNccl(r), std::string(fn) + ": " + weft_get_last_error(nullptr));
}

ncclResult_t unsupported(ncclComm* c, const char* fn, const char* why) {
  std::string msg = std::string(fn) + " is not supported by weft: " + why;
  WEFT_WARN(kInit, "%s", msg.c_str());
  return setError(c, ncclInvalidUsage, msg);
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

extern "C" {

ncclResult_t pncclGetVersion(int* version) {
  if (!version) return setError(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  // The ABI this shim implements: the installed header's own code, so that
  // frameworks enable exactly the features that header declares.
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclGetVersion)

const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled CUDA error (see ncclGetLastError)";
    case ncclSystemError:
      return "system error: socket, shared memory or memory (see ncclGetLastError)";
    case ncclInternalError:
      return "internal error in weft (see ncclGetLastError)";
    case ncclInvalidArgument:
      return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage:
      return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError:
      return "remote error: a peer failed, exited or stopped making progress";
    case ncclInProgress:
      return "operation in progress";
#if NCCL_VERSION_CODE >= 23000
    case ncclTimeout:  // weft reports a timeout as ncclRemoteError, naming the peer
      return "timeout";
#endif
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}
WEFT_NCCL_ALIAS(ncclGetErrorString)

const char* pncclGetLastError(ncclComm_t comm) {
  // The calling thread's last error; a comm's own one (e.g. of a creation
  // that failed on a worker thread) when the thread has none.
  if (tlsLastError.empty()) {
    if (CommRef c = lookup(comm)) {
      thread_local std::string copy;
      std::lock_guard<std::mutex> lk(c->mu);
      copy = c->lastError;
      return copy.c_str();
    }
  }
  return tlsLastError.c_str();
}
WEFT_NCCL_ALIAS(ncclGetLastError)

}  // extern "C"
