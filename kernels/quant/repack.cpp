// 16-row panel packing (repack.h, docs/repack.md). Scalar: it runs once per matrix at load.
#include "kernels/quant/repack.h"

#include <cstddef>
#include <cstring>

#include "kernels/quant/blocks.h"

namespace ds {

bool repack_supported(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K || t == GgmlType::Q8_0 ||
         t == GgmlType::Q5_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_1 ||
         t == GgmlType::Q2_K || t == GgmlType::Q3_K;
}

namespace {

// Q6_K quants (repack.h): element e = 128 n + 32 qq + l of a GGUF block is the nibble
// qq / 2 of ql[64 n + 32 (qq % 2) + l] with bits 2 qq..2 qq + 1 of qh[32 n + l] above it.
// Its first 48 dwords (ql and qh) are re-encoded instead of moved.
constexpr size_t kQ6kQh = 128, kQ6kQuantDwords = 48;
static_assert(kQ6kQuantDwords * 4 == offsetof(BlockQ6_K, scales));

void q6k_quants(const uint8_t* b, uint8_t* q) {  // q[256] <- the block's quants, 0..63
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const int ql0 = b[64 * n + l], ql1 = b[64 * n + 32 + l], h = b[kQ6kQh + 32 * n + l];
      q[128 * n + l] = static_cast<uint8_t>((ql0 & 0x0F) | (h & 3) << 4);
      q[128 * n + 32 + l] = static_cast<uint8_t>((ql1 & 0x0F) | (h >> 2 & 3) << 4);
      q[128 * n + 64 + l] = static_cast<uint8_t>(ql0 >> 4 | (h >> 4 & 3) << 4);
      q[128 * n + 96 + l] = static_cast<uint8_t>(ql1 >> 4 | (h >> 6) << 4);
    }
}

void q6k_set_quants(const uint8_t* q, uint8_t* b) {  // the inverse: the block's ql and qh
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const int q0 = q[128 * n + l], q1 = q[128 * n + 32 + l], q2 = q[128 * n + 64 + l], q3 = q[128 * n + 96 + l];
      b[64 * n + l] = static_cast<uint8_t>((q0 & 0x0F) | (q2 & 0x0F) << 4);
      b[64 * n + 32 + l] = static_cast<uint8_t>((q1 & 0x0F) | (q3 & 0x0F) << 4);
      b[kQ6kQh + 32 * n + l] = static_cast<uint8_t>(q0 >> 4 | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6);
    }
}

// Byte 4 r + i of line 3 j + k (k < 3) of a packed block: the quant of element
// 16 j + 4 k + i of row r, with bits 2 k..2 k + 1 of the quant of element 16 j + 12 + i in
// bits 6-7.
constexpr size_t q6k_packed_byte(int j, int k, int i, int r) {
  return static_cast<size_t>(64 * (3 * j + k) + 4 * r + i);
}

// Row r's block `row` (GGUF layout) encoded into the packed block `blk`'s quant lines.
void q6k_encode(const uint8_t* row, uint8_t* blk, int r) {
  uint8_t q[kQK_K];
  q6k_quants(row, q);
  for (int j = 0; j < kQK_K / 16; ++j)
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 4; ++i)
        blk[q6k_packed_byte(j, k, i, r)] =
            static_cast<uint8_t>(q[16 * j + 4 * k + i] | (q[16 * j + 12 + i] >> (2 * k) & 3) << 6);
}

// The inverse: row r's ql and qh from the packed block's quant lines.
void q6k_decode(const uint8_t* blk, int r, uint8_t* row) {
  uint8_t q[kQK_K];
  for (int j = 0; j < kQK_K / 16; ++j)
    for (int i = 0; i < 4; ++i) {
      q[16 * j + 12 + i] = 0;
      for (int k = 0; k < 3; ++k) {
        const uint8_t b = blk[q6k_packed_byte(j, k, i, r)];
        q[16 * j + 4 * k + i] = b & 0x3F;
        q[16 * j + 12 + i] |= static_cast<uint8_t>((b >> 6) << (2 * k));
      }
    }
  q6k_set_quants(q, row);
}

// For each row block of panels [p0, p1): piece(row_offset, packed_offset, n_bytes) for every
// piece the layout moves, then block(row_offset, packed_offset, r) (r: the row in its panel).
template <class Piece, class Block>
void for_each_row_block(GgmlType t, int64_t n_in, size_t row_stride, int64_t p0, int64_t p1, Piece&& piece,
                        Block&& block) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  // The fp16 d (and m) of the 32-block types, moved behind the quants.
  const size_t head = t == GgmlType::Q8_0 || t == GgmlType::Q5_0 || t == GgmlType::Q4_0 ? 2
                      : t == GgmlType::Q4_1 || t == GgmlType::Q5_1                      ? 4
                                                                                        : 0;
  const size_t bb = static_cast<size_t>(tr.type_size), nd = (bb - head) / 4, rest = (bb - head) % 4;
  const size_t k0 = t == GgmlType::Q6_K ? kQ6kQuantDwords : 0;  // dwords re-encoded by `block`
  const int64_t nb = n_in / tr.block_size;
  for (int64_t p = p0; p < p1; ++p) {
    const size_t panel = static_cast<size_t>(p) * kPanelRows * row_stride;
    for (int64_t ib = 0; ib < nb; ++ib) {
      const size_t blk = panel + static_cast<size_t>(ib) * kPanelRows * bb;
      for (int r = 0; r < kPanelRows; ++r) {
        const size_t row = panel + static_cast<size_t>(r) * row_stride + static_cast<size_t>(ib) * bb;
        for (size_t k = k0; k < nd; ++k)
          piece(row + head + 4 * k, blk + 64 * k + 4 * static_cast<size_t>(r), size_t{4});
        if (rest) piece(row + head + 4 * nd, blk + 64 * nd + rest * static_cast<size_t>(r), rest);
        if (head) piece(row, blk + 64 * nd + head * static_cast<size_t>(r), head);
        block(row, blk, r);
      }
    }
  }
}

}  // namespace

void repack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* src, uint8_t* dst, int64_t p0,
                   int64_t p1) {
  for_each_row_block(
      t, n_in, row_stride, p0, p1, [&](size_t ro, size_t po, size_t n) { std::memcpy(dst + po, src + ro, n); },
      [&](size_t ro, size_t po, int r) {
        if (t == GgmlType::Q6_K) q6k_encode(src + ro, dst + po, r);
      });
}

void unpack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* packed, uint8_t* rows, int64_t p0,
                   int64_t p1) {
  for_each_row_block(
      t, n_in, row_stride, p0, p1, [&](size_t ro, size_t po, size_t n) { std::memcpy(rows + ro, packed + po, n); },
      [&](size_t ro, size_t po, int r) {
        if (t == GgmlType::Q6_K) q6k_decode(packed + po, r, rows + ro);
      });
}

}  // namespace ds
