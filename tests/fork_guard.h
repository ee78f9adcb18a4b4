// The rule of the tests that fork ranks as processes: fork only while this
// process has one thread. A child forked beside a running thread inherits
// whatever lock that thread held at the instant of the fork (malloc's, a
// logger's, a sanitizer runtime's allocator) and may hang on it for ever;
// ThreadSanitizer refuses outright to start threads in such a child. So a
// harness forks its children first and only then starts weft (the unique
// id's bootstrap root thread) in the parent, and before the next batch of
// forks it waits for the threads of the last one to end (docs/sanitizers.md).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(WEFT_ASAN)
#define WEFT_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(WEFT_TSAN)
#define WEFT_TSAN 1
#endif
#endif

namespace wtest {

// The number of threads of this process (/proc/self/status), 0 if unknown.
inline int threadCount() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "Threads:", 8) == 0) {
      n = atoi(line + 8);
      break;
    }
  fclose(f);
  return n;
}

// Waits up to limitS seconds for this process to be down to its one thread
// (a bootstrap root still flushing its rank table, a worker being joined).
// Returns "" when it is, else a sentence for the test's failure. Enforced in
// sanitizer builds, where a forked child does hang on a lock it inherited;
// elsewhere glibc's malloc is fork-safe, and coll.async-local-steps (every
// test case in one process) forks beside bootstrap roots that earlier test
// cases left waiting for ranks that never come (unused unique ids).
inline std::string awaitOneThread(double limitS = 30) {
#if !defined(WEFT_ASAN) && !defined(WEFT_TSAN)
  (void)limitS;
  return "";
#endif
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limitS);
  int n = threadCount();
  while (n > 1 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    n = threadCount();
  }
  if (n <= 1) return "";
  return "cannot fork the ranks: " + std::to_string(n - 1) +
         " other threads still alive in the test process after " +
         std::to_string(static_cast<int>(limitS)) +
         " s (tests/fork_guard.h)";
}

// WEFT_TEST_NO_FORK=1, set for the ThreadSanitizer run (tests/CMakeLists.txt,
// docs/sanitizers.md): the harnesses skip their ranks-as-processes runs
// (they pass without running), saying so on stderr; the ranks-as-threads
// runs of the same test cases still run.
inline bool forkSkipped() {
  const char* v = getenv("WEFT_TEST_NO_FORK");
  if (!v || !*v || strcmp(v, "0") == 0) return false;
  fprintf(stderr, "WEFT_TEST_NO_FORK: ranks as processes skipped\n");
  return true;
}

}  // namespace wtest
