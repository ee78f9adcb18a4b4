// The multi-host test bed: three network namespaces play three hosts, joined
// by veth pairs to a bridge in a fourth ("the switch"), with test-only
// addresses 10.213.N.1-3/24 that exist only inside them. Two ranks run per
// host; every collective is checked between hosts over tcp and over ucx
// (UCX_TLS=tcp on the veth), and the INFO logs must show that ranks of one
// host talked over shm and ranks of different hosts over the network
// transport; then again with the hierarchical allreduce forced. Runs as root (creating namespaces needs it) and skips, saying
// why, otherwise. Everything it creates is removed by a guard that also runs
// when a check fails; namespaces left by a killed earlier run (its pid
// gone) are removed first.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "coll/check.h"

using namespace wtest;

namespace {

constexpr int kHosts = 3;
constexpr int kPerHost = 2;

int sh(const std::string& cmd) { return system((cmd + " >/dev/null 2>&1").c_str()); }

std::string readFile(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, k);
  fclose(f);
  return out;
}

// Namespaces "weftbed-<pid>-h0..h2" and "weftbed-<pid>-sw"; veths
// "wb<i>h<tag>" (in host i) and "wb<i>s<tag>" (on the bridge).
struct Bed {
  std::string id, tag, logDir;
  int subnet = 0;
  bool up = false;
  std::string ns(int h) const { return "weftbed-" + id + "-h" + std::to_string(h); }
  std::string sw() const { return "weftbed-" + id + "-sw"; }
  std::string hostIf(int h) const { return "wb" + std::to_string(h) + "h" + tag; }
  std::string swIf(int h) const { return "wb" + std::to_string(h) + "s" + tag; }
  std::string addr(int h) const { return "10.213." + std::to_string(subnet) + "." + std::to_string(h + 1); }

  Bed() {
    id = std::to_string(getpid());
    tag = std::to_string(getpid() % 100000);
    subnet = 100 + getpid() % 100;
  }
  ~Bed() { tearDown(); }

  void tearDown() {
    // Deleting a namespace deletes the veth ends inside it, and so the pairs.
    for (int h = 0; h < kHosts; ++h) sh("ip netns del " + ns(h));
    sh("ip netns del " + sw());
    if (!logDir.empty()) sh("rm -rf " + logDir);
    up = false;
  }

  // Namespaces of earlier runs whose process is gone.
  static void removeStale() {
    FILE* p = popen("ip netns list 2>/dev/null", "r");
    if (!p) return;
    char line[256];
    std::vector<std::string> stale;
    while (fgets(line, sizeof line, p)) {
      std::string n(line);
      n = n.substr(0, n.find_first_of(" \n"));
      if (n.rfind("weftbed-", 0) != 0) continue;
      int pid = atoi(n.c_str() + 8);
      if (pid > 0 && kill(pid, 0) != 0) stale.push_back(n);
    }
    pclose(p);
    for (const std::string& n : stale) sh("ip netns del " + n);
  }

  bool setUp(std::string* why) {
    removeStale();
    char tmpl[] = "/tmp/weft-bed-XXXXXX";
    if (!mkdtemp(tmpl)) {
      *why = "mkdtemp failed";
      return false;
    }
    logDir = tmpl;
    std::vector<std::string> cmds = {"ip netns add " + sw(),
                                     "ip -n " + sw() + " link add br0 type bridge",
                                     "ip -n " + sw() + " link set br0 up",
                                     "ip -n " + sw() + " link set lo up"};
    for (int h = 0; h < kHosts; ++h) {
      cmds.push_back("ip netns add " + ns(h));
      cmds.push_back("ip link add " + hostIf(h) + " netns " + ns(h) + " type veth peer name " +
                     swIf(h) + " netns " + sw());
      cmds.push_back("ip -n " + sw() + " link set " + swIf(h) + " master br0");
      cmds.push_back("ip -n " + sw() + " link set " + swIf(h) + " up");
      cmds.push_back("ip -n " + ns(h) + " addr add " + addr(h) + "/24 dev " + hostIf(h));
      cmds.push_back("ip -n " + ns(h) + " link set " + hostIf(h) + " up");
      cmds.push_back("ip -n " + ns(h) + " link set lo up");
    }
    for (const std::string& c : cmds)
      if (sh(c) != 0) {
        *why = "'" + c + "' failed";
        return false;
      }
    up = true;
    return true;
  }
};

bool canCreateNamespaces(std::string* why) {
  if (geteuid() != 0) {
    *why = "needs root to create network namespaces";
    return false;
  }
  if (sh("ip netns list") != 0) {
    *why = "needs iproute2 (ip netns)";
    return false;
  }
  return true;
}

std::string everyCollective(weft_comm_t c, int r, int n) {
  for (Coll coll : kAllColls)
    for (weft_datatype_t dt : {WEFT_INT32, WEFT_FLOAT32})
      for (size_t count : {size_t(1), size_t(777), size_t(70000)})
        for (bool inPlace : {false, true}) {
          weft_op_t op = dt == WEFT_INT32 ? WEFT_MAX : WEFT_SUM;
          std::string e = runAndCheck(c, r, n, coll, dt, op, count, inPlace, static_cast<int>(count % n));
          if (!e.empty()) return std::string(collName(coll)) + ": " + e;
        }
  return "";
}

// A rank's part of a job (everyCollective unless given).
using JobBody = std::string (*)(weft_comm_t c, int r, int n);

// Runs the job: rank r in host r / kPerHost, with `env`. Returns "" or the
// ranks that failed; rank `victim` is meant to die of SIGKILL.
std::string runJob(const Bed& bed, const std::string& run, const std::vector<std::string>& env,
                   JobBody body = everyCollective, int victim = -1) {
  const int n = kHosts * kPerHost;
  int idPipe[2];
  if (pipe(idPipe) != 0) return "pipe failed";
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(150);
      const int host = r / kPerHost;
      int fd = open(("/var/run/netns/" + bed.ns(host)).c_str(), O_RDONLY);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(10);
      // As `ip netns exec` does: a private /sys showing this namespace's
      // interfaces (UCX lists network devices from /sys/class/net).
      if (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0 ||
          umount2("/sys", MNT_DETACH) != 0 || mount(bed.ns(host).c_str(), "/sys", "sysfs", 0, nullptr) != 0)
        _exit(16);
      setenv("WEFT_SOCKET_IFNAME", "^lo", 1);
      setenv("UCX_NET_DEVICES", bed.hostIf(host).c_str(), 1);
      setenv("WEFT_DEBUG", "INFO", 1);
      setenv("WEFT_DEBUG_SUBSYS", "INIT", 1);
      setenv("WEFT_TIMEOUT_S", "60", 1);
      setenv("WEFT_BOOTSTRAP_TIMEOUT_S", "30", 1);
      setenv("WEFT_DEBUG_FILE", (bed.logDir + "/" + run + "-" + std::to_string(r)).c_str(), 1);
      for (const std::string& e : env) putenv(strdup(e.c_str()));
      weft_unique_id_t id;
      if (r == 0) {
        if (weft_get_unique_id(&id) != WEFT_SUCCESS) _exit(11);
        for (int k = 1; k < n; ++k)
          if (write(idPipe[1], &id, sizeof id) != sizeof id) _exit(12);
      } else if (read(idPipe[0], &id, sizeof id) != sizeof id) {
        _exit(13);
      }
      weft_comm_t c = nullptr;
      if (weft_comm_init_rank(&c, n, id, r) != WEFT_SUCCESS) _exit(14);
      std::string e = body(c, r, n);
      if (!e.empty()) fprintf(stderr, "rank %d (%s): %s\n", r, run.c_str(), e.c_str());
      if (victim >= 0)
        weft_comm_abort(c);  // revoked: nothing to wait for
      else
        weft_comm_destroy(c);
      _exit(e.empty() ? 0 : 15);
    }
    pids.push_back(pid);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  std::string out;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (r == victim && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) continue;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      out += "rank " + std::to_string(r) + " status " + std::to_string(st) + "; ";
  }
  return out;
}

// Rank 3 (on the second host) is killed in the middle of an allreduce; the
// five survivors revoke, shrink with no outside rendezvous, and run every
// collective on the new communicator.
std::string killedAndShrunk(weft_comm_t c, int r, int n) {
  std::vector<float> v(1 << 16, 1.0f);
  if (weft_allreduce(v.data(), v.data(), v.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr))
    return std::string("first allreduce: ") + weft_get_last_error(c);
  if (r == 3) {
    usleep(300 * 1000);
    raise(SIGKILL);
  }
  if (weft_allreduce(v.data(), v.data(), v.size(), WEFT_FLOAT32, WEFT_SUM, c, nullptr) == WEFT_SUCCESS)
    return "the allreduce succeeded with rank 3 dead";
  weft_comm_revoke(c);
  weft_comm_t nc = nullptr;
  if (weft_comm_shrink(c, nullptr, 0, &nc) != WEFT_SUCCESS)
    return std::string("shrink: ") + weft_get_last_error(c);
  int nr = -1, nn = 0;
  weft_comm_rank(nc, &nr);
  weft_comm_size(nc, &nn);
  std::string e;
  if (nn != n - 1 || nr != (r < 3 ? r : r - 1))
    e = "shrunk to rank " + std::to_string(nr) + " of " + std::to_string(nn);
  else
    e = everyCollective(nc, nr, nn);
  weft_comm_destroy(nc);
  return e;
}

// Every rank's "transports per peer" line: shm to its host mate, `net` to
// the ranks of the other hosts.
void checkTransports(const Bed& bed, const std::string& run, const std::string& net) {
  const int n = kHosts * kPerHost;
  for (int r = 0; r < n; ++r) {
    std::string log = readFile(bed.logDir + "/" + run + "-" + std::to_string(r));
    std::string want;
    for (int p = 0; p < n; ++p) {
      const char* t = p == r ? "self" : p / kPerHost == r / kPerHost ? "shm" : net.c_str();
      want += (p ? " " : "") + std::to_string(p) + ":" + t;
    }
    INFO("rank " << r << " log:\n" << log);
    CHECK(log.find("transports per peer " + want) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("multi-host bed: 3 namespaces x 2 ranks - every collective over tcp and ucx, shm inside",
          "[coll][netns][multihost][processes]") {
  std::string why;
  if (!canCreateNamespaces(&why)) {
    WARN("skipped: " + why);
    return;
  }
  Bed bed;
  if (!bed.setUp(&why)) {
    bed.tearDown();
    FAIL("could not build the bed: " << why);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"tcp", {"WEFT_TRANSPORTS=shm,tcp"}}};
#ifdef WEFT_HAVE_UCX
  runs.push_back({"ucx", {"WEFT_TRANSPORTS=shm,ucx", "UCX_TLS=tcp"}});
#else
  WARN("ucx not built: only tcp between hosts");
#endif
  for (auto& run : runs) {
    INFO("between hosts: " << run.first);
    std::string err = runJob(bed, run.first, run.second);
    CHECK(err == "");
    checkTransports(bed, run.first, run.first);
  }
  // The hierarchical allreduce, forced, over shm inside the hosts and each
  // network transport between them; the TRACE log shows it ran.
  for (auto& run : runs) {
    const std::string name = run.first + "-hier";
    INFO("hierarchical allreduce, between hosts: " << run.first);
    std::vector<std::string> env = run.second;
    for (const char* e : {"WEFT_ALGO=allreduce:hier", "WEFT_DEBUG=TRACE", "WEFT_DEBUG_SUBSYS=INIT,COLL"})
      env.push_back(e);
    std::string err = runJob(bed, name, env);
    CHECK(err == "");
    checkTransports(bed, name, run.first);
    std::string log = readFile(bed.logDir + "/" + name + "-3");
    CHECK(log.find("algorithm hier,") != std::string::npos);
  }
  // Elastic: a rank of the second host killed; the survivors shrink
  // (docs/elastic.md), over each network transport.
  for (auto& run : runs) {
    const std::string name = run.first + "-shrink";
    INFO("a rank killed, the survivors shrink; between hosts: " << run.first);
    std::vector<std::string> env = run.second;
    env.push_back("WEFT_SHRINK_TIMEOUT_S=10");
    CHECK(runJob(bed, name, env, killedAndShrunk, 3) == "");
  }
}
