/* perf/compare.d/limits.c: what this machine allows at best, to read the
 * collective figures against. Prints one "key value" line per measure
 * (perf/compare parses them), each followed by a comment:
 *
 *   memcpy_gbps       single-thread memcpy of 64 MiB, GB/s copied (best run)
 *   add_gbps          single-thread a[i] += b[i] over 64 MiB float arrays,
 *                     GB/s of a (memory traffic is three times that; best run)
 *   tcp_stream_gbps   one TCP loopback stream of 4 MiB send()s, GB/s received
 *                     (best of three windows)
 *   tcp_pingpong_us   8-byte TCP loopback ping-pong, half round trip, blocking recv
 *                     (best of three windows)
 *   tcp_poll_us       the same with recv(MSG_DONTWAIT) spinning instead of sleeping
 *   shm_pingpong_us   one cache line bounced between two spinning processes
 *                     through shared memory, half round trip (best window)
 *
 * Usage: limits [-t SECONDS]   (time per measure, default 0.5)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG ((size_t)64 << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void* big_buffer(unsigned char fill) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, BIG) != 0) {
    fprintf(stderr, "limits: out of memory\n");
    exit(1);
  }
  memset(p, fill, BIG);
  return p;
}

/* Runs fn repeatedly for about `seconds` (at least 3 times); returns the
 * best bytes-per-second figure, counting `bytes` per run. */
static double best_rate(void (*fn)(void*, void*), void* a, void* b, size_t bytes, double seconds) {
  double best = 0, start = now_s();
  int runs = 0;
  while (runs < 3 || now_s() - start < seconds) {
    double t0 = now_s(), dt;
    fn(a, b);
    dt = now_s() - t0;
    if (dt > 0 && bytes / dt > best) best = bytes / dt;
    ++runs;
  }
  return best;
}

static void do_memcpy(void* dst, void* src) {
  memcpy(dst, src, BIG);
  __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep the copy */
}

static void do_add(void* a_, void* b_) {
  float* a = (float*)a_;
  const float* b = (const float*)b_;
  size_t i, n = BIG / sizeof(float);
  for (i = 0; i < n; ++i) a[i] += b[i];
  __asm__ __volatile__("" : : "r"(a) : "memory");
}

/* A listening socket on 127.0.0.1 with a kernel-chosen port. */
static int listen_lo(int* port) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    perror("limits: listen");
    exit(1);
  }
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_lo(int port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("limits: connect");
    _exit(1);
  }
  return fd;
}

static void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int wait_child(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The child sends 4 MiB chunks for `seconds`; the parent receives and times
 * from the first byte to the end of the stream. */
static double tcp_stream(double seconds) {
  const size_t chunk = (size_t)4 << 20;
  int port, lfd = listen_lo(&port), fd;
  char* buf;
  double t0 = 0, t1;
  size_t total = 0;
  pid_t pid = fork();
  if (pid == 0) {
    char* src = (char*)malloc(chunk);
    int c = connect_lo(port);
    double start = now_s();
    memset(src, 7, chunk);
    while (now_s() - start < seconds) {
      size_t off = 0;
      while (off < chunk) {
        ssize_t k = send(c, src + off, chunk - off, 0);
        if (k <= 0) _exit(1);
        off += (size_t)k;
      }
    }
    close(c);
    _exit(0);
  }
  fd = accept(lfd, NULL, NULL);
  close(lfd);
  buf = (char*)malloc(chunk);
  for (;;) {
    ssize_t k = recv(fd, buf, chunk, 0);
    if (k <= 0) break;
    if (total == 0) t0 = now_s();
    total += (size_t)k;
  }
  t1 = now_s();
  close(fd);
  free(buf);
  wait_child(pid);
  return t1 > t0 && total > 0 ? total / (t1 - t0) : 0;
}

/* Receives exactly n bytes; spins on MSG_DONTWAIT when poll is set. */
static int recv_all(int fd, char* p, size_t n, int poll) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = recv(fd, p + got, n - got, poll ? MSG_DONTWAIT : 0);
    if (k > 0) got += (size_t)k;
    else if (k == 0) return -1;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
  }
  return 0;
}

/* 8-byte ping-pong; the parent decides when to stop (a message whose
 * first byte is 1) after about `seconds`. Returns the half round trip. */
static double tcp_pingpong(double seconds, int poll) {
  int port, lfd = listen_lo(&port), fd;
  char msg[8];
  long trips = 0;
  double t0;
  pid_t pid = fork();
  if (pid == 0) {
    int c = connect_lo(port);
    no_delay(c);
    for (;;) {
      if (recv_all(c, msg, sizeof msg, poll) != 0) _exit(1);
      if (send(c, msg, sizeof msg, 0) != (ssize_t)sizeof msg) _exit(1);
      if (msg[0] == 1) break;
    }
    close(c);
    _exit(0);
  }
  fd = accept(lfd, NULL, NULL);
  close(lfd);
  no_delay(fd);
  memset(msg, 0, sizeof msg);
  for (trips = 0; trips < 50; ++trips) { /* warm up the path */
    send(fd, msg, sizeof msg, 0);
    recv_all(fd, msg, sizeof msg, poll);
  }
  t0 = now_s();
  for (trips = 0;; ++trips) {
    int last = (trips & 63) == 0 && now_s() - t0 > seconds;
    msg[0] = (char)last;
    if (send(fd, msg, sizeof msg, 0) != (ssize_t)sizeof msg) break;
    if (recv_all(fd, msg, sizeof msg, poll) != 0) break;
    if (last) {
      ++trips;
      break;
    }
  }
  {
    double dt = now_s() - t0;
    close(fd);
    wait_child(pid);
    return trips > 0 ? dt / (2.0 * trips) : 0;
  }
}

/* A shared cache line holds a counter: the parent turns it odd, the child
 * even, each spinning until it is its turn. A window stops (the parent
 * writes STOP) after `seconds`; the best of three windows is returned. */
#define STOP_TURN UINT64_MAX
struct shared_line {
  volatile uint64_t turn __attribute__((aligned(64)));
};

static double shm_pingpong(double seconds) {
  double best = 0;
  int w;
  for (w = 0; w < 3; ++w) {
    struct shared_line* s = (struct shared_line*)mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint64_t k;
    double t0, dt;
    pid_t pid;
    if (s == MAP_FAILED) return 0;
    __atomic_store_n(&s->turn, 0, __ATOMIC_RELEASE);
    pid = fork();
    if (pid == 0) {
      for (;;) {
        uint64_t t;
        while (((t = __atomic_load_n(&s->turn, __ATOMIC_ACQUIRE)) & 1) == 0)
          __builtin_ia32_pause();
        if (t == STOP_TURN) _exit(0);
        __atomic_store_n(&s->turn, t + 1, __ATOMIC_RELEASE);
      }
    }
    t0 = now_s();
    for (k = 0;; ++k) {
      while (__atomic_load_n(&s->turn, __ATOMIC_ACQUIRE) != 2 * k) __builtin_ia32_pause();
      if ((k & 1023) == 0 && now_s() - t0 > seconds) break;
      __atomic_store_n(&s->turn, 2 * k + 1, __ATOMIC_RELEASE);
    }
    dt = now_s() - t0;
    __atomic_store_n(&s->turn, STOP_TURN, __ATOMIC_RELEASE);
    wait_child(pid);
    munmap(s, 4096);
    if (k > 0 && (best == 0 || dt / (2.0 * k) < best)) best = dt / (2.0 * k);
  }
  return best;
}

/* Limits are ceilings (or floors): other work on the machine can only make
 * a window look worse, so each figure is the best of three short windows. */
static double best_of3(double (*fn)(double, int), double seconds, int arg, int lower_is_better) {
  double best = 0;
  int w;
  for (w = 0; w < 3; ++w) {
    double v = fn(seconds / 3, arg);
    if (v > 0 && (best == 0 || (lower_is_better ? v < best : v > best))) best = v;
  }
  return best;
}

static double tcp_stream_w(double seconds, int unused) {
  (void)unused;
  return tcp_stream(seconds);
}

int main(int argc, char** argv) {
  double sec = 0.5;
  void *a, *b;
  if (argc == 3 && !strcmp(argv[1], "-t")) sec = atof(argv[2]);
  else if (argc != 1) {
    fprintf(stderr, "usage: %s [-t SECONDS]\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  a = big_buffer(1);
  b = big_buffer(2);
  printf("memcpy_gbps %.2f  # single-thread memcpy of 64 MiB, best run\n",
         best_rate(do_memcpy, a, b, BIG, sec) / 1e9);
  fflush(stdout);
  memset(a, 0, BIG);
  printf("add_gbps %.2f  # single-thread a += b, 64 MiB float arrays, GB/s of a, best run\n",
         best_rate(do_add, a, b, BIG, sec) / 1e9);
  fflush(stdout);
  free(a);
  free(b);
  printf("tcp_stream_gbps %.2f  # one TCP loopback stream, 4 MiB send()s\n",
         best_of3(tcp_stream_w, sec, 0, 0) / 1e9);
  fflush(stdout);
  printf("tcp_pingpong_us %.2f  # 8 B TCP loopback ping-pong, half round trip, blocking recv\n",
         best_of3(tcp_pingpong, sec, 0, 1) * 1e6);
  fflush(stdout);
  printf("tcp_poll_us %.2f  # same, recv(MSG_DONTWAIT) spinning\n", best_of3(tcp_pingpong, sec, 1, 1) * 1e6);
  fflush(stdout);
  printf("shm_pingpong_us %.3f  # cache line between two spinning processes, half round trip\n",
         shm_pingpong(sec / 3) * 1e6); /* three windows inside */
  return 0;
}
