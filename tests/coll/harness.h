// Runs N ranks of a test body, as threads of this process
// (weft_comm_init_all) or as forked processes (weft_get_unique_id in the
// parent, weft_comm_init_rank in each child), with a bound on the whole run.
// The body returns an empty string on success or a description of the
// first failure; the harness reports every rank's failure.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fork_guard.h"
#include "weft.h"

namespace wtest {

using Body = std::function<std::string(weft_comm_t comm, int rank, int nranks)>;

inline std::string describe(weft_result_t r, weft_comm_t comm) {
  return std::string(weft_get_error_string(r)) + ": " + weft_get_last_error(comm);
}

#define TRY_WEFT(call)                                                        \
  do {                                                                        \
    weft_result_t _r = (call);                                                \
    if (_r != WEFT_SUCCESS)                                                   \
      return std::string(#call) + " failed: " + wtest::describe(_r, nullptr); \
  } while (0)

// Ranks as threads; returns "" when every rank's body succeeded.
inline std::string runThreads(int n, const Body& body) {
  std::vector<weft_comm_t> comms(n);
  weft_result_t r = weft_comm_init_all(comms.data(), n);
  if (r != WEFT_SUCCESS) return "weft_comm_init_all: " + describe(r, nullptr);
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { errs[i] = body(comms[i], i, n); });
  for (auto& t : ts) t.join();
  std::string all;
  for (int i = 0; i < n; ++i) {
    weft_result_t d = weft_comm_destroy(comms[i]);
    if (d != WEFT_SUCCESS && errs[i].empty()) errs[i] = "destroy: " + describe(d, nullptr);
    if (!errs[i].empty()) all += "rank " + std::to_string(i) + ": " + errs[i] + "\n";
  }
  return all;
}

// Ranks as processes. Each child reports its error text through a pipe.
// `env` is set in the children before init ("NAME=VALUE" items);
// `beforeInit(rank)` runs in each child just before init (pinning, say).
// The children are forked while this process has one thread
// (tests/fork_guard.h); only then does the parent create the unique id
// (whose bootstrap root is a thread) and hand it to them through a pipe.
inline std::string runProcesses(int n, const Body& body, const std::vector<std::string>& env = {},
                                int timeoutS = 120,
                                const std::function<void(int)>& beforeInit = {}) {
  if (forkSkipped()) return "";
  std::string unsafe = awaitOneThread();
  if (!unsafe.empty()) return unsafe;
  std::vector<pid_t> pids(n);
  std::vector<int> fds(n), idFds(n);
  for (int i = 0; i < n; ++i) {
    int p[2], q[2];
    if (pipe(p) != 0) return "pipe failed";
    if (pipe(q) != 0) return "pipe failed";
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      close(q[1]);
      for (int j = 0; j < i; ++j) close(idFds[j]);
      alarm(static_cast<unsigned>(timeoutS));
      weft_unique_id_t id;
      size_t got = 0;
      while (got < sizeof id) {
        ssize_t k = read(q[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
        if (k <= 0) _exit(90);  // the parent could not create the id
        got += static_cast<size_t>(k);
      }
      close(q[0]);
      for (const std::string& e : env) putenv(strdup(e.c_str()));
      if (beforeInit) beforeInit(i);
      weft_comm_t comm = nullptr;
      std::string err;
      weft_result_t rr = weft_comm_init_rank(&comm, n, id, i);
      if (rr != WEFT_SUCCESS) {
        err = "init: " + describe(rr, nullptr);
      } else {
        err = body(comm, i, n);
        weft_result_t d = weft_comm_destroy(comm);
        if (d != WEFT_SUCCESS && err.empty()) err = "destroy: " + describe(d, nullptr);
      }
      if (write(p[1], err.data(), err.size()) < 0) {
      }
      close(p[1]);
      _exit(err.empty() ? 0 : 1);
    }
    close(p[1]);
    close(q[0]);
    pids[i] = pid;
    fds[i] = p[0];
    idFds[i] = q[1];
  }
  weft_unique_id_t id;
  weft_result_t r = weft_get_unique_id(&id);
  std::string all;
  if (r != WEFT_SUCCESS) all = "weft_get_unique_id: " + describe(r, nullptr) + "\n";
  for (int i = 0; i < n; ++i) {
    if (r == WEFT_SUCCESS && write(idFds[i], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
      all += "rank " + std::to_string(i) + ": cannot hand it the unique id\n";
    close(idFds[i]);
  }
  for (int i = 0; i < n; ++i) {
    std::string msg;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[i], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(k));
    close(fds[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (WIFSIGNALED(status))
      msg += " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
    else if (WEXITSTATUS(status) != 0 && msg.empty())
      msg = "exit status " + std::to_string(WEXITSTATUS(status));
    if (!msg.empty() && r == WEFT_SUCCESS) all += "rank " + std::to_string(i) + ": " + msg + "\n";
  }
  return all;
}

// The contents of every file matching a shell glob ("dir/log-*"), in glob
// order; empty when none match. For the ranks' WEFT_DEBUG_FILE logs.
inline std::string catFiles(const std::string& glob) {
  std::string all;
  FILE* p = popen(("cat " + glob + " 2>/dev/null").c_str(), "r");
  if (!p) return all;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) all.append(buf, k);
  pclose(p);
  return all;
}

// rm -rf path (no shell; errors ignored: a test's temporary files).
inline void removeTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

// Removes dir's files whose names start with `prefix` ("log-").
inline void removeFiles(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
}

// Sets an environment variable for the scope (threads tests).
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

}  // namespace wtest
