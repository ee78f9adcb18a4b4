// Ranks as processes for the fault-tolerance tests (test_elastic.cc): like
// runProcesses (harness.h), but a rank may die or stop on purpose, the
// survivors' reports are read first, and stopped ranks are then continued
// (SIGCONT) so that what they do after waking is checked too. Extra
// processes (ranks that join later, by weft_comm_grow) run a body of their own.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/harness.h"

namespace wtest {

using JoinBody = std::function<std::string(int index)>;

struct ElasticRun {
  int nranks = 4;
  Body body;                       // every rank of the first comm
  std::vector<int> stopped;        // ranks that SIGSTOP themselves: continued at the end
  std::vector<JoinBody> joiners;   // extra processes (no comm of their own at start)
  std::vector<std::string> env;
  int timeoutS = 120;              // the whole run (alarm in each child)
};

// `body` on existing comms, one thread per rank; "" when all succeeded.
inline std::string runThreadsOn(const std::vector<weft_comm_t>& comms, const Body& body) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { errs[i] = body(comms[i], i, n); });
  for (auto& t : ts) t.join();
  std::string all;
  for (int i = 0; i < n; ++i)
    if (!errs[i].empty()) all += "rank " + std::to_string(i) + ": " + errs[i] + "\n";
  return all;
}

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs it; returns "rank i: <report>" lines for every rank whose body
// failed or that died, except ranks that were meant to die: those are
// listed in *died ("rank i: killed by signal 9").
inline std::string runElastic(const ElasticRun& run, std::string* died = nullptr) {
  // Forked while this process has one thread (tests/fork_guard.h); the id
  // (whose bootstrap root is a thread) follows through a pipe.
  if (forkSkipped()) return "";
  std::string unsafe = awaitOneThread();
  if (!unsafe.empty()) return unsafe;
  const int total = run.nranks + static_cast<int>(run.joiners.size());
  std::vector<pid_t> pids(total);
  std::vector<int> fds(total), idFds(total, -1);
  for (int i = 0; i < total; ++i) {
    int p[2], q[2];
    if (pipe(p) != 0 || pipe(q) != 0) return "pipe failed";
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      close(q[1]);
      for (int j = 0; j < i; ++j) close(idFds[j]);
      alarm(static_cast<unsigned>(run.timeoutS));
      weft_unique_id_t id;
      size_t got = 0;
      while (got < sizeof id) {
        ssize_t k = read(q[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
        if (k <= 0) _exit(90);  // the parent could not create the id
        got += static_cast<size_t>(k);
      }
      close(q[0]);
      for (const std::string& e : run.env) putenv(strdup(e.c_str()));
      std::string err;
      if (i >= run.nranks) {
        err = run.joiners[i - run.nranks](i - run.nranks);
      } else {
        weft_comm_t comm = nullptr;
        weft_result_t rr = weft_comm_init_rank(&comm, run.nranks, id, i);
        if (rr != WEFT_SUCCESS) {
          err = "init: " + describe(rr, nullptr);
        } else {
          err = run.body(comm, i, run.nranks);
          weft_comm_abort(comm);  // the parent may be revoked or broken: no waiting
        }
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
  const bool haveId = weft_get_unique_id(&id) == WEFT_SUCCESS;
  for (int i = 0; i < total; ++i) {
    if (haveId && write(idFds[i], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
    }
    close(idFds[i]);
  }
  if (!haveId) {
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    return "weft_get_unique_id failed";
  }
  auto isStopped = [&](int i) {
    for (int s : run.stopped)
      if (s == i) return true;
    return false;
  };
  std::string all;
  auto collect = [&](int i) {
    std::string msg;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[i], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(k));
    close(fds[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (WIFSIGNALED(status)) {
      const std::string line =
          "rank " + std::to_string(i) + ": killed by signal " + std::to_string(WTERMSIG(status));
      if (WTERMSIG(status) == SIGKILL && died && msg.empty()) {
        *died += line + "\n";
        return;
      }
      msg += " (" + line + ")";
    } else if (WEXITSTATUS(status) != 0 && msg.empty()) {
      msg = "exit status " + std::to_string(WEXITSTATUS(status));
    }
    if (!msg.empty()) all += "rank " + std::to_string(i) + ": " + msg + "\n";
  };
  for (int i = 0; i < total; ++i)
    if (!isStopped(i)) collect(i);
  for (int i : run.stopped) {
    kill(pids[i], SIGCONT);
    collect(i);
  }
  return all;
}

}  // namespace wtest
