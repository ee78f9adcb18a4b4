// Cutting one stream-ordered collective into pieces, so that its stages
// overlap (src/cuda/stream_batch.h):
//
//   copy engine D2H:  piece k+1        piece k+2 ...
//   host engine:      piece k on the wire / reduced
//   stream:           copy-out of piece k-1
//
// Each piece is a collective of its own (same type, a slice of the count),
// with its own staging, event and flag; all the pieces' copies in are queued
// on the stream before any wait, so the copy engine runs ahead of the host.
// Only collectives whose result is element-wise in the input split this way
// (allreduce, broadcast, reduce). Every rank cuts a call the same way: the
// cut depends only on the count and the element size.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <vector>

namespace weft {
namespace cuda {

// Calls of at least this many bytes are cut; pieces are at least this big.
constexpr size_t kPieceBytes = size_t{4} << 20;
// At most this many pieces: larger calls get larger pieces.
constexpr size_t kMaxPieces = 32;

struct Piece {
  size_t first = 0;  // first element
  size_t count = 0;  // elements
};

// The pieces of `count` elements of `elt` bytes: one piece below
// 2 * kPieceBytes, else pieces of a multiple of 256 bytes (staging and
// vector alignment), the last one taking the rest.
std::vector<Piece> cutPieces(size_t count, size_t elt);

// Counts the overlap of a cut call: a piece whose copy in finished (its gate
// opened) while an earlier piece of the same call was still running on the
// host is one stage overlapping another. Process-wide totals, for tests and
// the TRACE log.
class PieceOverlap {
 public:
  void started();   // a piece's gate opened
  void finished();  // a piece's ops are done
 private:
  std::atomic<int> running_{0};
};
// Pieces started so far, and how many of them overlapped an earlier one.
void pieceCounters(uint64_t* pieces, uint64_t* overlapped);

}  // namespace cuda
}  // namespace weft
