// WEFT_STATS: one JSON file per rank with the communicator's aggregates,
// which weft-report reads (docs/telemetry.md has the fields). Written to a
// temporary name and renamed, so a reader never sees half a file.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "algo/schedule.h"
#include "core/clock.h"
#include "core/log.h"
#include "telemetry/telemetry.h"

namespace weft {
namespace telemetry {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

}  // namespace

std::string Telemetry::statsJson() const {
  const uint64_t now = nowNs();
  std::string j = "{\n";
  j += strFormat("  \"weft_stats\": 1,\n  \"rank\": %d,\n  \"nranks\": %d,\n", s_.rank, s_.nranks);
  j += strFormat("  \"comm\": \"%016llx\",\n  \"host\": \"%s\",\n  \"pid\": %d,\n",
                 static_cast<unsigned long long>(s_.commId),
                 esc(s_.hostnames.empty() ? "" : s_.hostnames[s_.rank]).c_str(), getpid());
  j += "  \"hosts\": [";
  for (int r = 0; r < s_.nranks; ++r)
    j += strFormat("%s\"%s\"", r ? ", " : "", esc(s_.hostnames[r]).c_str());
  j += "],\n";
  // The links: what each transport allows (one direction), and the
  // slowest one in use, which bounds a collective across all ranks.
  double linkGBs = 0;
  j += "  \"transports\": [";
  for (size_t t = 0; t < s_.transports.size(); ++t) {
    j += strFormat("%s{\"name\": \"%s\", \"peers\": %d, \"GBs\": %.3f}", t ? ", " : "",
                   s_.transports[t].c_str(), s_.transportPeers[t], s_.transportGBs[t]);
    if (s_.transports[t] != "self" && s_.transportPeers[t] > 0 &&
        (linkGBs == 0 || s_.transportGBs[t] < linkGBs))
      linkGBs = s_.transportGBs[t];
  }
  j += "],\n";
  if (s_.config.testThrottleMBps > 0) linkGBs = s_.config.testThrottleMBps * 1e-3;
  j += strFormat("  \"link_GBs\": %.3f,\n", linkGBs);
  j += strFormat("  \"throttle_MBps\": %.3f,\n", s_.config.testThrottleMBps);
  j += strFormat("  \"repro\": \"%s\",\n", s_.repro);
  j += strFormat("  \"wire_format\": \"%s\",\n", s_.wire);
  const uint64_t wall = firstEntryNs_ ? (lastEndNs_ > firstEntryNs_ ? lastEndNs_ : now) - firstEntryNs_ : 0;
  j += strFormat("  \"written_at_ns\": %llu,\n  \"first_entry_ns\": %llu,\n  \"wall_ns\": %llu,\n",
                 static_cast<unsigned long long>(toGlobal(now)),
                 static_cast<unsigned long long>(firstEntryNs_ ? toGlobal(firstEntryNs_) : 0),
                 static_cast<unsigned long long>(wall));
  j += strFormat(
      "  \"ops\": %llu,\n  \"ops_failed\": %llu,\n  \"gap_ns\": %llu,\n  \"wait_ns\": %llu,\n"
      "  \"busy_ns\": %llu,\n  \"fused_ops\": %llu,\n  \"fused_calls\": %llu,\n",
      static_cast<unsigned long long>(opsDone_), static_cast<unsigned long long>(opsFailed_),
      static_cast<unsigned long long>(gapNs_), static_cast<unsigned long long>(waitNs_),
      static_cast<unsigned long long>(busyNs_), static_cast<unsigned long long>(fusedOps_),
      static_cast<unsigned long long>(fusedCalls_));
  j += "  \"waited_for\": [";
  bool first = true;
  for (int r = 0; r < s_.nranks; ++r) {
    if (!waitedForOps_[r]) continue;
    j += strFormat("%s{\"rank\": %d, \"ns\": %llu, \"ops\": %llu}", first ? "" : ", ", r,
                   static_cast<unsigned long long>(waitedForNs_[r]),
                   static_cast<unsigned long long>(waitedForOps_[r]));
    first = false;
  }
  j += "],\n  \"classes\": [";
  first = true;
  for (int t = 0; t < kCollTypes; ++t) {
    for (int c = 0; c < kSizeClasses; ++c) {
      const auto& a = agg_[t * kSizeClasses + c];
      if (!a.ops) continue;
      j += first ? "\n" : ",\n";
      first = false;
      j += strFormat(
          "    {\"coll\": \"%s\", \"size\": \"%s\", \"ops\": %llu, \"bytes\": %llu, "
          "\"bus_bytes\": %llu, \"time_ns\": %llu, \"wait_ns\": %llu, \"reduce_ns\": %llu, "
          "\"copy_ns\": %llu, \"sent\": {",
          collName(static_cast<CollType>(t)), sizeClassName(c),
          static_cast<unsigned long long>(a.ops), static_cast<unsigned long long>(a.bytes),
          static_cast<unsigned long long>(static_cast<double>(a.bytes) *
                                          busFactor(static_cast<uint8_t>(t), s_.nranks)),
          static_cast<unsigned long long>(a.timeNs), static_cast<unsigned long long>(a.waitNs),
          static_cast<unsigned long long>(a.reduceNs), static_cast<unsigned long long>(a.copyNs));
      bool f2 = true;
      for (size_t x = 0; x < s_.transports.size() && x < static_cast<size_t>(kMaxTransports); ++x) {
        if (!a.sent[x]) continue;
        j += strFormat("%s\"%s\": %llu", f2 ? "" : ", ", s_.transports[x].c_str(),
                       static_cast<unsigned long long>(a.sent[x]));
        f2 = false;
      }
      j += "}}";
    }
  }
  j += "\n  ]\n}\n";
  return j;
}

Status Telemetry::writeStats() {
  if (s_.config.statsPath.empty()) return Status();
  const std::string& path = statsPath_;
  const std::string tmp = path + ".tmp";
  const std::string text = statsJson();
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f)
    return Status(WEFT_ERR_SYSTEM,
                  strFormat("WEFT_STATS: cannot write %s: %s", tmp.c_str(), strerror(errno)));
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Status(WEFT_ERR_SYSTEM, strFormat("WEFT_STATS: writing %s failed", path.c_str()));
  }
  return Status();
}

}  // namespace telemetry
}  // namespace weft
