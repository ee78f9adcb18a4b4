// Collectives over the shared-memory arena of one host (transports/shm/
// arena.h): the `shm` algorithm. No messages: ranks copy into their own
// staging buffers and read each other's in place.
//
// A collective runs in rounds; round j covers `step` bytes of the vector
// (one arena chunk). Each round has up to three phases, and every rank
// publishes its flag after A and after B:
//
//   A  write my staging buffer            publish 2g+1
//   B  wait all >= 2g+1; read the others' staging, write my result buffer
//                                         publish 2g+2 (if any rank runs C)
//   C  wait all >= 2g+2; read the others' result buffers (allreduce, reduce)
//
// (g = the round's number in the communicator's arena sequence.) Staging and
// result buffers alternate by the parity of g, so round g+2 may overwrite
// round g's: a rank starts A(g+2) after B(g+1), which waited for every
// rank's A(g+1), which each rank starts after finishing C(g).
//
// Per collective (n ranks, S bytes per round, me = this rank):
//   allreduce, small (one-shot): A copies S; B reduces all n staged copies
//     (rank order: bitwise identical results everywhere). 1 round trip.
//   allreduce, large: the round is split into n parts, part p owned by rank
//     p. A copies the n-1 parts I do not own; B reduces my part from my
//     input and the n-1 staged copies into my result buffer (and my
//     output); C copies the n-1 other results. Per rank and byte: copy in
//     (n-1)/n, reduce 1/n from n inputs, copy out (n-1)/n.
//   reduce: as allreduce, only the root runs C.
//   broadcast: the root stages; the others copy out.
//   allgather: each stages its block; each copies out all blocks.
//   reduce_scatter: each stages the n-1 blocks it does not keep; each
//     reduces its block from all ranks.
//   alltoall: each stages the n-1 blocks for the others; each copies its.
//   barrier: one round without data.
// Small broadcasts (up to Arena::ringPayload() bytes) run through the
// ranks' broadcast rings: in round g every rank describes its call in its
// ring slot g % Arena::kRingSlots (the root also stages the data there),
// a reader waits for the root alone and compares its call with the root's,
// and a rank's A(g) waits only until every rank has finished
// B(g - kRingSlots) (published A(g - kRingSlots + 1)). So back-to-back
// small broadcasts pipeline kRingSlots deep, as eager sends do, and readers
// never wait for one another, where the parity buffers allow one round.
// The parity lines are left alone in these rounds, so running ahead never
// overwrites a descriptor still being read (each names its round:
// Arena::descOf).
// Single copy (broadcast, allgather and out-of-place alltoall of at least
// Arena::directMin bytes per block,
// when every rank may read every other's memory): one round; A publishes the
// address of my send buffer with the descriptor; B reads the owners' buffers
// straight into my output (process_vm_readv, or memcpy between threads); C
// waits until every rank has read, so that no buffer is released early.
// In round 0's A each rank also writes a descriptor of its collective
// (type, datatype, op, root, count); B compares them, so ranks that called
// different collectives get WEFT_ERR_INVALID_USAGE naming both calls. (A
// broadcast root does not wait in B, so it does not compare: the others
// report the mismatch, and the root's next collective then times out.)
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "exec/op.h"
#include "telemetry/telemetry.h"

namespace weft {
namespace shm {
class Arena;
}

class ArenaOp : public OpRunner {
 public:
  // Reserves this collective's rounds in the arena's sequence: create arena
  // ops in issue order. Buffers as bound by the API (recv may be null where
  // the collective writes none on this rank).
  ArenaOp(shm::Arena* arena, const CollArgs& args, weft_datatype_t dt, const void* send, void* recv,
          uint64_t seq);

  bool progress(Status* st, bool* moved) override;
  void waitingFor(std::vector<int>* ranks) const override;
  // Runs to the end on the calling thread, waiting on the arena (bounded by
  // timeoutS without progress; *cancel set by another thread aborts it).
  Status run(double timeoutS, const std::atomic<bool>* cancel) {
    if (round_ == 0 && stage_ == 0 && !timed_) {
      if (ring_) return runRing(timeoutS, cancel);
      if (oneShot_ && args_.type == CollType::AllReduce && rounds_ == 1 && recv_)
        return runOneShot(timeoutS, cancel);
    }
    return runRounds(timeoutS, cancel);
  }

  // Where to record arrival, local work and stalls (the op's record; both
  // outlive the op). Without it, nothing is recorded.
  // `tx`: the telemetry index of the shm transport (staged bytes count as
  // sent over it).
  void setTelemetry(telemetry::Telemetry* tel, telemetry::OpRecord* rec, int tx) {
    tel_ = tel;
    rec_ = rec;
    tx_ = tx;
    spans_ = tel && tel->wantSpans();
    timed_ = rec && rec->timeWork;
  }

  // Largest message that allreduce runs one-shot (every rank reduces it all).
  static size_t oneShotLimit(int nranks, size_t chunk);

 private:
  // run() through progress()'s stage machine.
  Status runRounds(double timeoutS, const std::atomic<bool>* cancel);
  void phaseA(size_t j, int par);
  Status phaseB(size_t j, int par);
  void phaseC(size_t j, int par);
  Status directB(int par);  // B of the single-copy mode
  // run() of a one-shot allreduce (oneShot_, untimed): phases A and B of
  // its one round straight through, without progress()'s stage machine.
  Status runOneShot(double timeoutS, const std::atomic<bool>* cancel);
  // run() of a ring broadcast (ring_, untimed): its one round straight
  // through, as runOneShot.
  Status runRing(double timeoutS, const std::atomic<bool>* cancel);
  // Phase A of ring round g: writes my ring slot (phaseA and runRing).
  void stageRing(uint64_t g);
  // B of a one-shot allreduce: every rank's staged copy (in its flag's line
  // up to 16 bytes) reduced in rank order into recv_.
  void reduceOneShot(int par);
  // Waits until every rank (or waitRank()) reached target().
  Status waitTarget(double timeoutS, const std::atomic<bool>* cancel);
  bool hasC() const;  // this rank runs a C phase
  bool anyC() const;  // some rank does (so B's flag is published)
  bool reduces() const;
  size_t stagedBytes(size_t j) const;  // what phase A of round j writes
  bool waitsInB() const;
  // The flag every rank must reach before the current stage.
  uint64_t target() const;
  // ... before phase A of round g (0: none).
  uint64_t gateOfA(uint64_t g) const;
  // The one rank phase B waits for (a ring reader: the root), or -1: all.
  int waitRank() const;
  // A ring reader: the root's slot already holds round g.
  bool ringReady(uint64_t g) const;
  // Byte range [*off, *off + *len) of part p of a round of `len` bytes.
  void part(size_t len, int p, size_t* off, size_t* plen) const;
  std::string describe() const;
  // Copies into the user's output buffer (streaming stores when large).
  void output(void* dst, const void* src, size_t n) const;

  shm::Arena* arena_;
  CollArgs args_;
  weft_datatype_t dt_;
  const uint8_t* send_;
  uint8_t* recv_;
  uint64_t seq_;
  int me_, n_;
  bool oneShot_ = false;
  bool inline_ = false;     // one-shot data in the flag's line (Arena::inlineData)
  bool direct_ = false;     // single copy (Arena::directMin)
  bool ring_ = false;       // a small broadcast through the root's ring
  bool streamOut_ = false;  // outputs written with non-temporal stores
  size_t total_ = 0;        // bytes the rounds cover
  size_t step_ = 0;         // bytes per round
  size_t rounds_ = 0;
  uint64_t base_ = 0;
  size_t round_ = 0;
  int stage_ = 0;  // 0: run A; 1: wait, run B; 2: wait, run C
  telemetry::Telemetry* tel_ = nullptr;
  telemetry::OpRecord* rec_ = nullptr;
  bool spans_ = false;
  bool timed_ = false;  // phases are timed (telemetry, and big enough rounds)
  int tx_ = 0;
};

}  // namespace weft
