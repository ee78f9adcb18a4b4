#include "cuda/pieces.h"

namespace weft {
namespace cuda {

std::vector<Piece> cutPieces(size_t count, size_t elt) {
  std::vector<Piece> out;
  const size_t bytes = count * elt;
  if (bytes < 2 * kPieceBytes || elt == 0 || 256 % elt != 0) {
    out.push_back(Piece{0, count});
    return out;
  }
  size_t per = (bytes + kMaxPieces - 1) / kMaxPieces;
  if (per < kPieceBytes) per = kPieceBytes;
  per = (per + 255) / 256 * 256 / elt;  // elements per piece, 256-byte multiple
  for (size_t first = 0; first < count; first += per)
    out.push_back(Piece{first, count - first < per ? count - first : per});
  return out;
}

namespace {
std::atomic<uint64_t> gPieces{0}, gOverlapped{0};
}  // namespace

void PieceOverlap::started() {
  gPieces.fetch_add(1, std::memory_order_relaxed);
  if (running_.fetch_add(1, std::memory_order_acq_rel) > 0)
    gOverlapped.fetch_add(1, std::memory_order_relaxed);
}

void PieceOverlap::finished() { running_.fetch_sub(1, std::memory_order_acq_rel); }

void pieceCounters(uint64_t* pieces, uint64_t* overlapped) {
  *pieces = gPieces.load();
  *overlapped = gOverlapped.load();
}

}  // namespace cuda
}  // namespace weft
