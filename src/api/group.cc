// Groups and nonblocking requests. A group records calls per thread; the
// outermost weft_group_end enqueues all of them (per comm, in call order, so
// every rank posts its messages in the same order; small allreduces fused,
// fusion_plan.h) and then drives every comm involved until all are done.
// Because nothing waits until everything is posted, sends and receives
// inside a group cannot deadlock on each other.
#include <unistd.h>

#include <algorithm>

#include "api/api_state.h"
#include "core/log.h"

namespace weft {

Status issueCalls(std::vector<PendingCall>& calls, bool wait,
                  std::shared_ptr<OpTracker>* trackerOut,
                  std::vector<std::shared_ptr<Comm>>* commsOut) {
  const size_t onStream = static_cast<size_t>(
      std::count_if(calls.begin(), calls.end(), [](const PendingCall& c) { return c.onStream; }));
  if (onStream == calls.size() && onStream > 0) return issueStreamCalls(calls, trackerOut, commsOut);
  if (onStream > 0)
    return invalidUsage("a group mixes stream-ordered calls (device memory) with host calls "
                        "(stream NULL); issue them in separate groups");
  auto tracker = std::make_shared<OpTracker>();
  std::vector<std::shared_ptr<Comm>> comms;
  // A send whose buffer overlaps a receive of the same group is copied
  // before anything is issued, so the receive cannot overwrite it first.
  for (PendingCall& s : calls) {
    if (s.args.type != CollType::Send || s.args.count == 0) continue;
    const auto* sb = static_cast<const uint8_t*>(s.send);
    const size_t slen = s.args.count * s.args.eltSize;
    for (const PendingCall& r : calls) {
      if (r.args.type != CollType::Recv || r.comm != s.comm) continue;
      const auto* rb = static_cast<const uint8_t*>(r.recv);
      const size_t rlen = r.args.count * r.args.eltSize;
      if (rlen && sb < rb + rlen && rb < sb + slen) s.stageSend = true;
    }
  }
  for (PendingCall& pc : calls)
    if (std::find(comms.begin(), comms.end(), pc.comm) == comms.end()) comms.push_back(pc.comm);
  // Small allreduces of one comm run fused (fusion_plan.h): the plan's
  // items in its order, each a call or a fused run of them.
  thread_local FusionPlan plan;
  planGroupFusion(calls, &plan);
  for (const FusionPlan::Item& it : plan.items) {
    Status st;
    if (it.n > 1) {
      st = enqueueFused(calls, plan, it, tracker);
    } else {
      PendingCall& pc = calls[plan.members[it.first]];
      std::lock_guard<Mutex> lk(pc.comm->mu);
      st = pc.comm->enqueue(pc.args, pc.dtype, pc.send, pc.recv, tracker, pc.stageSend);
    }
    if (st.isError()) return st;
  }
  if (trackerOut) *trackerOut = tracker;
  if (commsOut) *commsOut = comms;
  if (!wait) return Status();
  if (comms.size() == 1) return comms[0]->waitFor(tracker);
  // Several comms driven by this thread (one thread, many ranks).
  int idle = 0;
  while (tracker->pending.load() > 0) {
    bool moved = false;
    for (auto& c : comms) moved |= c->progressOnce();
    idle = moved ? 0 : idle + 1;
    if (idle > 512) usleep(50);
  }
  return tracker->result();
}

}  // namespace weft

using namespace weft;

extern "C" {

weft_result_t weft_group_start(void) {
  GroupState& g = threadGroup();
  if (g.depth == 0) {
    g.calls.clear();
    g.keep.clear();
    g.error = Status();
  }
  g.depth++;
  return WEFT_SUCCESS;
}

static weft_result_t groupEnd(weft_request_t* req) {
  GroupState& g = threadGroup();
  if (g.depth == 0)
    return setError(static_cast<Comm*>(nullptr),
                    invalidUsage("weft_group_end without weft_group_start"));
  if (--g.depth > 0) return WEFT_SUCCESS;
  std::vector<PendingCall> calls;
  calls.swap(g.calls);
  std::vector<std::shared_ptr<void>> keep;  // freed on return, unless a request takes it
  keep.swap(g.keep);
  if (g.error.isError()) {
    Status st = g.error.withContext("a call in the group was refused; the group was not issued");
    g.error = Status();
    return setError(static_cast<Comm*>(nullptr), st);
  }
  std::shared_ptr<OpTracker> tracker;
  std::vector<std::shared_ptr<Comm>> comms;
  Status st = issueCalls(calls, req == nullptr, &tracker, &comms);
  if (st.isError()) return setError(comms.empty() ? nullptr : comms[0].get(), st);
  if (req) {
    for (auto& c : comms) c->kickProgressThread();
    *req = new weft_request{tracker, comms, std::move(keep)};
  }
  return WEFT_SUCCESS;
}

weft_result_t weft_group_end(void) { return groupEnd(nullptr); }

weft_result_t weft_group_end_async(weft_request_t* req) {
  if (!req) return setError(static_cast<Comm*>(nullptr), invalidArgument("req is NULL"));
  return groupEnd(req);
}

weft_result_t weft_test(weft_request_t req, int* done) {
  if (!req || !done)
    return setError(static_cast<Comm*>(nullptr), invalidArgument("req or done is NULL"));
  if (req->tracker->pending.load() > 0)
    for (auto& c : req->comms) c->progressOnce();
  if (req->tracker->pending.load() > 0) {
    *done = 0;
    return WEFT_SUCCESS;
  }
  *done = 1;
  Status st = req->tracker->result();
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_wait(weft_request_t req) {
  if (!req) return setError(static_cast<Comm*>(nullptr), invalidArgument("req is NULL"));
  if (req->comms.size() == 1 && req->tracker->pending.load() > 0) {
    // One comm: the engine's own bounded idle wait (spin, then doorbell or
    // poll), as a blocking call waits, instead of naps of 50 us.
    Status st = req->comms[0]->waitFor(req->tracker);
    return st.isOk() ? WEFT_SUCCESS : setError(req->comms[0].get(), st);
  }
  int idle = 0;
  while (req->tracker->pending.load() > 0) {
    bool moved = false;
    for (auto& c : req->comms) moved |= c->progressOnce();
    idle = moved ? 0 : idle + 1;
    if (idle > 512) usleep(50);
  }
  Status st = req->tracker->result();
  return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
}

weft_result_t weft_request_free(weft_request_t req) {
  if (!req) return WEFT_SUCCESS;
  weft_result_t r = WEFT_SUCCESS;
  if (req->tracker->pending.load() > 0) r = weft_wait(req);
  delete req;
  return r;
}

}  // extern "C"
