// Host identity: processes with the same hostname, boot id and network
// namespace can share memory and loopback; anything else is another host.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "net/socket.h"

namespace weft {
namespace net {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t fnv1a(uint64_t h, const void* data, size_t len) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::string bootId() {
  std::string id;
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f) {
    char buf[64] = {0};
    if (fgets(buf, sizeof buf, f)) id = buf;
    fclose(f);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

uint64_t hostHash() {
  uint64_t h = kFnvOffset;
  std::string name = hostName();
  h = fnv1a(h, name.data(), name.size());
  h = fnv1a(h, "|", 1);
  std::string boot = bootId();
  h = fnv1a(h, boot.data(), boot.size());
  h = fnv1a(h, "|", 1);
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) {
    uint64_t ino = static_cast<uint64_t>(st.st_ino);
    uint64_t dev = static_cast<uint64_t>(st.st_dev);
    h = fnv1a(h, &ino, sizeof ino);
    h = fnv1a(h, &dev, sizeof dev);
  }
  return h;
}

}  // namespace net
}  // namespace weft
