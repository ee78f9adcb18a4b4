// SegmentAttach: the bounded attach handshake of shm and cuda_ipc
// (segment_attach.h).
#include "transports/base/segment_attach.h"

#include <unistd.h>

#include <algorithm>

#include "core/clock.h"

namespace weft {

void SegmentAttach::open(int peer, std::string name, int src, int dst,
                         std::unique_ptr<shm::Segment>* out, const char* missingWhy, bool count) {
  Step s;
  s.peer = peer;
  s.isOpen = true;
  s.name = std::move(name);
  s.src = src;
  s.dst = dst;
  s.out = out;
  s.count = count;
  s.why = missingWhy;
  steps_.push_back(std::move(s));
}

void SegmentAttach::await(int peer, shm::Segment* seg, uint32_t users) {
  Step s;
  s.peer = peer;
  s.isOpen = false;
  s.seg = seg;
  s.users = users;
  s.why = "did not attach";
  steps_.push_back(std::move(s));
}

Status SegmentAttach::poll(Step& s) {
  if (s.isOpen) {
    auto seg = std::make_unique<shm::Segment>();
    bool missing = false;
    WEFT_RETURN_IF_ERROR(seg->open(s.name, s.src, s.dst, &missing));
    if (missing) return Status::ok();
    if (s.count)
      seg->header()->attached.fetch_add(1, std::memory_order_acq_rel);
    else
      seg->header()->attached.store(1, std::memory_order_release);
    *s.out = std::move(seg);
    s.done = true;
  } else if (s.seg->header()->attached.load(std::memory_order_acquire) >= s.users) {
    s.seg->unlink();
    s.done = true;
  }
  return Status::ok();
}

Status SegmentAttach::run(const std::function<bool(int)>& exited,
                          const std::function<std::string(int)>& describe) {
  std::vector<int> peers;  // in the order of their first step
  for (const Step& s : steps_)
    if (s.peer >= 0 && std::find(peers.begin(), peers.end(), s.peer) == peers.end())
      peers.push_back(s.peer);
  Deadline dl(timeoutS_);
  int sleepUs = 10;
  uint64_t nextLiveCheck = nowNs();
  for (;;) {
    bool all = true, shared = false;  // shared: a step of every peer is pending
    for (Step& s : steps_) {
      if (!s.done) WEFT_RETURN_IF_ERROR(poll(s));
      all = all && s.done;
      shared = shared || (!s.done && s.peer < 0);
    }
    if (all) return Status::ok();
    const bool expired = dl.expired();
    if (expired || nowNs() >= nextLiveCheck) {
      std::string missing;
      for (int p : peers) {
        const Step* first = nullptr;  // the peer's first pending step says why
        for (const Step& s : steps_)
          if (s.peer == p && !s.done) {
            first = &s;
            break;
          }
        if (!first && !shared) continue;
        if (exited(p))
          return Status(WEFT_ERR_REMOTE,
                        strFormat("%s transport: rank %d connecting: ", transport_, rank_) +
                            describe(p) + " exited");
        if (first) missing += strFormat("%s%d (%s)", missing.empty() ? "" : ", ", p, first->why);
      }
      if (expired)
        return Status(WEFT_ERR_TIMEOUT,
                      strFormat("%s transport: rank %d timed out after %.1f s connecting; "
                                "ranks still missing: %s",
                                transport_, rank_, timeoutS_, missing.c_str()));
      nextLiveCheck = nowNs() + 100 * 1000 * 1000;
    }
    usleep(sleepUs);
    if (sleepUs < 1000) sleepUs *= 2;
  }
}

}  // namespace weft
