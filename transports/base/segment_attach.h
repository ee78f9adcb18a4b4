// The attach handshake of the transports whose peers share memory segments
// (shm, cuda_ipc; segments as transports/shm/shm_segment.h makes them).
// Each rank creates, in localAddress(), the segments its peers write to; in
// connect() it opens the segments its peers created for it and raises their
// `attached` flag, and waits until its own segments are attached: then it
// unlinks their names, so no name survives connect(). Written once here:
//
//   SegmentAttach a("shm", rank, timeoutS);
//   a.open(p, name, src, dst, &out[p], "its FIFO to us does not exist");
//   a.await(p, incoming[p].get(), 1);
//   WEFT_RETURN_IF_ERROR(a.run(exited, describe));
//
// run() polls every step, sleeping 10 us doubling to 1 ms between rounds,
// until all are done; it is bounded by `timeoutS` (the bootstrap timeout).
// Every 100 ms and at the deadline it looks at the peers still pending: one
// whose process exited fails the handshake at once (REMOTE, naming it); at
// the deadline the error (TIMEOUT) lists the ranks still missing and why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "transports/shm/shm_segment.h"

namespace weft {

class SegmentAttach {
 public:
  // `transport` ("shm") and `rank` (this rank) prefix the errors.
  SegmentAttach(const char* transport, int rank, double timeoutS)
      : transport_(transport), rank_(rank), timeoutS_(timeoutS) {}

  // Opens the segment `name` (src -> dst) that `peer` creates, once it
  // exists; raises its attached flag (adds one with `count`: a segment
  // several peers map) and moves the mapping to *out. `missingWhy` is what
  // a timeout says of the peer while the segment does not exist.
  void open(int peer, std::string name, int src, int dst, std::unique_ptr<shm::Segment>* out,
            const char* missingWhy, bool count = false);
  // Waits until `users` peers attached to `seg` (created by this rank), then
  // unlinks its name. `peer`: the one expected to attach, or -1 for a
  // segment every peer maps (then every pending peer is watched for exit).
  void await(int peer, shm::Segment* seg, uint32_t users = 1);

  // Runs the steps until all are done (see above). `exited(p)`: whether
  // peer p's process is gone; `describe(p)`: how errors name it.
  Status run(const std::function<bool(int)>& exited,
             const std::function<std::string(int)>& describe);

 private:
  struct Step {
    int peer;
    bool isOpen;  // open() else await()
    std::string name;
    int src = 0, dst = 0;
    std::unique_ptr<shm::Segment>* out = nullptr;
    bool count = false;
    shm::Segment* seg = nullptr;
    uint32_t users = 0;
    const char* why;
    bool done = false;
  };
  Status poll(Step& s);

  const char* transport_;
  int rank_;
  double timeoutS_;
  std::vector<Step> steps_;
};

}  // namespace weft
