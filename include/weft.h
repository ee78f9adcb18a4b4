/*
 * weft.h — the public C API of weft, a collective communication library.
 *
 * C99, usable from C and C++. Every call returns a weft_result_t unless noted.
 * On any error the call sets a human-readable message, readable with
 * weft_get_last_error(comm) (or weft_get_last_error(NULL) for the calling
 * thread), and writes no user buffer.
 *
 * Memory ownership: weft never takes ownership of user buffers; buffers passed
 * to a collective must stay valid until the collective completes (for a call
 * outside a group on host memory with stream NULL: until the call returns; in
 * a group: until weft_group_end returns, or until the request of
 * weft_group_end_async completes).
 *
 * Threads: a communicator may be used by one thread at a time; different
 * communicators may be driven concurrently by different threads (as NCCL).
 * Group state (weft_group_start/end) is per thread.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
#define WEFT_VERSION_CODE (WEFT_MAJOR * 10000 + WEFT_MINOR * 100 + WEFT_PATCH)

#define WEFT_UNIQUE_ID_BYTES 128

/* An opaque communicator: a group of ranks that run collectives together. */
typedef struct weft_comm *weft_comm_t;
/* An opaque handle on nonblocking work started by weft_group_end_async. */
typedef struct weft_request *weft_request_t;
/* A cudaStream_t for device memory; NULL for host memory. */
typedef void *weft_stream_t;

/* The rendezvous token: the root's address and a random job secret. Created
 * once by weft_get_unique_id and handed to every rank out of band. */
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weft_unique_id_t;

typedef enum {
  WEFT_SUCCESS = 0,
  WEFT_ERR_INVALID_ARGUMENT = 1, /* a bad argument: NULL, out of range, ... */
  WEFT_ERR_INVALID_USAGE = 2,    /* a bad call sequence: destroyed comm, mismatched group, ... */
  WEFT_ERR_SYSTEM = 3,           /* the OS refused: socket, mmap, out of memory ... */
  WEFT_ERR_INTERNAL = 4,         /* a weft bug */
  WEFT_ERR_REMOTE = 5,           /* a peer failed or vanished */
  WEFT_ERR_TIMEOUT = 6,          /* a wait ran past its bound (WEFT_TIMEOUT_S) */
  WEFT_ERR_CUDA = 7,             /* a CUDA call failed, or CUDA is unavailable */
  WEFT_ERR_ABORTED = 8,          /* the communicator was aborted */
  WEFT_IN_PROGRESS = 9,          /* not an error: nonblocking work still running */
  WEFT_ERR_REVOKED = 10          /* the communicator was revoked: shrink it or destroy it */
} weft_result_t;

/* Values equal to NCCL's ncclDataType_t. */
typedef enum {
  WEFT_INT8 = 0,
  WEFT_UINT8 = 1,
  WEFT_INT32 = 2,
  WEFT_UINT32 = 3,
  WEFT_INT64 = 4,
  WEFT_UINT64 = 5,
  WEFT_FLOAT16 = 6,
  WEFT_FLOAT32 = 7,
  WEFT_FLOAT64 = 8,
  WEFT_BFLOAT16 = 9,
  WEFT_FP8_E4M3 = 10,
  WEFT_FP8_E5M2 = 11,
  WEFT_NUM_DATATYPES = 12
} weft_datatype_t;

/* SUM .. AVG have NCCL's ncclRedOp_t values. AVG = SUM / nranks. MIN and
 * MAX of floating types follow IEEE fmin/fmax: a NaN loses to a number, and
 * two NaNs give NaN. Integer SUM and PROD wrap around. BAND, BOR and BXOR
 * (bitwise and, or, xor; NCCL has none) take integer datatypes only: on a
 * floating type they are INVALID_ARGUMENT. Values from WEFT_NUM_OPS up are
 * ops made by weft_op_create_premul_sum on one communicator, or by
 * weft_op_create_wire (from 1 << 30). */
typedef enum {
  WEFT_SUM = 0,
  WEFT_PROD = 1,
  WEFT_MAX = 2,
  WEFT_MIN = 3,
  WEFT_AVG = 4,
  WEFT_BAND = 5,
  WEFT_BOR = 6,
  WEFT_BXOR = 7,
  WEFT_NUM_OPS = 8,
  /* Not an op: makes every int value up to here a valid weft_op_t in C++
   * (the ops weft hands out are above WEFT_NUM_OPS), as ncclMaxRedOp does. */
  WEFT_MAX_OP = 0x7fffffff
} weft_op_t;

/* Where the scalar of a pre-multiplied sum is read (NCCL's
 * ncclScalarResidence_t values): at each call through the pointer
 * (DEVICE; weft reads it on the host, so it must be host memory), or once,
 * when the op is created (HOST_IMMEDIATE). */
typedef enum {
  WEFT_SCALAR_DEVICE = 0,
  WEFT_SCALAR_HOST_IMMEDIATE = 1
} weft_scalar_residence_t;

/* ---- Version and errors ------------------------------------------------ */

/* Writes major*10000 + minor*100 + patch. Errors: INVALID_ARGUMENT if NULL. */
weft_result_t weft_get_version(int *version);
/* What this build of weft has, as one static line of `key=value` fields:
 * "version=0.1.0 transports=self,shm,tcp,ucx cuda=yes". `transports` lists
 * those compiled in (which of them a run uses depends on the peers and
 * WEFT_TRANSPORTS); `cuda=yes` means built with CUDA, not that a device is
 * usable now. Never NULL. `weftrun --check-build` prints it. */
const char *weft_get_build_info(void);
/* A static string naming a result code; never NULL. */
const char *weft_get_error_string(weft_result_t result);
/* The last error message: of `comm` when non-NULL (whichever thread's call
 * on it failed last), else of the calling thread. Empty string when there
 * was none. The string is owned by weft: a copy for the calling thread,
 * valid until its next weft call. */
const char *weft_get_last_error(weft_comm_t comm);

/* ---- Communicators ----------------------------------------------------- */

/* Creates a unique id: opens the rendezvous root on this process (address
 * from WEFT_SOCKET_IFNAME or the first usable interface) and draws a random
 * 64-bit job secret. Call once per communicator, on one process; the root
 * serves exactly one rendezvous, bounded by WEFT_BOOTSTRAP_TIMEOUT_S.
 * Errors: INVALID_ARGUMENT (NULL), SYSTEM (no interface / socket). */
weft_result_t weft_get_unique_id(weft_unique_id_t *id);

/* Joins communicator `id` as `rank` of `nranks`. Collective over all ranks;
 * blocks until every rank joined and connected, or the bootstrap timeout.
 * On success *comm is owned by the caller (weft_comm_destroy).
 * Errors: INVALID_ARGUMENT (NULL comm, nranks < 1 or above 4194304 (2^22),
 * rank outside [0, nranks), an id not made by weft_get_unique_id), TIMEOUT,
 * REMOTE, SYSTEM. */
weft_result_t weft_comm_init_rank(weft_comm_t *comm, int nranks, weft_unique_id_t id, int rank);

/* Settings for one communicator, overriding the environment's (WEFT_*) for
 * it alone. Initialise with WEFT_CONFIG_INITIALIZER, then set what you need;
 * `size` lets later versions add fields without breaking older callers. A
 * field left at its initial value (0) takes the environment's value. */
/* Reproducible reductions (WEFT_REPRO; docs/reproducibility.md): how a
 * float SUM / AVG / PROD allreduce, reduce or reduce_scatter is computed.
 * OFF: the fastest algorithm's order. ORDERED: every element is the serial
 * fold over ranks 0..n-1 (float16, bfloat16 and fp8 in float), rounded
 * once: independent of the algorithm, chunking, transport and message
 * size. EXACT: SUM and AVG are the exact sum (over n) rounded once: also
 * independent of the rank order and count. Every rank must use the same. */
typedef enum {
  WEFT_REPRO_DEFAULT = 0, /* the environment's (WEFT_REPRO, else off) */
  WEFT_REPRO_OFF = 1,
  WEFT_REPRO_ORDERED = 2,
  WEFT_REPRO_EXACT = 3
} weft_repro_t;

/* Wire compression (WEFT_WIRE; docs/compression.md): the format float32
 * data travels in between ranks. BF16 / FP16: every message of a float32
 * SUM / AVG allreduce, reduce or reduce_scatter on host memory carries
 * bfloat16 or float16 (fp16 with a power-of-two scale per message, so
 * nothing overflows), every reduction runs in float32, and every rank ends
 * with the same bits; each hop adds one rounding to the format. Other
 * calls run as NONE. Every rank must use the same. */
typedef enum {
  WEFT_WIRE_DEFAULT = 0, /* the environment's (WEFT_WIRE, else none) */
  WEFT_WIRE_NONE = 1,
  WEFT_WIRE_BF16 = 2,
  WEFT_WIRE_FP16 = 3
} weft_wire_t;

typedef struct {
  size_t size;                /* sizeof(weft_config_t) */
  double timeout_s;           /* > 0: as WEFT_TIMEOUT_S, for this comm's calls */
  double bootstrap_timeout_s; /* > 0: as WEFT_BOOTSTRAP_TIMEOUT_S, for its creation */
  int repro;                  /* a weft_repro_t; DEFAULT: as WEFT_REPRO */
  /* Tensor fusion (WEFT_FUSION_THRESHOLD; docs/performance.md): host
   * allreduces of a group packed into buffers of at most this many bytes.
   * 0: as WEFT_FUSION_THRESHOLD; WEFT_FUSION_OFF: no fusion. The ranks take
   * the smallest value any of them asks for. A config of the older size
   * (32 bytes, before this field) takes the environment's. */
  size_t fusion_threshold;
  /* Wire compression (WEFT_WIRE; docs/compression.md): a weft_wire_t;
   * DEFAULT: as WEFT_WIRE. A config of an older size (before this field)
   * takes the environment's. */
  int wire;
} weft_config_t;
#define WEFT_FUSION_OFF ((size_t)-1)
#define WEFT_CONFIG_INITIALIZER \
  {sizeof(weft_config_t), 0.0, 0.0, WEFT_REPRO_DEFAULT, 0, WEFT_WIRE_DEFAULT}

/* As weft_comm_init_rank, with `config` (NULL: the environment's settings).
 * Errors as weft_comm_init_rank, and INVALID_ARGUMENT for a config whose
 * size is 0, whose timeouts are negative or not numbers, or whose repro is
 * not a weft_repro_t; INVALID_USAGE (on every rank) when the ranks' modes
 * differ. */
weft_result_t weft_comm_init_rank_config(weft_comm_t *comm, int nranks, weft_unique_id_t id,
                                         int rank, const weft_config_t *config);

/* Sets how long the comm's later calls may go without progress before they
 * fail with WEFT_ERR_TIMEOUT (as WEFT_TIMEOUT_S, for this comm alone). Call
 * it between calls, from the thread that drives the comm (a framework sets
 * each operation's own timeout this way). Errors: INVALID_ARGUMENT for a
 * dead comm or a timeout that is not > 0. */
weft_result_t weft_comm_set_timeout(weft_comm_t comm, double timeout_s);

/* The communicator's reproducibility mode (OFF, ORDERED or EXACT, never
 * DEFAULT). Errors: INVALID_ARGUMENT (NULL or dead comm, NULL mode). */
weft_result_t weft_comm_repro(weft_comm_t comm, weft_repro_t *mode);

/* The communicator's wire format (NONE, BF16 or FP16, never DEFAULT).
 * Errors: INVALID_ARGUMENT (NULL or dead comm, NULL wire). */
weft_result_t weft_comm_wire(weft_comm_t comm, weft_wire_t *wire);

/* Creates `nranks` communicators in this process (comms[i] is rank i), each
 * then driven by its own thread. */
weft_result_t weft_comm_init_all(weft_comm_t *comms, int nranks);

/* Joins a communicator whose rank, size and rendezvous come from the
 * launcher's environment, first match wins:
 *   WEFT_RANK, WEFT_NRANKS, WEFT_ROOT_ADDR (host:port)
 *   torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
 *   Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
 *   SLURM:    SLURM_PROCID, SLURM_NTASKS
 * The rendezvous address is WEFT_ROOT_ADDR, else MASTER_ADDR:MASTER_PORT;
 * rank 0 listens there, the others connect to it. WEFT_JOB_SECRET (a number)
 * is the shared job secret; without it a fixed default is used, so set it on
 * shared networks. Errors: INVALID_ARGUMENT when the environment is missing
 * or inconsistent, naming the variable; else as weft_comm_init_rank. */
weft_result_t weft_comm_init_env(weft_comm_t *comm);

/* Splits `comm` into one new communicator per color; ranks of one color are
 * ordered by (key, old rank). Collective over all ranks of `comm`. A negative
 * color (WEFT_SPLIT_NOCOLOR) gives *newcomm = NULL. */
#define WEFT_SPLIT_NOCOLOR (-1)
weft_result_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t *newcomm);

/* Frees the communicator after finishing pending work (bounded by
 * WEFT_TIMEOUT_S). `comm` is invalid afterwards; NULL is accepted. */
weft_result_t weft_comm_destroy(weft_comm_t comm);
/* Stops everything now: pending work fails with WEFT_ERR_ABORTED, sockets
 * and shared memory are closed, and the comm is freed. Returns promptly even
 * when peers are dead or hung. A new communicator may be created afterwards.
 * May be called from another thread while a blocking call waits in the comm:
 * that call returns WEFT_ERR_ABORTED, and the comm is freed only after every
 * thread has left its calls on it. */
weft_result_t weft_comm_abort(weft_comm_t comm);

/* ---- Fault tolerance (docs/elastic.md) ----------------------------------- */
/* Revokes the communicator: this rank's pending and later calls on it fail
 * with WEFT_ERR_REVOKED, and peers blocked in a call that involves this
 * rank fail promptly (WEFT_ERR_REMOTE naming it; on shm "revoked the
 * communicator"), not after WEFT_TIMEOUT_S. Not collective: any rank may
 * revoke, and each survivor of a failure should, before weft_comm_shrink.
 * The comm stays valid for weft_comm_failed_ranks, weft_comm_shrink and
 * weft_comm_destroy (which then returns at once). May be called from another
 * thread while a blocking call waits in the comm. Revoking twice is fine. */
weft_result_t weft_comm_revoke(weft_comm_t comm);

/* The ranks this rank knows have failed (exited, ended their communicator,
 * revoked it, or made no progress for WEFT_TIMEOUT_S), ascending: up to
 * `cap` into `ranks` (may be NULL when cap is 0), their number into *n.
 * The reasons are in weft_comm_failure_reason. A local view: other ranks
 * may know more or less (weft_comm_shrink agrees on one). */
weft_result_t weft_comm_failed_ranks(weft_comm_t comm, int *ranks, int cap, int *n);
/* Why `rank` is counted as failed ("exited", "made no progress for 20 s",
 * ...), or "" when it is not. The string lives until the next call on the
 * comm from this thread. */
const char *weft_comm_failure_reason(weft_comm_t comm, int rank);

/* A new communicator of the survivors, collective over them and without any
 * outside rendezvous (the ranks reach each other at the addresses of the
 * comm's bootstrap). Ranks listed in `exclude` (n_exclude of them) do not
 * call and are left out; with exclude == NULL (n_exclude 0) the survivors
 * find out among themselves who is gone: a rank that neither answers within
 * WEFT_SHRINK_TIMEOUT_S nor can be reached (its process gone) is left out,
 * and so is one that dies during the shrink. Every rank that returns
 * WEFT_SUCCESS has the same membership; new ranks are the survivors' old
 * ranks renumbered densely in their old order. Works on a healthy comm, on
 * a revoked one and after a failure in the middle of a collective (revoke
 * first, so that peers still blocked in it are released). The new comm has
 * the parent's configuration and timeout. The parent stays valid (destroy
 * it). Errors: INVALID_ARGUMENT (bad list: out of range, repeated, or this
 * rank), WEFT_ERR_REVOKED when the survivors left this rank out (it was
 * too slow or unreachable), TIMEOUT / REMOTE / SYSTEM when no agreement or
 * no new comm could be reached in the bound. */
weft_result_t weft_comm_shrink(weft_comm_t comm, const int *exclude, int n_exclude,
                               weft_comm_t *newcomm);

/* Grows a communicator to `nranks` ranks: the ranks of `comm` keep their
 * ranks, new processes take ranks comm's size .. nranks-1 (NCCL's model,
 * ncclCommGrow). One rank of `comm` makes an id (weft_get_unique_id), hands
 * it to the new processes out of band and passes it here; the other ranks
 * of `comm` pass id == NULL (they receive it over `comm`), all pass rank -1; a
 * new process passes comm == NULL, the id and its rank. Collective over all
 * ranks of `comm` and the new ones; `comm` stays valid. Errors as
 * weft_comm_init_rank, and INVALID_ARGUMENT for a call that does not fit
 * this model. */
weft_result_t weft_comm_grow(weft_comm_t comm, int nranks, const weft_unique_id_t *id, int rank,
                             weft_comm_t *newcomm);

weft_result_t weft_comm_rank(weft_comm_t comm, int *rank);
weft_result_t weft_comm_size(weft_comm_t comm, int *size);
/* The first asynchronous error of the comm (a peer failed while nonblocking
 * work ran), WEFT_SUCCESS when none, WEFT_IN_PROGRESS while work is pending.
 * Never waits behind another thread's call on the comm (a watchdog may poll
 * it while a blocking collective waits for a hung peer): that call's work
 * is then reported as WEFT_IN_PROGRESS. */
weft_result_t weft_comm_get_async_error(weft_comm_t comm, weft_result_t *async_error);

/* Adds a span to the communicator's timeline (WEFT_TIMELINE; nothing when
 * it is off): `name` from begin_ns to end_ns, both on CLOCK_MONOTONIC in
 * nanoseconds (Python's time.monotonic_ns()), on a track of its own named
 * `track` beside the communicator's, with `nargs` string arguments (a value
 * that is a finite number is written as one). Frameworks record their own
 * phases this way (weft.torch: each gradient's QUEUE and ALLREDUCE), so one
 * file shows them beside the collectives. Names are cut at 60 bytes.
 * Errors: INVALID_ARGUMENT (dead comm, empty track or name, end before
 * begin, nargs outside 0..64, a NULL key or value). */
weft_result_t weft_timeline_span(weft_comm_t comm, const char *track, const char *name,
                                 uint64_t begin_ns, uint64_t end_ns, int nargs,
                                 const char *const *keys, const char *const *values);

/* ---- Collectives ------------------------------------------------------- */
/* In place when sendbuf == recvbuf (allgather: sendbuf == recvbuf + rank *
 * sendcount; reduce-scatter: recvbuf == sendbuf + rank * recvcount).
 * count 0 is allowed and does nothing but synchronize nothing. Host memory
 * with stream NULL: outside a group the call returns when the result is in
 * recvbuf.
 * Every rank must make the same calls in the same order (collective, count,
 * datatype, op, root). A mismatch fails with INVALID_USAGE naming both
 * calls on the rank that finds it, and ranks waiting for a rank that
 * stopped at one fail at once (REMOTE, naming it). On one host (the shm
 * arena) every mismatch is found: at the call, or, for a broadcast or
 * reduce whose root differs between ranks (where no rank compares), at the
 * next collective that compares calls. Over the network a rank finds it in
 * a message of the other call; where no rank sends what another waits for
 * (roots that differ, a reduce met by a broadcast from the same root), the
 * ranks fail at WEFT_TIMEOUT_S, naming the ranks they waited for. */

weft_result_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             weft_datatype_t datatype, weft_op_t op, weft_comm_t comm,
                             weft_stream_t stream);
/* root's sendbuf is copied to every rank's recvbuf; non-roots' sendbuf is ignored. */
weft_result_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                             weft_datatype_t datatype, int root, weft_comm_t comm,
                             weft_stream_t stream);
/* The reduction lands in root's recvbuf only; other ranks' recvbuf is untouched. */
weft_result_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count,
                          weft_datatype_t datatype, weft_op_t op, int root, weft_comm_t comm,
                          weft_stream_t stream);
/* recvbuf holds nranks * sendcount elements, rank i's at offset i * sendcount. */
weft_result_t weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                             weft_datatype_t datatype, weft_comm_t comm, weft_stream_t stream);
/* sendbuf holds nranks * recvcount elements; rank i receives block i reduced. */
weft_result_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_datatype_t datatype, weft_op_t op, weft_comm_t comm,
                                  weft_stream_t stream);
/* Block j of sendbuf (count elements) goes to rank j, landing at block i of
 * its recvbuf (i = this rank). */
weft_result_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                            weft_datatype_t datatype, weft_comm_t comm, weft_stream_t stream);
/* Point to point: the k-th send to a peer matches that peer's k-th recv from
 * this rank. Their sizes in bytes (count x datatype size) must agree: a recv
 * of another size fails with INVALID_USAGE naming both calls, and the
 * sender's next call on the communicator fails at once (REMOTE, naming the
 * receiver). Datatypes are not compared: the bytes travel as they are. A
 * send returns once the transport holds its bytes: small sends are
 * buffered and do not wait for the matching recv (sends to a peer that has
 * not received yet return success, and their data waits for its recvs); a
 * large one may wait until the receiver takes it. Use a group to send and
 * receive together. */
weft_result_t weft_send(const void *buf, size_t count, weft_datatype_t datatype, int peer,
                        weft_comm_t comm, weft_stream_t stream);
weft_result_t weft_recv(void *buf, size_t count, weft_datatype_t datatype, int peer,
                        weft_comm_t comm, weft_stream_t stream);
weft_result_t weft_barrier(weft_comm_t comm, weft_stream_t stream);

/* A pre-multiplied sum (NCCL's ncclRedOpCreatePreMulSum): a reduction op
 * for `comm` that multiplies each rank's input by `*scalar` (one element of
 * `datatype`, in that type's arithmetic: integers wrap, narrow floats are
 * multiplied in float and rounded once), then sums. *op receives a value
 * from WEFT_NUM_OPS up, valid on `comm` alone, with `datatype` alone, for
 * allreduce, reduce and reduce_scatter, until weft_op_destroy. The input is
 * scaled on the host before the collective starts: straight into recvbuf
 * for allreduce (and reduce at its root), else into a copy weft owns until
 * the call (or its group) completes; sendbuf is never written. Host memory
 * only for now: a call on device memory is INVALID_USAGE.
 * Errors: INVALID_ARGUMENT (NULL op or scalar, a bad datatype or residence,
 * a dead comm), INVALID_USAGE (a scalar in device memory). A call with an
 * op that is not live on its comm, or with another datatype, is
 * INVALID_ARGUMENT naming the op. */
weft_result_t weft_op_create_premul_sum(weft_op_t *op, const void *scalar,
                                        weft_datatype_t datatype,
                                        weft_scalar_residence_t residence, weft_comm_t comm);
/* Frees an op made by weft_op_create_premul_sum on `comm` (its value may be
 * handed out again). Errors: INVALID_ARGUMENT for a built-in op or one not
 * live on `comm`. */
weft_result_t weft_op_destroy(weft_op_t op, weft_comm_t comm);

/* A sum carried in a wire format, per call (docs/compression.md): *op
 * receives an op that reduces as `base` (WEFT_SUM or WEFT_AVG) with float32
 * data travelling as `wire` (WEFT_WIRE_BF16, _FP16, or _NONE to run a call
 * uncompressed on a comm whose WEFT_WIRE compresses), whatever the comm's
 * setting; it composes with groups. Valid on every comm and kept until
 * weft_op_destroy (which then does nothing). A call with it on a datatype
 * other than WEFT_FLOAT32 is INVALID_ARGUMENT, on device memory or a stream
 * INVALID_USAGE, both before any buffer is touched. Every rank must use the
 * same op in the same call. Errors: INVALID_ARGUMENT (NULL op, a base that
 * is not SUM or AVG, a wire that is not NONE, BF16 or FP16, a dead comm). */
weft_result_t weft_op_create_wire(weft_op_t *op, weft_op_t base, weft_wire_t wire,
                                  weft_comm_t comm);

/* Gather, scatter and all-to-all with per-rank counts: sends and receives
 * issued as one group (as NCCL builds them), so they nest inside a caller's
 * group too. Counts are in elements of `datatype`.
 * gather: root's recvbuf holds nranks * count elements, rank i's at offset
 * i * count; other ranks' recvbuf is ignored (may be NULL).
 * scatter: root's sendbuf holds nranks * count elements; block i goes to
 * rank i's recvbuf; other ranks' sendbuf is ignored (may be NULL).
 * alltoallv: sendcounts[j] elements from sendbuf + sdispls[j] go to rank j,
 * landing at recvbuf + rdispls[i] of its buffer (i = this rank), where its
 * recvcounts[i] must equal them. Every array has nranks entries. In place
 * (sendbuf == recvbuf) is refused: the blocks would overwrite each other. */
weft_result_t weft_gather(const void *sendbuf, void *recvbuf, size_t count,
                          weft_datatype_t datatype, int root, weft_comm_t comm,
                          weft_stream_t stream);
weft_result_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count,
                           weft_datatype_t datatype, int root, weft_comm_t comm,
                           weft_stream_t stream);
weft_result_t weft_alltoallv(const void *sendbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                             const size_t *rdispls, weft_datatype_t datatype, weft_comm_t comm,
                             weft_stream_t stream);

/* ---- Groups and nonblocking work -------------------------------------- */

/* Between weft_group_start and weft_group_end, calls are recorded, not run;
 * group_end issues them together, so sends and receives to many peers (and
 * to this rank) cannot deadlock on each other. Groups nest; the outermost
 * end issues. State is per thread. */
weft_result_t weft_group_start(void);
weft_result_t weft_group_end(void);
/* As weft_group_end but returns at once; *req tracks completion and is freed
 * with weft_request_free. The buffers must stay valid until it completes. */
weft_result_t weft_group_end_async(weft_request_t *req);
/* *done = 1 when the request finished (its result is returned), else 0 and
 * WEFT_SUCCESS. */
weft_result_t weft_test(weft_request_t req, int *done);
/* Waits (bounded by WEFT_TIMEOUT_S) and returns the request's result. */
weft_result_t weft_wait(weft_request_t req);
/* Frees a request; an unfinished request is waited for first. */
weft_result_t weft_request_free(weft_request_t req);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
