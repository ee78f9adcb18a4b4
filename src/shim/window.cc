// Memory windows and NCCL's one-sided calls (ncclPutSignal, ncclSignal,
// ncclWaitSignal) on weft's point-to-point, for host memory.
//
// A window is registered collectively (every rank, in the same order), so
// its position in that order names it on every rank. The first
// registration also splits off a weft communicator that carries nothing
// but one-sided traffic, so that puts never match the user's own
// ncclSend/ncclRecv. A put is two messages to the target on that channel:
// a 32-byte header (window, offset, bytes, signal index, context) and the
// payload. The origin copies both and sends them in a nonblocking weft
// group, so ncclPutSignal returns at once and the source buffer may be
// reused. The target takes messages from a peer in the order they were
// sent when it waits (ncclWaitSignal): each payload lands in its window
// and counts one signal for (peer, signal index, context); the wait
// returns when every descriptor's count is reached.
//
// Limits (docs/nccl-shim.md): the data of a put lands when the target waits
// for signals from that peer, not before (the target's CPU receives it);
// windows and one-sided calls take host memory only (device windows and
// the device pointers of nccl_device.h need CUDA IPC windows); they are
// refused inside ncclGroupStart/End; ncclSignal needs a window registered
// first (that sets up the channel).
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "shim/shim.h"

namespace weft {
namespace shim {

struct ShimWindow {
  int index = 0;  // position in the collective registration order
  char* base = nullptr;
  size_t size = 0;
};

struct OneSided {
  weft_comm_t channel = nullptr;
  int nextIndex = 0;
  std::vector<std::unique_ptr<ShimWindow>> windows;  // live ones; the handle is the pointer
  struct Put {
    weft_request_t req = nullptr;
    std::unique_ptr<unsigned char[]> data;  // header + payload, sent from here
  };
  std::vector<Put> puts;
  // Signals received and not yet waited for: (peer, signal index, context).
  std::map<std::tuple<int, int, int>, long> arrived;
  std::string failed;  // a put that failed: every later one-sided call reports it
};

namespace {

constexpr uint32_t kMagic = 0x77505554;  // "wPUT"

struct Header {
  uint32_t magic;
  int32_t window;  // -1: a signal without data
  uint64_t offset;
  uint64_t bytes;
  int32_t sigIdx;
  int32_t ctx;
};
static_assert(sizeof(Header) == 32, "the header's layout is the wire format");

const char* const kHostOnly =
    "weft's windows and one-sided calls take host memory; device memory needs CUDA IPC windows, "
    "which weft does not have yet";

ShimWindow* findWindow(OneSided* os, ncclWindow_t win) {
  if (!os) return nullptr;
  for (auto& w : os->windows)
    if (reinterpret_cast<ncclWindow_t>(w.get()) == win) return w.get();
  return nullptr;
}

// Completes the puts weft has finished; the first failure is kept.
void reap(OneSided* os) {
  for (size_t i = 0; i < os->puts.size();) {
    int done = 0;
    weft_result_t r = weft_test(os->puts[i].req, &done);
    if (!done && r == WEFT_SUCCESS) {
      ++i;
      continue;
    }
    if (r != WEFT_SUCCESS && os->failed.empty())
      os->failed = std::string("a put failed: ") + weft_get_last_error(nullptr);
    weft_request_free(os->puts[i].req);
    os->puts.erase(os->puts.begin() + static_cast<long>(i));
  }
}

#if NCCL_VERSION_CODE >= 23000
ShimWindow* windowAt(OneSided* os, int index) {
  for (auto& w : os->windows)
    if (w->index == index) return w.get();
  return nullptr;
}

// What every one-sided call checks first; *os is NULL when no window was
// ever registered on the comm.
ncclResult_t begin(ncclComm_t comm, const char* fn, cudaStream_t stream, CommRef* c,
                   OneSided** os) {
  if (ncclResult_t r = acquire(comm, fn, c); r != ncclSuccess) return r;
  if (ncclResult_t r = refuseIfSuspended(c->get(), fn); r != ncclSuccess) return r;
  if (inGroup())
    return setError(c->get(), ncclInvalidUsage,
                    std::string(fn) + ": weft does not take one-sided calls inside "
                                      "ncclGroupStart/ncclGroupEnd yet; call it outside the group");
  *os = (*c)->oneSided.get();
  if (*os) {
    reap(*os);
    if (!(*os)->failed.empty())
      return setError(c->get(), ncclRemoteError, std::string(fn) + ": " + (*os)->failed);
  }
  return syncStream(c->get(), fn, stream);  // host memory: the stream's work first
}

ncclResult_t sendPut(ncclComm* c, OneSided* os, const char* fn, int peer, const Header& h,
                     const void* payload) {
  std::unique_ptr<unsigned char[]> data(new (std::nothrow) unsigned char[sizeof h + h.bytes]);
  if (!data)
    return setError(c, ncclSystemError,
                    std::string(fn) + ": no memory for a copy of " + std::to_string(h.bytes) +
                        " bytes");
  memcpy(data.get(), &h, sizeof h);
  if (h.bytes) memcpy(data.get() + sizeof h, payload, h.bytes);
  weft_request_t req = nullptr;
  weft_result_t w = weft_group_start();
  if (w == WEFT_SUCCESS) {
    weft_result_t s1 = weft_send(data.get(), sizeof h, WEFT_UINT8, peer, os->channel, nullptr);
    weft_result_t s2 = h.bytes ? weft_send(data.get() + sizeof h, h.bytes, WEFT_UINT8, peer,
                                           os->channel, nullptr)
                               : WEFT_SUCCESS;
    w = weft_group_end_async(&req);
    if (s1 != WEFT_SUCCESS) w = s1;
    else if (s2 != WEFT_SUCCESS) w = s2;
  }
  if (w != WEFT_SUCCESS) return fromWeft(c, w, fn);
  os->puts.push_back(OneSided::Put{req, std::move(data)});
  return ncclSuccess;
}

// Takes the next put or signal `peer` sent, landing its data in its window.
ncclResult_t receiveOne(ncclComm* c, OneSided* os, const char* fn, int peer) {
  Header h;
  weft_result_t w = weft_recv(&h, sizeof h, WEFT_UINT8, peer, os->channel, nullptr);
  if (w != WEFT_SUCCESS) return fromWeft(c, w, fn);
  if (h.magic != kMagic)
    return setError(c, ncclInternalError,
                    std::string(fn) + ": a malformed one-sided message from rank " +
                        std::to_string(peer));
  std::string bad;
  void* dst = nullptr;
  std::unique_ptr<unsigned char[]> drain;
  if (h.bytes) {
    ShimWindow* win = windowAt(os, h.window);
    if (!win)
      bad = "window " + std::to_string(h.window) + " is not registered on this rank";
    else if (h.offset > win->size || h.bytes > win->size - h.offset)
      bad = std::to_string(h.bytes) + " bytes at offset " + std::to_string(h.offset) +
            " do not fit this rank's window of " + std::to_string(win->size) + " bytes";
    else
      dst = win->base + h.offset;
    if (!dst) {
      drain.reset(new (std::nothrow) unsigned char[h.bytes]);  // keeps the channel in step
      dst = drain.get();
    }
    if (!dst) return setError(c, ncclSystemError, std::string(fn) + ": no memory to drain a put");
    w = weft_recv(dst, h.bytes, WEFT_UINT8, peer, os->channel, nullptr);
    if (w != WEFT_SUCCESS) return fromWeft(c, w, fn);
  }
  os->arrived[{peer, h.sigIdx, h.ctx}]++;
  if (!bad.empty())
    return setError(c, ncclInvalidUsage,
                    std::string(fn) + ": a put from rank " + std::to_string(peer) +
                        " was dropped: " + bad);
  return ncclSuccess;
}

#endif  // NCCL_VERSION_CODE >= 23000

}  // namespace

void closeOneSided(ncclComm* c, bool abort) {
  std::shared_ptr<OneSided> os = std::move(c->oneSided);
  if (!os || !os->channel) return;
  reap(os.get());
  if (!abort && !os->puts.empty()) {
    // A put whose target never waited for it would hold destroy until the
    // timeout: end the channel instead.
    WEFT_WARN(kInit, "NCCL shim: %zu put(s) to ranks that never waited for them are dropped",
              os->puts.size());
    abort = true;
  }
  if (abort) weft_comm_abort(os->channel);
  for (auto& p : os->puts) weft_request_free(p.req);
  os->puts.clear();
  if (!abort) weft_comm_destroy(os->channel);
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

extern "C" {

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags) {
  (void)winFlags;  // symmetric or not, strict ordering: weft's puts are always in order
  const char* fn = "ncclCommWindowRegister";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!win || (!buff && size > 0))
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": win or buff is NULL");
  if (buff && isDeviceMemory(buff)) return unsupported(c.get(), fn, kHostOnly);
  if (inGroup())
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) + ": weft registers windows outside ncclGroupStart/End only");
  std::shared_ptr<OneSided> os = c->oneSided;
  if (!os) {
    // The first window: every rank is here (registration is collective),
    // so the one-sided channel is split off now.
    os = std::make_shared<OneSided>();
    weft_result_t w = weft_comm_split(c->wc, 0, c->rank, &os->channel);
    if (w != WEFT_SUCCESS) return fromWeft(c.get(), w, fn);
    c->oneSided = os;
  }
  auto w = std::make_unique<ShimWindow>();
  w->index = os->nextIndex++;
  w->base = static_cast<char*>(buff);
  w->size = size;
  *win = reinterpret_cast<ncclWindow_t>(w.get());
  os->windows.push_back(std::move(w));
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommWindowRegister)

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const char* fn = "ncclCommWindowDeregister";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  OneSided* os = c->oneSided.get();
  ShimWindow* w = findWindow(os, win);
  if (!w)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": win is not a window registered on this communicator");
  for (size_t i = 0; i < os->windows.size(); ++i) {
    if (os->windows[i].get() == w) {
      os->windows.erase(os->windows.begin() + static_cast<long>(i));
      break;
    }
  }
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommWindowDeregister)

#if NCCL_VERSION_CODE >= 23000

ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* fn = "ncclWinGetUserPtr";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!outUserPtr)
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": outUserPtr is NULL");
  ShimWindow* w = findWindow(c->oneSided.get(), win);
  if (!w)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": win is not a window registered on this communicator");
  *outUserPtr = w->base;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclWinGetUserPtr)

ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  const char* fn = "ncclPutSignal";
  CommRef c;
  OneSided* os = nullptr;
  if (ncclResult_t r = begin(comm, fn, stream, &c, &os); r != ncclSuccess) return r;
  auto invalid = [&](const std::string& what) {
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": " + what);
  };
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes)
    return invalid("datatype " + std::to_string(datatype) + " is not an ncclDataType_t");
  if (peer < 0 || peer >= c->nranks)
    return invalid("peer " + std::to_string(peer) + " is outside [0, " + std::to_string(c->nranks) + ")");
  if (flags != 0) return invalid("flags must be 0 (reserved)");
  ShimWindow* w = findWindow(os, peerWin);
  if (!w) return invalid("peerWin is not a window registered on this communicator");
  const size_t elt = weft::datatypeSize(static_cast<weft_datatype_t>(datatype));
  if (count > SIZE_MAX / elt) return invalid("count " + std::to_string(count) + " is too large");
  const size_t bytes = count * elt;
  if (bytes && !localbuff) return invalid("localbuff is NULL with count " + std::to_string(count));
  // The windows are registered collectively: checked against this rank's
  // size here, against the target's where the data lands.
  if (peerWinOffset > w->size || bytes > w->size - peerWinOffset)
    return invalid(std::to_string(bytes) + " bytes at offset " + std::to_string(peerWinOffset) +
                   " do not fit the window's " + std::to_string(w->size) + " bytes");
  if (bytes && isDeviceMemory(localbuff)) return unsupported(c.get(), fn, kHostOnly);
  Header h{kMagic, w->index, peerWinOffset, bytes, sigIdx, ctx};
  return sendPut(c.get(), os, fn, peer, h, localbuff);
}
WEFT_NCCL_ALIAS(ncclPutSignal)

ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream) {
  const char* fn = "ncclSignal";
  CommRef c;
  OneSided* os = nullptr;
  if (ncclResult_t r = begin(comm, fn, stream, &c, &os); r != ncclSuccess) return r;
  if (peer < 0 || peer >= c->nranks)
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": peer " + std::to_string(peer) + " is outside [0, " +
                        std::to_string(c->nranks) + ")");
  if (flags != 0)
    return setError(c.get(), ncclInvalidArgument, std::string(fn) + ": flags must be 0 (reserved)");
  if (!os)
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) + ": register a window first (ncclCommWindowRegister sets up "
                                      "weft's one-sided channel)");
  Header h{kMagic, -1, 0, 0, sigIdx, ctx};
  return sendPut(c.get(), os, fn, peer, h, nullptr);
}
WEFT_NCCL_ALIAS(ncclSignal)

ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream) {
  const char* fn = "ncclWaitSignal";
  CommRef c;
  OneSided* os = nullptr;
  if (ncclResult_t r = begin(comm, fn, stream, &c, &os); r != ncclSuccess) return r;
  if (nDesc < 0 || (nDesc > 0 && !signalDescs))
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": nDesc " + std::to_string(nDesc) +
                        " with signalDescs NULL, or negative");
  bool any = false;
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    if (d.peer < 0 || d.peer >= c->nranks || d.opCnt < 0)
      return setError(c.get(), ncclInvalidArgument,
                      std::string(fn) + ": descriptor " + std::to_string(i) + " has peer " +
                          std::to_string(d.peer) + " and opCnt " + std::to_string(d.opCnt));
    any |= d.opCnt > 0;
  }
  if (!any) return ncclSuccess;
  if (!os)
    return setError(c.get(), ncclInvalidUsage,
                    std::string(fn) + ": no window is registered on this communicator, so no "
                                      "signal can arrive");
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    const std::tuple<int, int, int> key{d.peer, d.sigIdx, d.ctx};
    while (os->arrived[key] < d.opCnt)
      if (ncclResult_t r = receiveOne(c.get(), os, fn, d.peer); r != ncclSuccess) return r;
    os->arrived[key] -= d.opCnt;
  }
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclWaitSignal)

#endif  // NCCL_VERSION_CODE >= 23000

}  // extern "C"
