/* perf/compare.d/mpi_bench.c: MPI_Allreduce (float sum), MPI_Bcast (root 0)
 * and MPI_Allgather timed the way weft-perf times weft (see sweep.h).
 * Run under mpirun; perf/compare picks the transport with --mca flags:
 *
 *   mpirun -np 2 mpi_bench allreduce -b 8 -e 64M -w 2 -n 1000 -T 0.05
 */
#include <mpi.h>

#include "sweep.h"

static int mpi_coll(void* ctx, enum sweep_coll c, const float* send, float* recv, size_t count) {
  (void)ctx;
  if (count > (size_t)0x7fffffff) return 1;
  switch (c) {
    case SWEEP_ALLREDUCE:
      return MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
    case SWEEP_BROADCAST:
      /* MPI's broadcast has one buffer: the root's holds the data. */
      return MPI_Bcast(recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
    case SWEEP_ALLGATHER:
      return MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT,
                           MPI_COMM_WORLD) != MPI_SUCCESS;
  }
  return 1;
}

static int mpi_max(void* ctx, double* v) {
  double in = *v;
  (void)ctx;
  return MPI_Allreduce(&in, v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int mpi_sum(void* ctx, double* v) {
  double in = *v;
  (void)ctx;
  return MPI_Allreduce(&in, v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int mpi_barrier(void* ctx) {
  (void)ctx;
  return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
}

int main(int argc, char** argv) {
  struct sweep_opts o;
  struct sweep_backend be;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  char name[96];
  int len = 0, rc;
  rc = sweep_parse_args(argc, argv, &o, 0);
  if (rc == 1) return 0;
  if (rc != 0) return 2;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  memset(&be, 0, sizeof be);
  MPI_Comm_rank(MPI_COMM_WORLD, &be.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &be.nranks);
  MPI_Get_library_version(version, &len);
  /* keep the first line of the version ("Open MPI v4.1.4, ...") short */
  snprintf(name, sizeof name, "mpi_bench (%.*s)", (int)strcspn(version, ",\n"), version);
  be.name = name;
  be.coll = mpi_coll;
  be.max_f64 = mpi_max;
  be.sum_f64 = mpi_sum;
  be.barrier = mpi_barrier;
  rc = sweep_run(&o, &be);
  if (rc == 3) MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Finalize();
  return rc;
}
