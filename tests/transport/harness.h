// The harness of the transport conformance suite: runs a group of ranks,
// as threads of this process or as forked processes, each rank executing the
// same body against one transport. Ranks exchange strings (address blobs,
// pids) through an in-test allgather: a shared table and a condition variable
// for threads, pipes relayed by the parent for processes. Bodies report
// failures as strings (Catch2 assertions are neither thread- nor fork-safe);
// every wait is bounded. Also what every transport test shares: groupSpec,
// expectPass, the message patterns and the check of a mismatch report.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "transports/transport.h"

namespace weft {
namespace tpt {

// UcxTcp and UcxSm: the ucx transport with UCX_TLS=tcp or UCX_TLS=sm (the
// harness sets it for the group's ranks).
// Ibverbs: only where built and ibv_get_device_list finds a device.
enum class Kind { Self, Shm, Tcp, CudaIpc, UcxTcp, UcxSm, Ibverbs };
enum class Mode { Threads, Procs };
const char* kindName(Kind k);
const char* modeName(Mode m);

std::unique_ptr<Transport> makeTransport(Kind k, const TransportContext& ctx);
// Whether this build has the transport of `k`.
bool built(Kind k);
// `ks` followed by the ucx kinds, when the ucx transport is built, and
// ibverbs, when built and an RDMA device is present.
std::vector<Kind> withOptional(std::vector<Kind> ks);
// "" when the ibverbs transport can run here, else why not.
std::string ibverbsUnavailable();

constexpr uint64_t kTestHostHash = 0x7e57'0000'0000'0001ull;

struct GroupSpec {
  Kind kind = Kind::Tcp;
  Mode mode = Mode::Threads;
  int nranks = 2;
  Config config = defaultConfig();
  double timeoutS = 40;      // the whole group; then processes are killed
  int mayDieBySigkill = -1;  // Procs: this rank is allowed to end by SIGKILL
  static Config defaultConfig();
};
// `nranks` ranks (one for Kind::Self) on transport `k`, as threads or
// processes, with the defaults above.
GroupSpec groupSpec(Kind k, Mode m = Mode::Threads, int nranks = 2);

class Rank {
 public:
  int rank = 0;
  int nranks = 1;
  Kind kind = Kind::Tcp;
  Mode mode = Mode::Threads;
  TransportContext ctx;
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Endpoint>> eps;  // by rank

  // The ranks this rank connects to: itself for self, every other otherwise.
  std::vector<int> peers() const;
  // The partner in pair tests: this rank for self, else the other of ranks 0 and 1.
  int partner() const { return kind == Kind::Self ? rank : 1 - rank; }
  Endpoint& ep(int p) { return *eps[p]; }

  // Bounded allgather / barrier among the group; false when the group broke
  // (a rank failed or died) or the group timeout passed.
  bool allgather(const std::string& mine, std::vector<std::string>* all);
  bool barrier();

  // Creates the transport, publishes its address, exchanges and connects
  // peers(). `beforeExchange` runs between localAddress() and the exchange.
  Status setup(const std::function<void(const std::string& blob)>& beforeExchange = {});
  // Drives progress() until every completion is done; while nothing
  // completes for 100 ms, checkPeer()s `checkRanks` (default: peers()).
  // Returns the first error (progress, checkPeer or a completion) or a
  // TIMEOUT after `timeoutS`.
  Status drive(const std::vector<Completion*>& cs, double timeoutS = 20,
               const std::vector<int>* checkRanks = nullptr);

  std::function<bool(const std::string&, std::vector<std::string>*)> exchange;
};

// A body returns "" on success, else what went wrong.
using Body = std::function<std::string(Rank&)>;

// Runs `body` on every rank of the group; returns "rank i: what" for every
// rank that failed (empty when all passed).
std::vector<std::string> runGroup(const GroupSpec& spec, const Body& body);

// In a test case: CHECKs that a group passed (runGroup returned no
// failures), printing every rank's failure otherwise.
void expectPass(const std::vector<std::string>& failures);

// "" when `st` is what the receiver of a mismatched message must report:
// INVALID_USAGE naming the peer, both tags (as 0x...) and both lengths; the
// sender sent (sendTag, sendLen), the receiver posted (recvTag, recvLen).
// Else what is wrong with it.
std::string mismatchProblem(const Status& st, int peer, uint64_t sendTag, size_t sendLen,
                            uint64_t recvTag, size_t recvLen);

// Deterministic contents for checked messages.
void fillPattern(void* buf, size_t len, uint64_t seed);
// The pattern seed of message i from rank src to rank dst.
uint64_t seedOf(int src, int dst, uint64_t i);
// Offset of the first byte that differs from the pattern, or len.
size_t checkPattern(const void* buf, size_t len, uint64_t seed);
uint64_t randomU64();

// A buffer without the cost of zero-filling (64 MiB messages).
struct Buffer {
  explicit Buffer(size_t n) : len(n), p(new char[n ? n : 1]) {}
  size_t len;
  std::unique_ptr<char[]> p;
  char* data() { return p.get(); }
};

bool contains(const std::string& s, const std::string& sub);

}  // namespace tpt
}  // namespace weft

// Inside a body: returns a failure line unless `cond` holds.
#define TP_CHECK(cond, ...)                                                       \
  do {                                                                            \
    if (!(cond))                                                                  \
      return ::weft::strFormat("%s:%d: %s failed: ", __FILE__, __LINE__, #cond) + \
             ::weft::strFormat(__VA_ARGS__);                                      \
  } while (0)

// Inside a body: returns a failure line unless the Status is ok.
#define TP_OK(expr)                                                                 \
  do {                                                                              \
    ::weft::Status _s = (expr);                                                     \
    if (!_s.isOk())                                                                 \
      return ::weft::strFormat("%s:%d: %s: code %d: %s", __FILE__, __LINE__, #expr, \
                               static_cast<int>(_s.code()), _s.message().c_str());  \
  } while (0)

// A post: ok or inProgress.
#define TP_POST(expr)                                                               \
  do {                                                                              \
    ::weft::Status _s = (expr);                                                     \
    if (_s.code() != WEFT_SUCCESS && _s.code() != WEFT_IN_PROGRESS)                 \
      return ::weft::strFormat("%s:%d: %s: code %d: %s", __FILE__, __LINE__, #expr, \
                               static_cast<int>(_s.code()), _s.message().c_str());  \
  } while (0)
