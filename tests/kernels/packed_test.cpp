// Weights repacked into 16-row panels (kernels/quant/repack.h): the layout is a byte
// permutation (Q6_K: its quants re-encoded) that unpack_panels inverts, and matmul over a packed copy (MatmulArgs::
// w_panels; AVX-512 kernels read it, others ignore it) equals the scalar reference bit for
// bit ([KQUANT_EXACT]) at every token count that changes the path (1: the fused one-row
// kernels; 2..8: panel after panel; 9+: panel kernels with 8/4/1-token groups; two 256-token
// passes) and on row ranges with
// unaligned heads and tails (the rows outside 16-aligned panels go the unpacked way). The
// AVX-512 kernels get rows whose packed part is scrambled, so they must read the panels.
// Equality with the reference everywhere is [BATCH_INVARIANT]. Rows outside the range
// stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_data.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/fp16.h"
#include "kernels/quant/repack.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

const GgmlType kPackTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0,
                               GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_1, GgmlType::Q5_1};

// Bytes at a block's start that the packed layout moves behind its dwords (repack.h).
size_t head_bytes(GgmlType t) {
  if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) return 4;
  return t == GgmlType::Q8_0 || t == GgmlType::Q5_0 || t == GgmlType::Q4_0 ? 2 : 0;
}

// Q6_K element e of a GGUF block (../shared/SPEC.md, "Block formats"), unsigned 0..63: for
// e = 128 n + 32 qq + l, nibble qq / 2 of ql[64 n + 32 (qq % 2) + l] with bits 2 qq..2 qq + 1
// of qh[32 n + l] (at byte 128) as bits 4-5.
int q6k_quant_of(const uint8_t* blk, int e) {
  const int n = e / 128, qq = e % 128 / 32, l = e % 32;
  return (blk[64 * n + 32 * (qq % 2) + l] >> (4 * (qq / 2)) & 0x0F) | (blk[128 + 32 * n + l] >> (2 * qq) & 3) << 4;
}

TEST(Repack, IsAPermutationThatUnpackInverts) {
  std::mt19937 rng(31);
  for (GgmlType t : kPackTypes) {
    if (t == GgmlType::Q6_K) continue;  // re-encodes its quants: Q6kQuantsAreReencoded
    const int64_t n = 512, n_out = 53, n_panels = n_out / kPanelRows;
    const auto w = random_weights(rng, t, n, n_out);
    const size_t wrow = ggml_row_size(t, n);
    std::vector<uint8_t> packed(w.size(), 0xA5), back(w.size(), 0);
    repack_panels(t, n, wrow, w.data(), packed.data(), 0, n_panels);
    const size_t covered = static_cast<size_t>(n_panels * kPanelRows) * wrow;
    // Same bytes, rearranged: equal byte histograms over the packed rows, untouched after.
    std::vector<int> h0(256), h1(256);
    for (size_t i = 0; i < covered; ++i) ++h0[w[i]], ++h1[packed[i]];
    EXPECT_EQ(h0, h1) << ggml_type_name(t);
    for (size_t i = covered; i < w.size(); ++i) ASSERT_EQ(packed[i], 0xA5) << ggml_type_name(t);
    EXPECT_NE(std::memcmp(packed.data(), w.data(), covered), 0) << ggml_type_name(t) << " layout unchanged";
    unpack_panels(t, n, wrow, packed.data(), back.data(), 0, n_panels);
    EXPECT_EQ(std::memcmp(back.data(), w.data(), covered), 0) << ggml_type_name(t);
    // Dword k of row r of block 1 of panel 2 (counted from the block's byte `head`) sits at
    // 64 k + 4 r of that block; the head bytes (the fp16 d) of row r after the dwords.
    const size_t bb = static_cast<size_t>(ggml_type_traits(t).type_size), head = head_bytes(t);
    const size_t nd = (bb - head) / 4;
    const size_t blk = 2 * kPanelRows * wrow + 1 * kPanelRows * bb;
    for (int r : {0, 5, 15}) {
      const uint8_t* row = w.data() + (2 * kPanelRows + static_cast<size_t>(r)) * wrow + bb;
      for (size_t k : {size_t{0}, size_t{3}, nd - 1})
        EXPECT_EQ(std::memcmp(packed.data() + blk + 64 * k + 4 * static_cast<size_t>(r), row + head + 4 * k, 4), 0)
            << ggml_type_name(t) << " row " << r << " dword " << k;
      if (head) {
        EXPECT_EQ(std::memcmp(packed.data() + blk + 64 * nd + head * static_cast<size_t>(r), row, head), 0)
            << ggml_type_name(t) << " row " << r << " d";
      }
    }
  }
}

// Q6_K's quant lines are re-encoded (repack.h): line 3 j + k (k < 3) holds, at byte
// 4 r + i, the quant of element 16 j + 4 k + i of row r in bits 0-5 and bits 2 k, 2 k + 1 of
// the quant of element 16 j + 12 + i in bits 6-7. Scales and d are permuted as for the other
// K-quants, and unpack_panels inverts it all.
TEST(Repack, Q6kQuantsAreReencoded) {
  std::mt19937 rng(33);
  const GgmlType t = GgmlType::Q6_K;
  const int64_t n = 512, n_out = 37, n_panels = n_out / kPanelRows;
  const auto w = random_weights(rng, t, n, n_out);
  const size_t wrow = ggml_row_size(t, n), bb = sizeof(BlockQ6_K);
  std::vector<uint8_t> packed(w.size(), 0xA5), back(w.size(), 0);
  repack_panels(t, n, wrow, w.data(), packed.data(), 0, n_panels);
  const size_t covered = static_cast<size_t>(n_panels * kPanelRows) * wrow;
  for (size_t i = covered; i < w.size(); ++i) ASSERT_EQ(packed[i], 0xA5);
  int checked = 0;
  for (int64_t p = 0; p < n_panels; ++p)
    for (int64_t ib = 0; ib < n / 256; ++ib) {
      const uint8_t* blk =
          packed.data() + static_cast<size_t>(p) * kPanelRows * wrow + static_cast<size_t>(ib) * kPanelRows * bb;
      for (int r = 0; r < kPanelRows; ++r) {
        const uint8_t* row = w.data() + static_cast<size_t>(p * kPanelRows + r) * wrow + static_cast<size_t>(ib) * bb;
        for (int e = 0; e < 256; ++e) {
          const int j = e / 16, g = e % 16 / 4, i = e % 4;
          int got = 0;
          if (g < 3) {
            got = blk[64 * (3 * j + g) + 4 * r + i] & 0x3F;
          } else {
            for (int k = 0; k < 3; ++k) got |= (blk[64 * (3 * j + k) + 4 * r + i] >> 6) << (2 * k);
          }
          ASSERT_EQ(got, q6k_quant_of(row, e)) << "panel " << p << " block " << ib << " row " << r << " element " << e;
          ++checked;
        }
        for (int k = 0; k < 4; ++k)  // scales dwords 48-51
          ASSERT_EQ(std::memcmp(blk + 64 * (48 + k) + 4 * r, row + offsetof(BlockQ6_K, scales) + 4 * k, 4), 0);
        ASSERT_EQ(std::memcmp(blk + 64 * 52 + 2 * r, row + offsetof(BlockQ6_K, d), 2), 0);
      }
    }
  EXPECT_EQ(checked, n_panels * (n / 256) * kPanelRows * 256);
  unpack_panels(t, n, wrow, packed.data(), back.data(), 0, n_panels);
  EXPECT_EQ(std::memcmp(back.data(), w.data(), covered), 0);
}

TEST(Repack, PackedMatmulMatchesRefBitwise) {
  std::mt19937 rng(32);
  const int64_t n_out = 83, max_tok = 300, ld = 89;  // 5 panels + 3 rows
  const int64_t counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 33, 256, 257};
  for (GgmlType t : kPackTypes) {
    const int64_t n = 768;
    const auto w = random_weights(rng, t, n, n_out);
    const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
    std::vector<uint8_t> packed(w.size());
    repack_panels(t, n, wrow, w.data(), packed.data(), 0, n_out / kPanelRows);
    const auto x = random_floats(rng, n * max_tok);
    for (const KernelTable* kt : available_tables()) {
      const auto act = quantize_rows(*kt, t, x, n, max_tok);

      for (int64_t nt : counts) {
        const int64_t t0 = (nt * 5) % (max_tok - nt + 1);
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, n_out}, {0, 80}, {3, 70}, {16, 48}, {5, 13}, {64, 83}}) {
          // The AVX-512 kernels must read the rows of the panels wholly inside the range
          // from the panels (the engine releases the originals): there those rows are
          // scrambled.
          std::vector<uint8_t> rows = w;
          if (kt->isa == Isa::kAvx512) {
            const int64_t pb = (r0 + kPanelRows - 1) / kPanelRows * kPanelRows, pe = r1 / kPanelRows * kPanelRows;
            for (int64_t r = pb; r < pe; ++r)
              for (size_t i = 0; i < wrow; ++i) rows[static_cast<size_t>(r) * wrow + i] ^= 0x5A;
          }
          std::vector<float> out(static_cast<size_t>(ld * nt), NAN);
          kt->matmul({.wtype = t,
                      .w = rows.data(),
                      .w_row_stride = wrow,
                      .n_in = n,
                      .row_begin = r0,
                      .row_end = r1,
                      .act = act.data() + static_cast<size_t>(t0) * arow,
                      .act_row_stride = arow,
                      .n_tok = nt,
                      .out = out.data(),
                      .out_stride = ld,
                      .w_panels = packed.data()});
          for (int64_t it = 0; it < nt; ++it)
            for (int64_t r = 0; r < ld; ++r) {
              const float got = out[static_cast<size_t>(it * ld + r)];
              if (r < r0 || r >= r1) {
                ASSERT_TRUE(std::isnan(got)) << table_name(*kt) << " row " << r << " outside the range written";
                continue;
              }
              const float want = ref::vec_dot(t, n, w.data() + r * wrow, act.data() + (t0 + it) * arow);
              ASSERT_EQ(f32_to_bits(got), f32_to_bits(want))
                  << table_name(*kt) << " " << ggml_type_name(t) << " n_tok " << nt << " tok " << t0 + it << " row "
                  << r << " rows [" << r0 << ", " << r1 << ")";
            }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ds::test
