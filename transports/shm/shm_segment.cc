#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/log.h"
#include "transports/base/posted_ops.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace weft {
namespace shm {
namespace {

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string segmentPrefix(const Key& key, const char* purpose) {
  return strFormat("/weft-%016llx-", static_cast<unsigned long long>(deriveTag(key, purpose)));
}

std::string segmentName(const Key& key, int src, int dst, const char* purpose) {
  return segmentPrefix(key, purpose) + strFormat("%d-%d", src, dst);
}

Status slotError(const char* transport, const SlotHeader& s, int rank, int peer,
                 const std::string& peerDesc, uint64_t msgNo, uint64_t tag, size_t len,
                 size_t part) {
  if (s.tag != tag || s.msgLen != len)
    return mismatchError(transport, rank, peer, peerDesc, msgNo, {tag, len}, {s.tag, s.msgLen});
  return Status(WEFT_ERR_INTERNAL,
                strFormat("corrupt %s FIFO from %s to rank %d: slot of message #%llu "
                          "(%llu bytes) where #%llu (%zu bytes) was expected",
                          transport, peerDesc.c_str(), rank, static_cast<unsigned long long>(s.seq),
                          static_cast<unsigned long long>(s.partLen),
                          static_cast<unsigned long long>(msgNo), part));
}

size_t segmentBytes(uint32_t slots, size_t slotBytes) {
  return sizeof(FifoHeader) +
         static_cast<size_t>(slots) * roundUp(sizeof(SlotHeader) + slotBytes, kCacheLine);
}

std::string layoutProblem(const FifoHeader& h, int src, int dst, size_t mapped) {
  if (h.version != kSegVersion) return strFormat("version %u, not %u", h.version, kSegVersion);
  if (h.src != src || h.dst != dst)
    return strFormat("FIFO %d->%d, not %d->%d", h.src, h.dst, src, dst);
  if (h.slots == 0) return "no slots";
  // Every slot within the mapping, computed without overflow: the header
  // comes from another process, and slot(i) trusts slotStride.
  if (h.slotBytes > mapped || mapped < sizeof(FifoHeader))
    return strFormat("slots of %llu bytes in %zu bytes",
                     static_cast<unsigned long long>(h.slotBytes), mapped);
  const size_t stride = roundUp(sizeof(SlotHeader) + h.slotBytes, kCacheLine);
  if (h.slotStride != stride)
    return strFormat("slot stride %llu, not %zu", static_cast<unsigned long long>(h.slotStride),
                     stride);
  if (h.slots > (mapped - sizeof(FifoHeader)) / stride)
    return strFormat("%u slots of %llu bytes exceed %zu bytes", h.slots,
                     static_cast<unsigned long long>(h.slotBytes), mapped);
  return "";
}

Status Segment::create(const std::string& name, int src, int dst, uint32_t slots,
                       size_t slotBytes) {
  close();
  name_ = name;
  size_ = segmentBytes(slots, slotBytes);
  fd_ = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    int err = errno;
    return systemError(
        strFormat("shm transport: shm_open(%s) to create the FIFO from rank %d%s", name.c_str(),
                  src, err == EEXIST ? " (a stale segment of the same id?)" : ""),
        err);
  }
  creator_ = true;
  linked_ = true;
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    Status st =
        systemError(strFormat("shm transport: ftruncate(%s, %zu)", name.c_str(), size_), errno);
    close();
    return st;
  }
  base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    Status st = systemError(strFormat("shm transport: mmap(%s, %zu)", name.c_str(), size_), errno);
    close();
    return st;
  }
  FifoHeader* h = new (base_) FifoHeader();
  h->version = kSegVersion;
  h->slots = slots;
  h->src = src;
  h->dst = dst;
  h->creatorPid = getpid();
  h->probeValue = (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uint64_t>(h) ^
                  0x5eedf00dcafe1234ull;
  h->probeAddr = reinterpret_cast<uint64_t>(&h->probeValue);
  h->slotBytes = slotBytes;
  h->slotStride = roundUp(sizeof(SlotHeader) + slotBytes, kCacheLine);
  h->attached.store(0, std::memory_order_relaxed);
  h->broken.store(0, std::memory_order_relaxed);
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  for (auto& l : h->lines) l.seq.store(0, std::memory_order_relaxed);
  h->bell.store(0, std::memory_order_relaxed);
  h->sleeping.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;  // last: an opener seeing the magic sees the rest
  return Status::ok();
}

Status Segment::reserve() {
  if (fd_ < 0) return Status::ok();
  int rc = posix_fallocate(fd_, 0, static_cast<off_t>(size_));
  ::close(fd_);
  fd_ = -1;
  if (rc == 0 || rc == EOPNOTSUPP || rc == EINVAL) return Status::ok();
  return systemError(strFormat("shm transport: cannot reserve %zu bytes of /dev/shm for %s (lower "
                               "WEFT_SHM_SLOTS or WEFT_SHM_SLOT_BYTES, or enlarge /dev/shm)",
                               size_, name_.c_str()),
                     rc);
}

Status Segment::open(const std::string& name, int src, int dst, bool* missing) {
  close();
  *missing = false;
  name_ = name;
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return Status::ok();
    }
    return systemError(
        strFormat("shm transport: shm_open(%s) of the FIFO to rank %d", name.c_str(), dst), errno);
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    Status st = systemError(strFormat("shm transport: fstat(%s)", name.c_str()), errno);
    ::close(fd);
    return st;
  }
  if (static_cast<size_t>(sb.st_size) < sizeof(FifoHeader)) {  // still being created
    ::close(fd);
    *missing = true;
    return Status::ok();
  }
  size_ = static_cast<size_t>(sb.st_size);
  void* base = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (base == MAP_FAILED)
    return systemError(strFormat("shm transport: mmap(%s, %zu)", name.c_str(), size_), err);
  base_ = base;
  FifoHeader* h = header();
  if (h->magic != kSegMagic) {  // not initialized yet
    close();
    *missing = true;
    return Status::ok();
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  std::string why = layoutProblem(*h, src, dst, size_);
  if (!why.empty()) {
    Status st(WEFT_ERR_INTERNAL,
              strFormat("shm transport: segment %s has an unexpected layout (%s)", name.c_str(),
                        why.c_str()));
    close();
    return st;
  }
  return Status::ok();
}

void Segment::unlink() {
  if (creator_ && linked_) {
    if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
      WEFT_WARN(kTransport, "shm transport: shm_unlink(%s): %s", name_.c_str(), strerror(errno));
    linked_ = false;
  }
}

void Segment::close() {
  unlink();
  if (base_) munmap(base_, size_);
  base_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  creator_ = false;
}

PidWatch::~PidWatch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

void PidWatch::watch(int pid) {
  pid_ = pid;
  self_ = pid == getpid();
  if (self_ || pid <= 0) return;
  // Without a pidfd (old kernel, or the process is already gone) exited()
  // falls back to kill() and /proc.
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd_ < 0) pidfd_ = -1;
}

bool PidWatch::exited() const {
  if (self_ || pid_ <= 0) return false;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  if (kill(pid_, 0) != 0 && errno == ESRCH) return true;
  // A zombie still answers kill(): read its state from /proc.
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid_);
  FILE* f = fopen(path, "r");
  if (!f) return errno == ENOENT;
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

}  // namespace shm
}  // namespace weft
