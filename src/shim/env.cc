// NCCL's environment variables, honored where weft has a meaning for them.
//
// weft reads WEFT_* variables when it creates an id or a communicator, so
// before each of those the shim translates the NCCL_* variables the user set
// into the WEFT_* ones (docs/nccl-shim.md has the table). A WEFT_* variable
// the user set explicitly always wins; one the shim set follows its NCCL_*
// source when that changes (a script may set os.environ["NCCL_DEBUG"] after
// the library was loaded). Variables weft has no use for are named at INFO.
//
// NCCL_DEBUG=VERSION (or INFO, TRACE) and WEFT_DEBUG=INFO print
// "weft <version> (NCCL ABI <major>.<minor>)" once per process.
#include <strings.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "core/log.h"
#include "shim/shim.h"

extern char** environ;

namespace weft {
namespace shim {
namespace {

// The job secret of ids derived from NCCL_COMM_ID (every rank derives the
// same id, so it cannot be random); WEFT_JOB_SECRET overrides it.
constexpr uint64_t kCommIdSecret = 0x5745465443434c31ull;

std::string envOr(const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

// NCCL_DEBUG levels: VERSION, WARN, INFO, ABORT, TRACE.
std::string mapDebug(const std::string& v) {
  std::string u = upper(v);
  if (u == "WARN" || u == "ABORT") return "WARN";
  if (u == "INFO") return "INFO";
  if (u == "TRACE") return "TRACE";
  return "";  // VERSION (only the banner) or unknown
}

// NCCL subsystems onto weft's INIT, BOOTSTRAP, TRANSPORT, COLL, TUNING.
std::string mapSubsys(const std::string& v) {
  if (v.empty()) return "";
  bool exclude = v[0] == '^';
  std::string list = exclude ? v.substr(1) : v;
  static const std::map<std::string, const char*> kMap = {
      {"INIT", "INIT"},     {"ENV", "INIT"},      {"BOOTSTRAP", "BOOTSTRAP"},
      {"NET", "TRANSPORT"}, {"SHM", "TRANSPORT"}, {"P2P", "COLL"},
      {"COLL", "COLL"},     {"CALL", "COLL"},     {"GRAPH", "TUNING"},
      {"TUNING", "TUNING"}, {"ALL", "ALL"}};
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok =
        upper(list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    auto it = kMap.find(tok);
    if (it != kMap.end()) {
      bool seen = false;
      for (const std::string& o : out) seen |= o == it->second;
      if (!seen) out.push_back(it->second);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  // Only subsystems weft lacks (ALLOC, PROXY, ...): show none of weft's.
  if (out.empty()) return exclude ? "" : "NONE";
  std::string s = exclude ? "^" : "";
  for (size_t i = 0; i < out.size(); ++i) s += (i ? "," : "") + out[i];
  return s;
}

// NCCL_BUFFSIZE (bytes per channel buffer) sizes weft's per-pair shm FIFO:
// WEFT_SHM_SLOT_BYTES = NCCL_BUFFSIZE / WEFT_SHM_SLOTS, at least 4 KiB.
std::string mapBuffsize(const std::string& v) {
  if (v.empty()) return "";
  char* end = nullptr;
  unsigned long long bytes = strtoull(v.c_str(), &end, 0);
  if (!end || *end || bytes == 0) return "";
  long slots = 8;
  if (const char* s = getenv("WEFT_SHM_SLOTS"); s && atol(s) > 0) slots = atol(s);
  unsigned long long slot = bytes / static_cast<unsigned long long>(slots);
  if (slot < 4096) slot = 4096;
  return std::to_string(slot);
}

struct Mapping {
  const char* ncclVar;
  const char* weftVar;
  std::string (*translate)(const std::string&);
};

std::string same(const std::string& v) { return v; }
std::string shmDisable(const std::string& v) { return atoi(v.c_str()) != 0 ? "^shm" : ""; }
std::string algo(const std::string& v) { return lower(v); }

const Mapping kMappings[] = {
    {"NCCL_DEBUG", "WEFT_DEBUG", mapDebug},
    {"NCCL_DEBUG_SUBSYS", "WEFT_DEBUG_SUBSYS", mapSubsys},
    {"NCCL_DEBUG_FILE", "WEFT_DEBUG_FILE", same},
    {"NCCL_SOCKET_IFNAME", "WEFT_SOCKET_IFNAME", same},
    {"NCCL_SHM_DISABLE", "WEFT_TRANSPORTS", shmDisable},
    {"NCCL_ALGO", "WEFT_ALGO", algo},
    {"NCCL_BUFFSIZE", "WEFT_SHM_SLOT_BYTES", mapBuffsize},
};

// Read by the shim itself (not translated).
const char* const kHandled[] = {"NCCL_COMM_ID", "NCCL_COMM_BLOCKING"};

// Named by docs/nccl-shim.md as ignored, with the reason logged at INFO.
struct Ignored {
  const char* var;
  const char* why;
};
const Ignored kIgnored[] = {
    {"NCCL_IB_HCA", "weft has no InfiniBand transport yet; tcp is used"},
    {"NCCL_IB_DISABLE", "weft has no InfiniBand transport yet; tcp is used"},
    {"NCCL_P2P_DISABLE", "weft has no CUDA peer-to-peer transport yet"},
    {"NCCL_TOPO_FILE", "weft has no topology detection yet"},
    {"NCCL_TOPO_DUMP_FILE", "weft has no topology detection yet"},
};

struct EnvState {
  std::mutex mu;
  std::map<std::string, std::string> owned;  // WEFT_* value the shim set
  std::string lastReport;                    // what was last logged
  bool bannerDone = false;
};

EnvState& envState() {
  static EnvState s;
  return s;
}

bool wantsBanner() {
  std::string n = upper(envOr("NCCL_DEBUG")), w = upper(envOr("WEFT_DEBUG"));
  return n == "VERSION" || n == "INFO" || n == "TRACE" || w == "INFO" || w == "TRACE";
}

}  // namespace

void prepareProcess() {
  EnvState& s = envState();
  std::lock_guard<std::mutex> lk(s.mu);
  bool logChanged = false;
  std::string report;
  for (const Mapping& m : kMappings) {
    const std::string src = envOr(m.ncclVar);
    const std::string want = src.empty() ? std::string() : m.translate(src);
    const char* cur = getenv(m.weftVar);
    auto own = s.owned.find(m.weftVar);
    if (own != s.owned.end() && (!cur || own->second != cur)) {
      s.owned.erase(own);  // the user changed it since: theirs now
      own = s.owned.end();
    }
    if (own == s.owned.end() && cur) {
      // Set by the user (or inherited from a parent process the shim ran in).
      if (!src.empty() && want == cur)
        report += std::string(" ") + m.ncclVar + "=" + src + " -> " + m.weftVar + "=" + want + ";";
      else if (!src.empty())
        report += std::string(" ") + m.ncclVar + "=" + src + " ignored (" + m.weftVar + "=" + cur +
                  " is set);";
      continue;
    }
    if (want.empty()) {
      if (own != s.owned.end()) {
        unsetenv(m.weftVar);
        s.owned.erase(own);
        logChanged |= strncmp(m.weftVar, "WEFT_DEBUG", 10) == 0;
      }
      if (!src.empty())
        report += std::string(" ") + m.ncclVar + "=" + src + " (nothing to change);";
      continue;
    }
    if (!cur || want != cur) {
      setenv(m.weftVar, want.c_str(), 1);
      s.owned[m.weftVar] = want;
      logChanged |= strncmp(m.weftVar, "WEFT_DEBUG", 10) == 0;
    }
    report += std::string(" ") + m.ncclVar + "=" + src + " -> " + m.weftVar + "=" + want + ";";
  }
  for (const Ignored& i : kIgnored)
    if (const char* v = getenv(i.var))
      report += std::string(" ") + i.var + "=" + v + " ignored: " + i.why + ";";
  // Any other NCCL_* variable: ignored.
  for (char** e = environ; e && *e; ++e) {
    if (strncmp(*e, "NCCL_", 5) != 0) continue;
    std::string name(*e, strcspn(*e, "="));
    bool known = false;
    for (const Mapping& m : kMappings) known |= name == m.ncclVar;
    for (const Ignored& i : kIgnored) known |= name == i.var;
    for (const char* h : kHandled) known |= name == h;
    if (!known) report += " " + name + " ignored (no weft meaning);";
  }
  if (logChanged) logReconfigure();
  if (!s.bannerDone && wantsBanner()) {
    s.bannerDone = true;
    // Printed whatever WEFT_DEBUG_SUBSYS says: it is how a user learns
    // that weft, not NCCL, runs behind libnccl.so.2. (logEnabled first
    // configures the logger: file, host name.)
    logEnabled(LogLevel::Info, kInit);
    logMessage(LogLevel::Info, kInit, __FILE__, __LINE__, "weft %d.%d.%d (NCCL ABI %d.%d)",
               WEFT_MAJOR, WEFT_MINOR, WEFT_PATCH, NCCL_MAJOR, NCCL_MINOR);
  }
  if (report != s.lastReport) {
    s.lastReport = report;
    if (!report.empty()) WEFT_INFO(kInit, "NCCL environment:%s", report.c_str());
  }
}

std::vector<std::pair<std::string, std::string>> ncclVariables() {
  // The numeric ones' defaults are what the shim does when they are unset.
  static const std::map<std::string, std::string> kDefaults = {
      {"NCCL_SHM_DISABLE", "0"}, {"NCCL_COMM_BLOCKING", "1"}, {"NCCL_IB_DISABLE", "0"}};
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* name) {
    std::string v = envOr(name);
    if (v.empty()) {
      auto d = kDefaults.find(name);
      if (d != kDefaults.end()) v = d->second;
    }
    out.emplace_back(name, v);
  };
  for (const Mapping& m : kMappings) add(m.ncclVar);
  for (const char* h : kHandled) add(h);
  for (const Ignored& i : kIgnored) add(i.var);
  return out;
}

bool defaultBlocking() {
  const char* v = getenv("NCCL_COMM_BLOCKING");
  return !(v && *v && atoi(v) == 0);
}

bool idFromCommIdEnv(weft_unique_id_t* id, std::string* err) {
  const char* addr = getenv("NCCL_COMM_ID");
  if (!addr || !*addr) return false;
  uint64_t secret = kCommIdSecret;
  if (const char* s = getenv("WEFT_JOB_SECRET"); s && *s) secret = strtoull(s, nullptr, 0);
  Status st = idFromAddress(addr, secret, id);
  if (st.isError()) {
    *err = std::string("NCCL_COMM_ID=") + addr + ": " + st.message();
    return false;
  }
  return true;
}

ncclResult_t startCommIdRoot(const weft_unique_id_t& id, int rank, std::string* err) {
  if (rank != 0) return ncclSuccess;
  weft_unique_id_t fromEnv;
  std::string ignored;
  if (!idFromCommIdEnv(&fromEnv, &ignored) || memcmp(&fromEnv, &id, sizeof id) != 0)
    return ncclSuccess;  // an id from ncclGetUniqueId: its root already runs
  uint64_t secret = 0;
  UniqueIdData d;
  if (decodeUniqueId(id, &d).isOk()) secret = d.secret;
  weft_unique_id_t started;
  Status st = startRootAt(Config::fromEnv(), getenv("NCCL_COMM_ID"), secret, &started);
  if (st.isError()) {
    *err = std::string("NCCL_COMM_ID: starting the rendezvous root: ") + st.message();
    return toNccl(st.code());
  }
  return ncclSuccess;
}

}  // namespace shim
}  // namespace weft

using namespace weft::shim;

namespace {

// Re-reads the logging variables (weft's logger is configured once).
void resetDebugInit() {
  prepareProcess();
  weft::logReconfigure();
}

}  // namespace

// From NCCL 2.30 nccl.h declares these only where NCCL_OS_LINUX is set (its
// own build) and makes them empty macros elsewhere; NCCL's library still
// exports them, and so does the shim, for programs built against older
// headers.
#ifdef ncclResetDebugInit
#undef ncclResetDebugInit
#undef pncclResetDebugInit
extern "C" void ncclResetDebugInit();
extern "C" void pncclResetDebugInit();
#endif

extern "C" {

void pncclResetDebugInit() { resetDebugInit(); }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
WEFT_NCCL_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop

// Not declared by nccl.h, but exported by NCCL's own library: exported
// here too, so that the shim's export list is exactly NCCL's.
void ncclResetDebugInitInternal();
void ncclResetDebugInitInternal() { resetDebugInit(); }

}  // extern "C"
