/* weft-dlopen-check: loads libweft.so or the NCCL shim the way a framework
 * does (dlopen(RTLD_NOW | RTLD_LOCAL), after other libraries, from a
 * process whose threads already exist) and uses it from those threads.
 *
 *   weft-dlopen-check weft LIB [PRELOAD...]   2 ranks as threads, an allreduce
 *   weft-dlopen-check nccl LIB [PRELOAD...]   version, unique id, error strings
 *
 * A library marked STATIC_TLS (initial-exec thread-locals) fails here with
 * "cannot allocate memory in static TLS block" once the process's spare
 * static TLS is used up; the check also reads the flag from the file itself,
 * so a library that happens to fit today still fails the test. Exit 0 on
 * success, 1 with a message on failure. */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*version_fn)(int *);
typedef int (*init_all_fn)(void **, int);
typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*destroy_fn)(void *);
typedef const char *(*last_error_fn)(void *);

static int fail(const char *what, const char *detail) {
  fprintf(stderr, "FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  return 1;
}

/* DF_STATIC_TLS in the file's dynamic section. -1 when it cannot be read. */
static int staticTlsFlag(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  Elf64_Ehdr eh;
  int flag = -1;
  if (fread(&eh, sizeof eh, 1, f) == 1 && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0) {
    for (int i = 0; i < eh.e_phnum && flag < 0; ++i) {
      Elf64_Phdr ph;
      if (fseek(f, (long)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize), SEEK_SET) != 0 ||
          fread(&ph, sizeof ph, 1, f) != 1)
        break;
      if (ph.p_type != PT_DYNAMIC) continue;
      flag = 0;
      for (Elf64_Off off = 0; off + sizeof(Elf64_Dyn) <= ph.p_filesz; off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        if (fseek(f, (long)(ph.p_offset + off), SEEK_SET) != 0 || fread(&d, sizeof d, 1, f) != 1)
          break;
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_FLAGS && (d.d_un.d_val & DF_STATIC_TLS)) flag = 1;
      }
    }
  }
  fclose(f);
  return flag;
}

/* ---- weft: two ranks on threads that were started before the dlopen ---- */

#define COUNT 4099
static pthread_barrier_t gLoaded;
static void *gComms[2];
static allreduce_fn gAllreduce;
static last_error_fn gLastError;

struct rank_arg {
  int rank;
  int result;
  char message[256];
};

static void *rankMain(void *p) {
  struct rank_arg *a = p;
  pthread_barrier_wait(&gLoaded); /* the library is loaded and the comms exist */
  float *buf = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; ++i) buf[i] = (float)(a->rank + 1) * (float)(i % 97);
  /* 7 = WEFT_FLOAT32, 0 = WEFT_SUM */
  a->result = gAllreduce(buf, buf, COUNT, 7, 0, gComms[a->rank], NULL);
  if (a->result != 0) {
    snprintf(a->message, sizeof a->message, "rank %d: %s", a->rank, gLastError(NULL));
  } else {
    for (int i = 0; i < COUNT; ++i) {
      if (buf[i] != 3.0f * (float)(i % 97)) {
        snprintf(a->message, sizeof a->message, "rank %d: element %d is %g, not %g", a->rank, i,
                 buf[i], 3.0 * (i % 97));
        a->result = -1;
        break;
      }
    }
  }
  /* A refused call from this thread: its message lands in this thread's TLS. */
  if (a->result == 0 && gAllreduce(buf, buf, COUNT, 99, 0, gComms[a->rank], NULL) == 0) {
    snprintf(a->message, sizeof a->message, "rank %d: datatype 99 was accepted", a->rank);
    a->result = -1;
  } else if (a->result == 0 && strstr(gLastError(NULL), "datatype") == NULL) {
    snprintf(a->message, sizeof a->message, "rank %d: last error \"%s\" does not name the datatype",
             a->rank, gLastError(NULL));
    a->result = -1;
  }
  free(buf);
  return NULL;
}

static int checkWeft(void *lib) {
  version_fn version = (version_fn)dlsym(lib, "weft_get_version");
  init_all_fn initAll = (init_all_fn)dlsym(lib, "weft_comm_init_all");
  destroy_fn destroy = (destroy_fn)dlsym(lib, "weft_comm_destroy");
  gAllreduce = (allreduce_fn)dlsym(lib, "weft_allreduce");
  gLastError = (last_error_fn)dlsym(lib, "weft_get_last_error");
  if (!version || !initAll || !destroy || !gAllreduce || !gLastError)
    return fail("dlsym of the weft API", dlerror());
  int v = 0;
  if (version(&v) != 0 || v <= 0) return fail("weft_get_version", NULL);
  if (initAll(gComms, 2) != 0) return fail("weft_comm_init_all", gLastError(NULL));
  pthread_barrier_wait(&gLoaded);
  return 0;
}

/* ---- the NCCL shim ----------------------------------------------------- */

static int checkNccl(void *lib) {
  version_fn version = (version_fn)dlsym(lib, "ncclGetVersion");
  int (*uniqueId)(void *) = (int (*)(void *))dlsym(lib, "ncclGetUniqueId");
  const char *(*errorString)(int) = (const char *(*)(int))dlsym(lib, "ncclGetErrorString");
  if (!version || !uniqueId || !errorString) return fail("dlsym of the NCCL API", dlerror());
  int v = 0;
  if (version(&v) != 0 || v < 22800) return fail("ncclGetVersion", "no NCCL 2.28+ version");
  char id[128];
  if (uniqueId(id) != 0) return fail("ncclGetUniqueId", NULL);
  if (version(NULL) == 0) return fail("ncclGetVersion(NULL)", "accepted");
  if (!errorString(4) || !*errorString(4)) return fail("ncclGetErrorString", "empty");
  printf("NCCL version code %d\n", v);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "weft") != 0 && strcmp(argv[1], "nccl") != 0)) {
    fprintf(stderr, "usage: %s weft|nccl LIB [PRELOAD...]\n", argv[0]);
    return 2;
  }
  const int isWeft = strcmp(argv[1], "weft") == 0;
  const char *path = argv[2];
  int flag = staticTlsFlag(path);
  if (flag < 0) return fail("cannot read the dynamic section of", path);
  if (flag > 0) return fail(path, "is marked STATIC_TLS (an initial-exec thread-local)");

  for (int i = 3; i < argc; ++i)
    if (!dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) return fail("preload", dlerror());

  /* Threads that exist before the library: their TLS blocks are allocated
   * without it, as in a framework's worker pool. */
  struct rank_arg args[2] = {{0, 0, ""}, {1, 0, ""}};
  pthread_t th[2];
  if (isWeft) {
    pthread_barrier_init(&gLoaded, NULL, 3);
    for (int r = 0; r < 2; ++r) pthread_create(&th[r], NULL, rankMain, &args[r]);
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail("dlopen", dlerror());
  int rc = isWeft ? checkWeft(lib) : checkNccl(lib);
  if (isWeft) {
    if (rc != 0) return rc; /* the rank threads still wait on the barrier */
    for (int r = 0; r < 2; ++r) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; ++r)
      if (args[r].result != 0) return fail("allreduce", args[r].message);
    destroy_fn destroy = (destroy_fn)dlsym(lib, "weft_comm_destroy");
    for (int r = 0; r < 2; ++r)
      if (destroy(gComms[r]) != 0) return fail("weft_comm_destroy", gLastError(NULL));
  }
  if (rc == 0) printf("OK: %s loads with dlopen(RTLD_NOW | RTLD_LOCAL) and works\n", path);
  return rc;
}
