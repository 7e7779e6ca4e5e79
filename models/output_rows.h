// How an output projection of `rows` rows is cut into pieces, without torch: the one rule
// that the model (models/output_pieces.h) and the simulator's profile cut
// (p3/sim/profile.h, CutOutputBlock) share, so that both always agree on each piece's size.
//
// Piece i of n owns rows / n rows, and the first rows % n pieces one row more, in order:
// 32,000 rows in 3 pieces are 10,667 + 10,667 + 10,666.
//
// Example:
//   int64_t start = 0;
//   for (int64_t i = 0; i < n; ++i) {
//     const int64_t own = p3::models::OutputPieceRows(rows, n, i);  // rows [start, start + own)
//     start += own;
//   }
#ifndef P3_MODELS_OUTPUT_ROWS_H_
#define P3_MODELS_OUTPUT_ROWS_H_

#include <cstdint>

namespace p3::models {

// The rows of piece `i` (0 <= i < pieces) when `rows` rows are cut into `pieces` pieces
// (1 <= pieces <= rows; the callers check the count and name what is wrong).
constexpr int64_t OutputPieceRows(int64_t rows, int64_t pieces, int64_t i) {
  return rows / pieces + (i < rows % pieces ? 1 : 0);
}

}  // namespace p3::models

#endif  // P3_MODELS_OUTPUT_ROWS_H_
