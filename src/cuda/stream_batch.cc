#include "cuda/stream_batch.h"

#include <algorithm>

#include "core/clock.h"
#include "core/log.h"
#include "cuda/pieces.h"
#include "cuda/runtime.h"
#include "kernels/cuda/vector_plan.h"

namespace weft {
namespace cuda {
namespace {

// The words a batch shares with its streams, at the start of its block.
constexpr size_t kHeader = 256;  // keeps every staging region 256-byte aligned
constexpr size_t kReadyWords = kHeader / 4 - 2;
struct Flags {
  uint32_t flag;   // the host stores the ticket here when the batch is done
  int32_t status;  // 0: the collective succeeded; else the streams skip the copy out
  // Stream j stores the ticket in ready[j] once its earlier work is done
  // (cuStreamWriteValue32): the gate reads memory, no CUDA call.
  uint32_t ready[kReadyWords];
};
static_assert(sizeof(Flags) == kHeader, "the flag words fill the header");
constexpr size_t kMinBlock = size_t{1} << 20;
// Enough for two calls cut into the most pieces: in steady state nothing is
// freed (cudaFreeHost would synchronize the device under the caller).
constexpr size_t kMaxFreeBlocks = 2 * kMaxPieces;

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

// Each batch's ticket differs from the last one of its block.
std::atomic<uint32_t> gNextTicket{1};

}  // namespace

struct StreamBatch::Block {
  uint8_t* base = nullptr;
  size_t size = 0;
  Flags* flags() { return reinterpret_cast<Flags*>(base); }
};

namespace {

// Process-wide pinned staging. Blocks are freed only beyond kMaxFreeBlocks
// and only while no block is out (taken or retiring): cudaFreeHost waits for
// the whole device, so it must never run while a weft batch holds a stream.
class Pool {
 public:
  using Block = StreamBatch::Block;

  Status take(size_t bytes, Block** out) {
    std::lock_guard<std::mutex> lk(mu_);
    reclaim();
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i]->size >= bytes && (best == free_.size() || free_[i]->size < free_[best]->size))
        best = i;
    if (best < free_.size()) {
      *out = free_[best];
      free_.erase(free_.begin() + static_cast<long>(best));
      ++out_;
      return Status();
    }
    size_t size = kMinBlock;
    while (size < bytes) size *= 2;
    void* p = nullptr;
    WEFT_RETURN_IF_ERROR(pinnedAlloc(size, &p));
    Block* b = new Block;
    b->base = static_cast<uint8_t*>(p);
    b->size = size;
    b->flags()->flag = 0;
    b->flags()->status = 0;
    *out = b;
    ++out_;
    return Status();
  }

  // Back to the pool once every event in `after` has completed (b NULL:
  // only the events, to destroy). No CUDA call here: a batch may end on a
  // comm's progress thread, while callers' streams are held by weft's flag
  // waits, and a CUDA call there can wait for those streams (cudaFreeHost
  // waits for the device; resource calls wait behind a caller's blocking
  // copy): a deadlock. take() reclaims, on a caller's thread.
  void giveBack(Block* b, std::vector<void*> after) {
    std::lock_guard<std::mutex> lk(mu_);
    retiring_.push_back(Retiring{b, std::move(after)});
  }
  // An event for a batch: a reclaimed one when there is one. Creating and
  // destroying events per batch would be resource calls, which wait
  // behind another thread's blocking copy (docs/cuda.md).
  Status takeEvent(void** ev) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!freeEvents_.empty()) {
        *ev = freeEvents_.back();
        freeEvents_.pop_back();
        return Status();
      }
    }
    return eventCreate(ev);
  }
  // A block that will not come back (left to a stream that may still use it).
  void drop() {
    std::lock_guard<std::mutex> lk(mu_);
    --out_;
  }

 private:
  struct Retiring {
    Block* block;
    std::vector<void*> events;
  };

  void reclaim() {
    for (size_t i = 0; i < retiring_.size();) {
      Retiring& r = retiring_[i];
      bool done = true, broken = false;
      for (void* ev : r.events) {
        bool d = false;
        if (eventDone(ev, &d).isError()) broken = true;
        done = done && d;
      }
      if (!done && !broken) {
        ++i;
        continue;
      }
      for (void* ev : r.events) {
        if (!broken && freeEvents_.size() < kMaxFreeEvents)
          freeEvents_.push_back(ev);
        else
          eventDestroy(ev);
      }
      // A stream in error may still hold the block: it is dropped, not reused.
      if (!broken && r.block) free_.push_back(r.block);
      if (r.block) --out_;
      retiring_.erase(retiring_.begin() + static_cast<long>(i));
    }
    while (out_ == 0 && free_.size() > kMaxFreeBlocks) {
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](Block* a, Block* b) { return a->size < b->size; });
      pinnedFree((*smallest)->base);
      delete *smallest;
      free_.erase(smallest);
    }
  }

  std::mutex mu_;
  std::vector<Block*> free_;
  std::vector<Retiring> retiring_;
  size_t out_ = 0;                 // blocks taken and not back in free_ (nor dropped)
  std::vector<void*> freeEvents_;  // completed, ready for another batch
  static constexpr size_t kMaxFreeEvents = 256;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: no CUDA calls during exit
  return *p;
}

}  // namespace

StagingLayout layoutStaging(const void* send, size_t sendLen, const void* recv, size_t recvLen) {
  StagingLayout l;
  l.hasSend = send != nullptr;
  l.hasRecv = recv != nullptr;
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  const bool overlap = l.hasSend && l.hasRecv && s < r + recvLen + (recvLen == 0) &&
                       r < s + sendLen + (sendLen == 0);
  if (overlap) {
    const uintptr_t lo = std::min(s, r), hi = std::max(s + sendLen, r + recvLen);
    l.bytes = hi - lo;
    l.sendOff = s - lo;
    l.recvOff = r - lo;
    return l;
  }
  const size_t sb = l.hasSend ? align256(sendLen) : 0;
  l.sendOff = 0;
  l.recvOff = sb;
  l.bytes = sb + (l.hasRecv ? recvLen : 0);
  return l;
}

namespace {
std::atomic<uint64_t> gDirectBatches{0};
}  // namespace

uint64_t directBatches() { return gDirectBatches.load(std::memory_order_relaxed); }

StreamBatch::StreamBatch(double timeoutS, bool direct) : timeoutS_(timeoutS), direct_(direct) {
  if (direct) gDirectBatches.fetch_add(1, std::memory_order_relaxed);
}

StreamBatch::~StreamBatch() {
  // Whatever happened, a stream waiting on this batch is let go.
  if (released_ && !completed_.load())
    complete(failed_.isError() ? failed_ : Status(WEFT_ERR_INTERNAL, "stream batch dropped"));
  // This may run on a progress thread: no CUDA call (Pool::giveBack).
  const bool all =
      after_.size() == streams_.size() && (readyWords_ || ready_.size() == streams_.size());
  std::vector<void*> events = std::move(after_);
  events.insert(events.end(), ready_.begin(), ready_.end());
  if (block_ && all && released_) {
    pool().giveBack(block_, std::move(events));
  } else {
    // Copies may still be queued on a stream: the block is left to them.
    if (block_) pool().drop();
    if (!events.empty()) pool().giveBack(nullptr, std::move(events));
  }
}

Status StreamBatch::stage(std::vector<void*>* sends, std::vector<void*>* recvs) {
  ticket_ = gNextTicket.fetch_add(1);
  size_t total = kHeader;
  for (const StreamCall& c : calls_) {
    layouts_.push_back(layoutStaging(c.send, c.sendLen, c.recv, c.recvLen));
    // + room to match alignment; direct: the block holds only the flag words.
    if (!direct_) total += align256(layouts_.back().bytes + kVectorBytes);
    if (std::find(streams_.begin(), streams_.end(), c.stream) != streams_.end()) continue;
    streams_.push_back(c.stream);
    // Before any stream is held (release): a kernel's first launch may wait
    // for the device to idle.
    WEFT_RETURN_IF_ERROR(loadKernelsFor(c.stream));
  }
  WEFT_RETURN_IF_ERROR(pool().take(total, &block_));
  // No stream uses the block now (it came back only after every stream
  // passed it): the flag starts one below the ticket, so the wait holds
  // whatever the ticket's value (tickets wrap around after 2^32 batches).
  block_->flags()->status = 0;
  readyWords_ = streamWritesFlags() && streams_.size() <= kReadyWords;
  for (size_t j = 0; j < streams_.size() && readyWords_; ++j)
    __atomic_store_n(&block_->flags()->ready[j], ticket_ - 1, __ATOMIC_RELAXED);
  __atomic_store_n(&block_->flags()->flag, ticket_ - 1, __ATOMIC_RELEASE);
  size_t at = kHeader;
  sends->clear();
  recvs->clear();
  for (size_t i = 0; i < calls_.size() && direct_; ++i) {
    // The ops read and write the user's device buffers; only those the call
    // uses (a non-root's reduce recvbuf may be anything: no schedule
    // touches it, tests/exec/placement_test.cc).
    const StreamCall& c = calls_[i];
    regions_.push_back(nullptr);
    sends->push_back(c.send && c.readSend ? const_cast<void*>(c.send) : nullptr);
    recvs->push_back(c.writeRecv ? c.recv : nullptr);
  }
  for (size_t i = 0; i < calls_.size() && !direct_; ++i) {
    const StreamCall& c = calls_[i];
    const StagingLayout& l = layouts_[i];
    // The region sits at the user's buffers' offset modulo 16, so that the
    // copy-out kernel moves 16-byte vectors (kernels/cuda/vector_plan.h).
    const uintptr_t user = c.recv ? reinterpret_cast<uintptr_t>(c.recv) - l.recvOff
                                  : reinterpret_cast<uintptr_t>(c.send) - l.sendOff;
    uint8_t* region = block_->base + at + user % kVectorBytes;
    regions_.push_back(region);
    at += align256(l.bytes + kVectorBytes);
    sends->push_back(l.hasSend ? region + l.sendOff : nullptr);
    recvs->push_back(l.hasRecv ? region + l.recvOff : nullptr);
    if (c.readSend && l.hasSend)
      WEFT_RETURN_IF_ERROR(copyAsync(region + l.sendOff, c.send, c.sendLen, c.stream));
  }
  for (size_t j = 0; j < streams_.size(); ++j) {
    if (readyWords_) {
      WEFT_RETURN_IF_ERROR(streamWriteFlag(&block_->flags()->ready[j], ticket_, streams_[j]));
      continue;
    }
    void* ev = nullptr;
    WEFT_RETURN_IF_ERROR(pool().takeEvent(&ev));
    ready_.push_back(ev);
    WEFT_RETURN_IF_ERROR(eventRecord(ev, streams_[j]));
  }
  return Status();
}

Status StreamBatch::release() {
  Flags* f = block_->flags();
  for (void* s : streams_) {
    WEFT_RETURN_IF_ERROR(streamWaitFlag(&f->flag, ticket_, &f->status, timeoutS_, s));
    released_ = true;  // from here on, complete() must run
  }
  for (size_t i = 0; i < calls_.size() && !direct_; ++i) {
    const StreamCall& c = calls_[i];
    const StagingLayout& l = layouts_[i];
    uint8_t* region = regions_[i];
    if (c.writeRecv && l.hasRecv && c.recvLen)
      WEFT_RETURN_IF_ERROR(copyIfOk(c.recvDevice ? c.recvDevice : c.recv, region + l.recvOff,
                                    c.recvLen, &f->status, c.stream));
  }
  for (void* s : streams_) {
    void* ev = nullptr;
    WEFT_RETURN_IF_ERROR(pool().takeEvent(&ev));
    after_.push_back(ev);
    WEFT_RETURN_IF_ERROR(eventRecord(ev, s));
  }
  released_ = true;
  return Status();
}

Status StreamBatch::gate(bool* open) {
  if (open_.load(std::memory_order_acquire)) {
    *open = true;
    return Status();
  }
  std::lock_guard<std::mutex> lk(mu_);
  *open = false;
  if (failed_.isError()) return failed_;
  const uint64_t now = nowNs();
  if (!gateSinceNs_) gateSinceNs_ = now;
  // Ready words where the driver writes them: the gate, asked on a comm's
  // progress thread, makes no CUDA call (docs/cuda.md: while weft holds a
  // stream, a CUDA call there can wait behind a caller's blocking copy).
  const size_t n = readyWords_ ? streams_.size() : ready_.size();
  for (size_t j = 0; j < n; ++j) {
    bool done = false;
    if (readyWords_) {
      const uint32_t v = __atomic_load_n(&block_->flags()->ready[j], __ATOMIC_ACQUIRE);
      done = static_cast<int32_t>(v - ticket_) >= 0;
    } else {
      Status st = eventDone(ready_[j], &done);
      if (st.isError()) return st;
    }
    if (!done) {
      if (static_cast<double>(now - gateSinceNs_) * 1e-9 > timeoutS_)
        return Status(WEFT_ERR_TIMEOUT,
                      strFormat("the work queued on the stream before this collective did not "
                                "finish within WEFT_TIMEOUT_S (%.0f s)",
                                timeoutS_));
      return Status();
    }
  }
  open_.store(true, std::memory_order_release);
  *open = true;
  return Status();
}

void StreamBatch::fail(const Status& st) {
  std::lock_guard<std::mutex> lk(mu_);
  if (failed_.isOk()) failed_ = st;
}

void StreamBatch::complete(const Status& st) {
  if (completed_.exchange(true) || !block_) return;
  Status out = st;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (out.isOk() && failed_.isError()) out = failed_;  // issuing failed before any op ran
  }
  Flags* f = block_->flags();
  // Status first, then the flag: a stream that sees the flag sees the status.
  __atomic_store_n(&f->status, out.isOk() ? 0 : 1, __ATOMIC_RELEASE);
  __atomic_store_n(&f->flag, ticket_, __ATOMIC_RELEASE);
  if (out.isError())
    WEFT_WARN(kColl, "stream-ordered collective failed: %s", out.message().c_str());
}

}  // namespace cuda
}  // namespace weft
