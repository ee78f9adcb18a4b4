// Launch paths: weft_comm_init_env under each launcher's variables, and
// ranks in different network namespaces (hosts) of this machine over tcp.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include "coll/check.h"

using namespace wtest;

namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Forks n children with `envFor(rank)` set; each joins with
// weft_comm_init_env and runs an allreduce.
std::string runEnv(int n, const std::function<std::vector<std::string>(int)>& envFor) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      for (auto& e : envFor(r)) putenv(strdup(e.c_str()));
      weft_comm_t c = nullptr;
      if (weft_comm_init_env(&c) != WEFT_SUCCESS) _exit(2);
      int rank = -1, size = -1;
      weft_comm_rank(c, &rank);
      weft_comm_size(c, &size);
      if (rank != r || size != n) _exit(3);
      std::string e = runAndCheck(c, rank, n, Coll::AllReduce, WEFT_FLOAT32, WEFT_SUM, 10000, false, 0);
      weft_comm_destroy(c);
      _exit(e.empty() ? 0 : 4);
    }
    pids.push_back(pid);
  }
  std::string out;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      out += "rank " + std::to_string(r) + " status " + std::to_string(st) + "; ";
  }
  return out;
}

bool haveRootAndIp() { return geteuid() == 0 && system("ip netns list >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("launch: weft_comm_init_env with WEFT_* - torchrun - Open MPI and SLURM variables",
          "[launch][processes]") {
  const int n = 3;
  std::string port = std::to_string(freePort());
  CHECK(runEnv(n, [&](int r) {
          return std::vector<std::string>{"WEFT_RANK=" + std::to_string(r), "WEFT_NRANKS=3",
                                          "WEFT_ROOT_ADDR=127.0.0.1:" + port};
        }) == "");
  port = std::to_string(freePort());
  CHECK(runEnv(n, [&](int r) {
          return std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=3",
                                          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
        }) == "");
  port = std::to_string(freePort());
  CHECK(runEnv(n, [&](int r) {
          return std::vector<std::string>{"OMPI_COMM_WORLD_RANK=" + std::to_string(r),
                                          "OMPI_COMM_WORLD_SIZE=3", "WEFT_ROOT_ADDR=127.0.0.1:" + port};
        }) == "");
  port = std::to_string(freePort());
  CHECK(runEnv(n, [&](int r) {
          return std::vector<std::string>{"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=3",
                                          "MASTER_ADDR=localhost", "MASTER_PORT=" + port};
        }) == "");
}

TEST_CASE("launch: init_env without a launcher says what is missing", "[launch][errors]") {
  for (const char* v : {"WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) unsetenv(v);
  weft_comm_t c = nullptr;
  CHECK(weft_comm_init_env(&c) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(nullptr)).find("WEFT_RANK") != std::string::npos);
  ScopedEnv a("WEFT_RANK", "0"), b("WEFT_NRANKS", "2");
  CHECK(weft_comm_init_env(&c) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(nullptr)).find("WEFT_ROOT_ADDR") != std::string::npos);
}

// Two network namespaces joined by a veth pair, with test-only addresses
// that exist only inside them: ranks 0,1 in host A, ranks 2,3 in host B.
// Inside a host the ranks use shm, across hosts tcp.
TEST_CASE("launch: ranks on two hosts (network namespaces) over tcp",
          "[launch][netns][processes]") {
  if (!haveRootAndIp()) {
    WARN("skipped: needs root and iproute2 to create network namespaces");
    return;
  }
  const std::string a = "weftA" + std::to_string(getpid()), b = "weftB" + std::to_string(getpid());
  auto sh = [](const std::string& cmd) { return system((cmd + " >/dev/null 2>&1").c_str()); };
  auto cleanup = [&] {
    sh("ip netns del " + a);
    sh("ip netns del " + b);
  };
  cleanup();
  bool ok = sh("ip netns add " + a) == 0 && sh("ip netns add " + b) == 0 &&
            sh("ip link add va" + std::to_string(getpid() % 10000) + " netns " + a + " type veth peer name vb" +
               std::to_string(getpid() % 10000) + " netns " + b) == 0;
  const std::string va = "va" + std::to_string(getpid() % 10000), vb = "vb" + std::to_string(getpid() % 10000);
  ok = ok && sh("ip -n " + a + " addr add 10.213.7.1/24 dev " + va) == 0 &&
       sh("ip -n " + b + " addr add 10.213.7.2/24 dev " + vb) == 0 &&
       sh("ip -n " + a + " link set " + va + " up") == 0 && sh("ip -n " + b + " link set " + vb + " up") == 0 &&
       sh("ip -n " + a + " link set lo up") == 0 && sh("ip -n " + b + " link set lo up") == 0;
  if (!ok) {
    cleanup();
    WARN("skipped: could not create network namespaces here");
    return;
  }
  // Rank 0 makes the id inside host A and hands it over a pipe.
  int idPipe[2];
  REQUIRE(pipe(idPipe) == 0);
  const int n = 4;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      std::string ns = "/var/run/netns/" + (r < 2 ? a : b);
      int fd = open(ns.c_str(), O_RDONLY);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(10);
      // Inside the namespace only lo and the veth exist; avoid lo.
      setenv("WEFT_SOCKET_IFNAME", "^lo", 1);
      setenv("WEFT_DEBUG", "INFO", 1);
      setenv("WEFT_DEBUG_SUBSYS", "INIT", 1);
      std::string logf = "/tmp/weft-netns-" + std::to_string(getppid()) + "-" + std::to_string(r) + ".log";
      setenv("WEFT_DEBUG_FILE", logf.c_str(), 1);
      weft_unique_id_t id;
      if (r == 0) {
        if (weft_get_unique_id(&id) != WEFT_SUCCESS) _exit(11);
        for (int k = 1; k < n; ++k)
          if (write(idPipe[1], &id, sizeof id) != sizeof id) _exit(12);
      } else {
        if (read(idPipe[0], &id, sizeof id) != sizeof id) _exit(13);
      }
      weft_comm_t c = nullptr;
      if (weft_comm_init_rank(&c, n, id, r) != WEFT_SUCCESS) _exit(14);
      std::string e;
      for (Coll coll : kAllColls)
        if (e.empty()) e = runAndCheck(c, r, n, coll, WEFT_FLOAT32, WEFT_SUM, 70000, false, 1);
      weft_comm_destroy(c);
      _exit(e.empty() ? 0 : 15);
    }
    pids.push_back(pid);
  }
  std::string out;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) out += "rank " + std::to_string(r) + " status " + std::to_string(st) + "; ";
  }
  cleanup();
  CHECK(out == "");
  // Rank 0's log shows shm to its host mate and tcp to the other host.
  std::string logf = "/tmp/weft-netns-" + std::to_string(getpid()) + "-0.log";
  FILE* f = fopen(logf.c_str(), "r");
  REQUIRE(f != nullptr);
  std::string log;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) log.append(buf, k);
  fclose(f);
  for (int r = 0; r < n; ++r) unlink(("/tmp/weft-netns-" + std::to_string(getpid()) + "-" + std::to_string(r) + ".log").c_str());
  INFO(log);
  CHECK(log.find("0:self 1:shm 2:tcp 3:tcp") != std::string::npos);
}
