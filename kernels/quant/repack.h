// 16-row panels: a quantized matrix's rows rearranged so that a 64-byte load yields one
// dword of each of 16 rows (the "lanes = rows" registers of the AVX-512 panel kernels),
// see docs/repack.md. Rows [16p, 16p + 16) take exactly the 16 * row_stride bytes they
// had, at the same offset: a pure permutation of the bytes, except Q6_K's quants (below).
//
// Within panel p, block ib starts at p * 16 * row_stride + ib * 16 * block_bytes. A block's
// first `head` bytes (the fp16 d of Q8_0, Q5_0 and Q4_0: 2; d and m of Q4_1 and Q5_1: 4;
// none for the K-quants) go behind the rest, so that the quants start dword-aligned: dword k
// (k < (block_bytes - head) / 4) of the block's bytes from `head` on, of row r, is at
// 64 * k + 4 * r; the last (block_bytes - head) % 4 bytes (2 for Q6_K and Q3_K, else none)
// of row r at 64 * nd + 2 * r, and
// the head of row r at 64 * nd + head * r (nd: the number of dwords).
//   Q8_0 (34 bytes): quant dwords 0-7, then the 16 rows' d (512 + 2 r).
//   Q5_0 (22 bytes): qh (dword 0), qs dwords 1-4, then d (320 + 2 r).
//   Q4_0 (18 bytes): qs dwords 0-3, then d (256 + 2 r).
//   Q4_1 (20 bytes): qs dwords 0-3, then d | m (256 + 4 r); Q5_1 (24): qh, qs 1-4, d | m.
//   Q2_K (84 bytes): scales dwords 0-3, qs 4-19, d | dmin 20.
//   Q3_K (110 bytes): hmask dwords 0-7, qs 8-23, scales 24-26, then d (1728 + 2 r).
//   Q6_K (210 bytes): 48 quant lines, scales dwords 48-51, then d (3328 + 2 r). The quant
//     lines are re-encoded instead of permuted: byte 4 r + i of line 3 j + k (k < 3) holds
//     the 6-bit quant of element 16 j + 4 k + i of row r in bits 0-5 and bits 2k, 2k + 1 of
//     the quant of element 16 j + 12 + i in bits 6-7, so that a sub-block's four dpbusd
//     words cost 9 operations (kernels/avx512/panel_kquant.h, q6k_packed_words).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds {

constexpr int kPanelRows = 16;

// Types with packed kernels (AVX-512): the K-quants Q2_K..Q6_K and the 32-block types
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
bool repack_supported(GgmlType t);

// Packs panels [p0, p1) of the matrix with rows row_stride bytes apart (n_in elements of
// type t per row) from src into dst (both indexed from row 0).
void repack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* src, uint8_t* dst, int64_t p0,
                   int64_t p1);

// The inverse, for tests: panels [p0, p1) of dst back into rows.
void unpack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* packed, uint8_t* rows, int64_t p0,
                   int64_t p1);

}  // namespace ds
