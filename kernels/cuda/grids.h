// Launch geometry of the CUDA backend's own reductions and copies, in plain C++ so
// that CPU tests check it: how many threads share a row, how a column sum splits its
// rows into chunks and the scratch that takes, and the widest unit a block copy moves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/launch.h"

namespace netloom::cuda {

// Rows of at least this many elements are reduced by a whole block, shorter ones by a
// warp: a long row gives each of a block's threads four or more elements, and a few
// long rows (LayerNorm over a wide layer) would leave most of the GPU idle with a warp
// each. Short rows (10 classes, a 7×7 plane) would leave most of a block idle.
constexpr int64_t kLongRow = 1024;

inline int rowThreads(int64_t cols) {
  return cols >= kLongRow ? kBlock : 32;
}

// Blocks for `rows` rows shared out `threads` to a row; a grid-stride loop takes the
// rest.
inline unsigned rowGrid(int64_t rows, int threads) {
  int64_t perBlock = kBlock / threads;
  return unsigned(std::clamp<int64_t>((rows + perBlock - 1) / perBlock, 1, 65535 * 8));
}

// A column sum over a rows × cols matrix: each block sums 32 columns over one chunk
// of the rows with 8 row lanes, then adds the lanes in order. With several chunks
// each writes its sums to a partial table (chunks × cols doubles) that a second
// kernel adds in chunk order. No atomics: a launch gives the same bits every time.
constexpr int kColumnTile = 32;
constexpr int kColumnLanes = kBlock / kColumnTile;

struct ColumnSums {
  int64_t rows = 0, cols = 0;
  int64_t tiles = 0;                     // blocks across the columns
  int64_t chunks = 1, rowsPerChunk = 0;  // blocks down the rows
  int64_t partialBytes() const { return chunks > 1 ? chunks * cols * int64_t(sizeof(double)) : 0; }
};

inline ColumnSums columnSums(int64_t rows, int64_t cols) {
  // Enough blocks to keep a large GPU busy (a few per multiprocessor), each chunk at
  // least 64 rows (8 per lane) so that its partial sums cost little to write and add.
  constexpr int64_t kTargetBlocks = 512, kMinChunkRows = 64, kMaxChunks = 65535;
  ColumnSums p;
  p.rows = rows, p.cols = cols;
  p.tiles = (cols + kColumnTile - 1) / kColumnTile;
  int64_t want = std::max<int64_t>(1, kTargetBlocks / std::max<int64_t>(1, p.tiles));
  int64_t chunks = std::min({want, std::max<int64_t>(1, rows / kMinChunkRows), kMaxChunks});
  p.rowsPerChunk = (rows + chunks - 1) / chunks;
  // Recounted from the rounded-up chunk length, so that no chunk is empty.
  p.chunks = rows > 0 ? (rows + p.rowsPerChunk - 1) / p.rowsPerChunk : 1;
  return p;
}

// Σ x² runs in chunks of this many elements, summed in float like the CPU's blocks;
// the chunks' sums are added in double, in order.
constexpr int64_t kSquaresChunk = 4096;

inline int64_t squaresChunks(int64_t n) {
  return (n + kSquaresChunk - 1) / kSquaresChunk;
}

// The widest unit (16, 8, 4, 2 or 1 bytes) dividing every address and byte count
// given: a block copy moves whole units of it.
inline int copyUnit(std::initializer_list<uint64_t> values) {
  uint64_t all = 0;
  for (uint64_t v : values) all |= v;
  for (int unit = 16; unit > 1; unit /= 2)
    if (all % uint64_t(unit) == 0) return unit;
  return 1;
}

inline int64_t alignUp(int64_t bytes, int64_t to) {
  return (bytes + to - 1) / to * to;
}

}  // namespace netloom::cuda
