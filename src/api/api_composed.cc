// Gather, scatter and all-to-all with per-rank counts, built from sends and
// receives issued as one group (as NCCL builds them). The arguments are
// checked whole before anything is recorded, so a refused call leaves no
// partial group and writes no buffer.
#include <algorithm>

#include "api/api_state.h"
#include "kernels/cpu/reduce.h"

using namespace weft;

namespace {

// The comm, datatype and root of a composed call; *elt its element size.
Status checkCommon(const char* name, weft_comm_t comm, int dtype, int root, bool rooted,
                   std::shared_ptr<Comm>* c, size_t* elt) {
  Status st;
  *c = lookupComm(comm, &st);
  if (!*c) return st;
  if (dtype < 0 || dtype >= WEFT_NUM_DATATYPES)
    return invalidArgument(strFormat("%s: datatype %d is not a weft_datatype_t", name, dtype));
  const int n = (*c)->nranks();
  if (rooted && (root < 0 || root >= n))
    return invalidArgument(strFormat("%s: root %d is outside [0, %d)", name, root, n));
  *elt = datatypeSize(static_cast<weft_datatype_t>(dtype));
  return Status();
}

// count * elt * n without overflow (below SIZE_MAX / 2, as the collectives).
Status checkSize(const char* name, size_t count, size_t elt, size_t n, size_t* bytes) {
  size_t b = 0;
  if (__builtin_mul_overflow(count, elt, &b) || __builtin_mul_overflow(b, n, &b) ||
      b > SIZE_MAX / 2)
    return invalidArgument(strFormat("%s: count %zu is too large", name, count));
  *bytes = b;
  return Status();
}

// One send or receive of the group.
struct P2p {
  bool send;
  void* buf;
  size_t count;
  int peer;
};

// Issues `ops` as one group; a refusal ends the group (which then fails) and
// is returned.
weft_result_t issue(weft_comm_t comm, const std::vector<P2p>& ops, weft_datatype_t dt,
                    weft_stream_t stream) {
  weft_result_t r = weft_group_start();
  if (r != WEFT_SUCCESS) return r;
  weft_result_t first = WEFT_SUCCESS;
  for (const P2p& p : ops) {
    r = p.send ? weft_send(p.buf, p.count, dt, p.peer, comm, stream)
               : weft_recv(p.buf, p.count, dt, p.peer, comm, stream);
    if (r != WEFT_SUCCESS) {
      first = r;
      break;
    }
  }
  r = weft_group_end();
  return first != WEFT_SUCCESS ? first : r;
}

weft_result_t refuse(const std::shared_ptr<Comm>& c, const Status& st) {
  return c ? setError(c.get(), st) : setError(static_cast<Comm*>(nullptr), st);
}

// Gather (`toRoot`) and scatter: every rank's `block` (count elements) and
// the root's `all` (nranks blocks, rank i's at i). Gather sends each block to
// the root, which receives block i into all + i; scatter the other way. The
// root's own block moves through a message to itself unless it already is
// its block of `all` (in place).
weft_result_t rootedBlocks(bool toRoot, void* block, void* all, size_t count, weft_datatype_t dt,
                           int root, weft_comm_t comm, weft_stream_t stream) {
  const char* name = toRoot ? "gather" : "scatter";
  const char* blockName = toRoot ? "sendbuf" : "recvbuf";
  const char* allName = toRoot ? "recvbuf" : "sendbuf";
  std::shared_ptr<Comm> c;
  size_t elt = 0, total = 0;
  Status st = checkCommon(name, comm, static_cast<int>(dt), root, true, &c, &elt);
  if (st.isOk()) st = checkSize(name, count, elt, c->nranks(), &total);
  if (st.isError()) return refuse(c, st);
  const int n = c->nranks(), me = c->rank();
  const size_t blk = count * elt;
  auto* all8 = static_cast<uint8_t*>(all);
  const bool inPlace = me == root && block == all8 + me * blk;
  if (count && !block)
    st = invalidArgument(strFormat("%s: %s is NULL with count %zu", name, blockName, count));
  else if (count && me == root && !all)
    st = invalidArgument(strFormat("%s: %s is NULL on the root with count %zu", name, allName, count));
  else if (me == root && !inPlace && overlaps(block, blk, all, total))
    st = invalidArgument(strFormat("%s: %s overlaps %s but is not rank %d's block of it", name,
                                   blockName, allName, me));
  if (st.isError()) return refuse(c, st);
  if (count == 0) return WEFT_SUCCESS;
  std::vector<P2p> ops;
  if (!inPlace) ops.push_back({toRoot, block, count, root});
  if (me == root)
    for (int r = 0; r < n; ++r)
      if (!(inPlace && r == me)) ops.push_back({!toRoot, all8 + r * blk, count, r});
  return ops.empty() ? WEFT_SUCCESS : issue(comm, ops, dt, stream);
}

}  // namespace

extern "C" {

weft_result_t weft_gather(const void* sendbuf, void* recvbuf, size_t count,
                          weft_datatype_t datatype, int root, weft_comm_t comm,
                          weft_stream_t stream) {
  return rootedBlocks(true, const_cast<void*>(sendbuf), recvbuf, count, datatype, root, comm, stream);
}

weft_result_t weft_scatter(const void* sendbuf, void* recvbuf, size_t count,
                           weft_datatype_t datatype, int root, weft_comm_t comm,
                           weft_stream_t stream) {
  return rootedBlocks(false, recvbuf, const_cast<void*>(sendbuf), count, datatype, root, comm, stream);
}

weft_result_t weft_alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                             weft_datatype_t datatype, weft_comm_t comm, weft_stream_t stream) {
  const char* name = "alltoallv";
  std::shared_ptr<Comm> c;
  size_t elt = 0;
  Status st = checkCommon(name, comm, static_cast<int>(datatype), 0, false, &c, &elt);
  if (st.isOk() && (!sendcounts || !sdispls || !recvcounts || !rdispls))
    st = invalidArgument(strFormat("%s: sendcounts, sdispls, recvcounts and rdispls must all be "
                                   "arrays of nranks entries, not NULL", name));
  if (st.isError()) return refuse(c, st);
  const int n = c->nranks();
  // The extent each side touches, in bytes, checked for overflow.
  auto extent = [&](const size_t* counts, const size_t* displs, const char* which, size_t* out) {
    size_t hi = 0;
    for (int r = 0; r < n; ++r) {
      size_t end = 0;
      if (__builtin_add_overflow(displs[r], counts[r], &end) ||
          __builtin_mul_overflow(end, elt, &end) || end > SIZE_MAX / 2)
        return invalidArgument(strFormat("%s: %s block %d (displacement %zu, count %zu) is too large",
                                         name, which, r, displs[r], counts[r]));
      if (counts[r]) hi = std::max(hi, end);
    }
    *out = hi;
    return Status();
  };
  size_t sendExtent = 0, recvExtent = 0;
  st = extent(sendcounts, sdispls, "send", &sendExtent);
  if (st.isOk()) st = extent(recvcounts, rdispls, "recv", &recvExtent);
  if (st.isOk() && sendExtent && !sendbuf)
    st = invalidArgument(strFormat("%s: sendbuf is NULL but sendcounts are not all 0", name));
  if (st.isOk() && recvExtent && !recvbuf)
    st = invalidArgument(strFormat("%s: recvbuf is NULL but recvcounts are not all 0", name));
  if (st.isOk() && overlaps(sendbuf, sendExtent, recvbuf, recvExtent))
    st = invalidArgument(strFormat("%s: sendbuf and recvbuf overlap (in place is not supported)", name));
  if (st.isError()) return refuse(c, st);
  std::vector<P2p> ops;
  auto* s8 = const_cast<uint8_t*>(static_cast<const uint8_t*>(sendbuf));
  auto* r8 = static_cast<uint8_t*>(recvbuf);
  for (int r = 0; r < n; ++r) {
    if (sendcounts[r]) ops.push_back({true, s8 + sdispls[r] * elt, sendcounts[r], r});
    if (recvcounts[r]) ops.push_back({false, r8 + rdispls[r] * elt, recvcounts[r], r});
  }
  if (ops.empty()) return WEFT_SUCCESS;
  return issue(comm, ops, datatype, stream);
}

}  // extern "C"
