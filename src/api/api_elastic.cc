// The C API of fault tolerance: revoke, failed ranks, shrink, grow
// (docs/elastic.md; the work is in comm_elastic.cc and bootstrap/agree.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "api/api_state.h"
#include "api/call_guard.h"
#include "bootstrap/bootstrap.h"

using namespace weft;

namespace {

thread_local std::string tlsReason;

// A new process joining a grow: comm == NULL, the id, its rank.
Status growNew(int nranks, const weft_unique_id_t* id, int rank, weft_comm_t* newcomm) {
  if (!id)
    return invalidArgument("weft_comm_grow: a new rank (comm NULL) must pass the id that rank 0 "
                           "of the communicator made");
  return initRank(newcomm, nranks, *id, rank, nullptr).withContext("weft_comm_grow");
}

}  // namespace

extern "C" {

weft_result_t weft_comm_revoke(weft_comm_t comm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  c->revoke();
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_failed_ranks(weft_comm_t comm, int* ranks, int cap, int* n) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!n) return setError(c.get(), invalidArgument("n (the output pointer) is NULL"));
  if (cap < 0 || (cap > 0 && !ranks))
    return setError(c.get(), invalidArgument(strFormat(
                                 "ranks is %s with cap %d; cap must be >= 0 and ranks non-NULL "
                                 "when cap > 0",
                                 ranks ? "set" : "NULL", cap)));
  const auto failed = c->failedRanks();
  for (size_t i = 0; i < failed.size() && static_cast<int>(i) < cap; ++i) ranks[i] = failed[i].first;
  *n = static_cast<int>(failed.size());
  return WEFT_SUCCESS;
}

const char* weft_comm_failure_reason(weft_comm_t comm, int rank) {
  tlsReason.clear();
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return tlsReason.c_str();
  for (const auto& f : c->failedRanks())
    if (f.first == rank) tlsReason = f.second;
  return tlsReason.c_str();
}

weft_result_t weft_comm_shrink(weft_comm_t comm, const int* exclude, int n_exclude,
                               weft_comm_t* newcomm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!newcomm) return setError(c.get(), invalidArgument("newcomm (the output pointer) is NULL"));
  if (threadGroup().depth > 0)
    return setError(c.get(), invalidUsage("weft_comm_shrink cannot be called inside a group"));
  const int n = c->nranks();
  if (n_exclude < 0 || (n_exclude > 0 && !exclude))
    return setError(c.get(), invalidArgument(strFormat(
                                 "n_exclude is %d with exclude %s; it must be >= 0, and exclude "
                                 "non-NULL when it is > 0",
                                 n_exclude, exclude ? "set" : "NULL")));
  std::vector<char> gone(static_cast<size_t>(n), 0);
  for (int i = 0; i < n_exclude; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= n)
      return setError(c.get(), invalidArgument(strFormat(
                                   "exclude[%d] is %d, outside [0, %d)", i, r, n)));
    if (r == c->rank())
      return setError(c.get(), invalidArgument(strFormat(
                                   "exclude[%d] is this rank (%d): an excluded rank does not call "
                                   "weft_comm_shrink",
                                   i, r)));
    if (gone[r])
      return setError(c.get(), invalidArgument(strFormat("exclude lists rank %d twice", r)));
    gone[r] = 1;
  }
  std::shared_ptr<Comm> impl;
  st = c->shrink(gone, &impl);
  if (st.isError()) return setError(c.get(), st);
  *newcomm = wrapComm(std::move(impl));
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_grow(weft_comm_t comm, int nranks, const weft_unique_id_t* id, int rank,
                             weft_comm_t* newcomm) {
  if (!comm) {
    Status st = growNew(nranks, id, rank, newcomm);
    return st.isOk() ? WEFT_SUCCESS : setError(static_cast<Comm*>(nullptr), st);
  }
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!newcomm) return setError(c.get(), invalidArgument("newcomm (the output pointer) is NULL"));
  if (threadGroup().depth > 0)
    return setError(c.get(), invalidUsage("weft_comm_grow cannot be called inside a group"));
  const int me = c->rank(), size = c->nranks();
  if (rank != -1)
    return setError(c.get(), invalidArgument(strFormat(
                                 "rank is %d; ranks of the communicator pass -1 (they keep their "
                                 "rank, %d)",
                                 rank, me)));
  if (nranks < size)
    return setError(c.get(), invalidArgument(strFormat(
                                 "nranks is %d; growing needs at least the communicator's %d",
                                 nranks, size)));
  // Which rank holds the id (exactly one), and that every rank asks for
  // the same size: one small allreduce; then the id from its holder.
  int64_t facts[3] = {id ? 1 : 0, id ? me : 0, nranks};
  int64_t sums[3] = {0, 0, 0};
  weft_result_t r = weft_allreduce(facts, sums, 3, WEFT_INT64, WEFT_SUM, comm, nullptr);
  if (r != WEFT_SUCCESS) return r;  // its error is set, naming the failure
  if (sums[0] != 1)
    return setError(c.get(), invalidArgument(strFormat(
                                 "%lld ranks passed an id; exactly one (the one that made it with "
                                 "weft_get_unique_id) must, the others pass NULL",
                                 static_cast<long long>(sums[0]))));
  if (sums[2] != static_cast<int64_t>(nranks) * size)
    return setError(c.get(), invalidArgument(strFormat(
                                 "the ranks ask for different sizes (this one %d; %lld in all over "
                                 "%d ranks)",
                                 nranks, static_cast<long long>(sums[2]), size)));
  const int root = static_cast<int>(sums[1]);
  weft_unique_id_t shared;
  if (id) shared = *id;
  r = weft_broadcast(&shared, &shared, sizeof shared, WEFT_UINT8, root, comm, nullptr);
  if (r != WEFT_SUCCESS) return r;
  const weft_config_t cc = c->childConfig();
  weft_comm_t out = nullptr;
  st = initRank(&out, nranks, shared, me, &cc);
  if (st.isError()) return setError(c.get(), st.withContext("weft_comm_grow"));
  *newcomm = out;
  return WEFT_SUCCESS;
}

}  // extern "C"
