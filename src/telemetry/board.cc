#include "telemetry/board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/log.h"

namespace weft {
namespace telemetry {

Board::~Board() {
  unlink();
  if (lines_) munmap(lines_, bytes_);
}

Status Board::map(const std::string& name, int nranks, bool create, double timeoutS) {
  name_ = name;
  bytes_ = sizeof(BoardLine) * static_cast<size_t>(nranks);
  int fd = -1;
  if (create) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
      return Status(WEFT_ERR_SYSTEM, strFormat("telemetry board %s: shm_open: %s", name.c_str(),
                                               strerror(errno)));
    creator_ = linked_ = true;
    if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      int e = errno;
      close(fd);
      return Status(WEFT_ERR_SYSTEM, strFormat("telemetry board %s: ftruncate: %s",
                                               name.c_str(), strerror(e)));
    }
  } else {
    // The creator may not have made it yet; it must be full size, too.
    Deadline dl(timeoutS);
    for (;;) {
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      struct stat st;
      if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= bytes_) break;
      if (fd >= 0) close(fd);
      fd = -1;
      if (dl.expired())
        return Status(WEFT_ERR_TIMEOUT,
                      strFormat("telemetry board %s did not appear within %.0f s", name.c_str(),
                                timeoutS));
      usleep(1000);
    }
  }
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return Status(WEFT_ERR_SYSTEM,
                  strFormat("telemetry board %s: mmap: %s", name.c_str(), strerror(errno)));
  lines_ = static_cast<BoardLine*>(p);
  return Status();
}

void Board::unlink() {
  if (creator_ && linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

}  // namespace telemetry
}  // namespace weft
