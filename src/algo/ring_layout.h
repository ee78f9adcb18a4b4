// Shared by the ring builders: how a buffer is cut into n segments (one per
// rank) and each segment into chunks of at most chunkBytes, so that every
// rank computes the same chunk boundaries and the pipeline has J chunks per
// segment in flight.
#pragma once

#include <algorithm>
#include <vector>

#include "algo/schedule.h"

namespace weft {

struct RingLayout {
  int n = 1;
  size_t elt = 1;
  std::vector<size_t> segOff, segCnt;  // elements
  size_t chunkElems = 1;
  size_t chunksPerSeg = 0;  // J

  // Segments of a buffer of `total` elements split evenly (allreduce).
  static RingLayout even(size_t total, int n, size_t elt, size_t chunkBytes) {
    RingLayout L;
    L.n = n;
    L.elt = elt;
    for (int s = 0; s < n; ++s) {
      L.segOff.push_back(partOffset(total, n, s));
      L.segCnt.push_back(partCount(total, n, s));
    }
    L.finish(chunkBytes);
    return L;
  }
  // Segments of `block` elements each (allgather, reduce-scatter).
  static RingLayout blocks(size_t block, int n, size_t elt, size_t chunkBytes) {
    RingLayout L;
    L.n = n;
    L.elt = elt;
    for (int s = 0; s < n; ++s) {
      L.segOff.push_back(block * s);
      L.segCnt.push_back(block);
    }
    L.finish(chunkBytes);
    return L;
  }

  // Chunk j of segment s: element offset in the whole buffer and count (0
  // when the segment is shorter than the others).
  size_t chunkOff(int s, size_t j) const { return segOff[s] + j * chunkElems; }
  size_t chunkCnt(int s, size_t j) const {
    size_t start = j * chunkElems;
    if (start >= segCnt[s]) return 0;
    return std::min(chunkElems, segCnt[s] - start);
  }
  size_t index(int s, size_t j) const { return static_cast<size_t>(s) * chunksPerSeg + j; }

 private:
  void finish(size_t chunkBytes) {
    chunkElems = std::max<size_t>(1, chunkBytes / elt);
    size_t maxCnt = 0;
    for (size_t c : segCnt) maxCnt = std::max(maxCnt, c);
    chunksPerSeg = (maxCnt + chunkElems - 1) / chunkElems;
  }
};

// The reduce-scatter half of a ring, shared by allreduce and reduce_scatter.
//
// At step k (0..n-2) rank r sends segment (r-k-1) and receives segment
// (r-k-2) from rank r-1, reducing it with its own contribution; after n-1
// steps segment r is complete on rank r. Partial sums live in `work` at the
// segment's offset; the last reduction of segment r goes to `finalDst`
// (+ offset within the segment). Received chunks land in `slots` scratch
// slots of one chunk each, starting at scratch offset 0.
//
// producer[index(s,j)] is set to the step that last wrote chunk (s,j) of
// work (or of finalDst for s == r); lastRead[index(s,j)] to the last send
// that read it from work (so later writers can wait for it).
struct RingRsResult {
  std::vector<uint32_t> producer, lastRead;
};
RingRsResult addRingReduceScatter(const RingLayout& L, const BuildParams& p, BufRef work,
                                  BufRef finalDst, bool inPlace, Schedule* s);

// The allgather half over the segments of L in `buf`, where rank r starts
// with segment `first` ready (producer gives the step that produced each
// chunk, and receives it). At step k rank r sends segment (first-k), the
// first from `firstSrc`, and receives (first-k-1) after lastRead's step of
// that chunk (if any) is done.
void addRingAllGather(const RingLayout& L, const BuildParams& p, BufRef buf, int first,
                      std::vector<uint32_t>& producer, const std::vector<uint32_t>& lastRead,
                      BufRef firstSrc, Schedule* s);

}  // namespace weft
