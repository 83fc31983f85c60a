// The i-quant and MXFP4 kernels of every ISA against the scalar reference (kernels/ref,
// vec_dot_iq.cpp): vec_dot and matmul (decode GEMV passes, the tile loop, batches and row
// ranges) must be bit-identical [IQUANT_ORDER], on seeded random blocks with ordinary,
// huge and tiny scales and with all-zero / all-one quant bits (every grid index, sign and
// sub-scale at its extreme).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_data.h"
#include "kernels/quant/fp16.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

const GgmlType kIqTypes[] = {GgmlType::IQ1_S,   GgmlType::IQ1_M, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                             GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ4_NL,  GgmlType::IQ4_XS, GgmlType::MXFP4};

enum class ScaleMode { kRandom, kHuge, kTiny };

// Writes the block scale: the half d (IQ1_M: its 16 bits in the top nibbles of the 4
// scale words), or MXFP4's exponent byte.
void set_scale(GgmlType t, uint8_t* blk, ScaleMode mode, std::mt19937& rng) {
  if (t == GgmlType::MXFP4) {
    std::uniform_int_distribution<int> e(118, 134);
    blk[0] = static_cast<uint8_t>(mode == ScaleMode::kHuge ? 254 : mode == ScaleMode::kTiny ? rng() % 2 : e(rng));
    return;
  }
  std::uniform_real_distribution<float> mag(0.001f, 0.05f);
  const float sign = rng() % 2 ? -1.0f : 1.0f;
  const float d = mode == ScaleMode::kHuge ? 65504.0f : mode == ScaleMode::kTiny ? 5.96e-8f : mag(rng);
  const uint16_t h = f32_to_fp16(sign * d);
  if (t == GgmlType::IQ1_M) {
    uint16_t w[4];
    std::memcpy(w, blk + 48, 8);
    for (int k = 0; k < 4; ++k) w[k] = static_cast<uint16_t>((w[k] & 0x0FFF) | ((h >> (4 * k)) & 0xF) << 12);
    std::memcpy(blk + 48, w, 8);
    return;
  }
  std::memcpy(blk, &h, 2);
}

// n_rows rows of n elements: random bytes (or fill), then valid scales.
std::vector<uint8_t> iq_rows(std::mt19937& rng, GgmlType t, int64_t n, int64_t n_rows, ScaleMode mode, int fill) {
  std::vector<uint8_t> w(ggml_row_size(t, n) * static_cast<size_t>(n_rows));
  for (uint8_t& b : w) b = static_cast<uint8_t>(fill >= 0 ? fill : static_cast<int>(rng() & 0xFF));
  const auto tr = ggml_type_traits(t);
  for (size_t ib = 0; ib < w.size() / static_cast<size_t>(tr.type_size); ++ib)
    set_scale(t, w.data() + ib * static_cast<size_t>(tr.type_size), mode, rng);
  return w;
}

std::vector<uint8_t> act_rows(std::mt19937& rng, GgmlType t, int64_t n, int64_t n_rows, int fill) {
  std::vector<float> x = random_floats(rng, n * n_rows, -2.0f, 2.0f);
  if (fill >= 0)  // +-1 patterns: every activation quant at 127 in magnitude
    for (size_t i = 0; i < x.size(); ++i) x[i] = fill == 0xFF || i % 3 ? 1.0f : -1.0f;
  const GgmlType at = vec_dot_type(t);
  const size_t row = ggml_row_size(at, n);
  std::vector<uint8_t> a(row * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) ref::quantize_act(at, x.data() + r * n, a.data() + r * row, n);
  return a;
}

// Bit equality, with any NaN equal to any NaN (overflowing products of huge scales).
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || f32_to_bits(a) == f32_to_bits(b);
}

std::vector<int64_t> lengths(GgmlType t) {
  if (ggml_type_traits(t).block_size == 32) return {32, 96, 128, 160, 1056};
  return {256, 512, 1280};
}

struct Case {
  ScaleMode mode;
  int fill;  // -1: random quant bits
};
const Case kCases[] = {{ScaleMode::kRandom, -1},
                       {ScaleMode::kHuge, -1},
                       {ScaleMode::kTiny, -1},
                       {ScaleMode::kRandom, 0x00},
                       {ScaleMode::kRandom, 0xFF}};

TEST(IquantKernels, VecDotBitExact) {
  std::mt19937 rng(27);
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : kIqTypes)
      for (int64_t n : lengths(t))
        for (const Case& c : kCases) {
          const auto w = iq_rows(rng, t, n, 1, c.mode, c.fill);
          const auto a = act_rows(rng, t, n, 1, c.fill);
          const float want = ref::vec_dot(t, n, w.data(), a.data());
          const float got = kt->vec_dot(t, n, w.data(), a.data());
          ASSERT_TRUE(same(got, want)) << table_name(*kt) << " " << ggml_type_name(t) << " n=" << n << " mode "
                                       << static_cast<int>(c.mode) << " fill " << c.fill << ": " << got << " vs "
                                       << want;
        }
}

// matmul over row ranges (4-row GEMV passes over quarters, the tile loop for the rest)
// and token counts (decode passes up to the GEMV limit, tiles of 4 tokens beyond): every
// output the reference's bits, rows outside the range untouched.
TEST(IquantKernels, MatmulBitExact) {
  std::mt19937 rng(28);
  const int64_t n_out = 37;
  const std::pair<int64_t, int64_t> ranges[] = {{0, 37}, {1, 6}, {3, 12}, {5, 13}, {12, 13}, {2, 37}};
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : kIqTypes)
      for (const Case& c : kCases) {
        const int64_t n = lengths(t)[1 + static_cast<int>(c.mode)];
        const auto w = iq_rows(rng, t, n, n_out, c.mode, c.fill);
        for (int64_t n_tok : {1, 2, 3, 5, 9}) {
          const auto a = act_rows(rng, t, n, n_tok, c.fill);
          const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
          for (auto [r0, r1] : ranges) {
            std::vector<float> out(static_cast<size_t>(n_out * n_tok), NAN);
            kt->matmul({.wtype = t,
                        .w = w.data(),
                        .w_row_stride = wrow,
                        .n_in = n,
                        .row_begin = r0,
                        .row_end = r1,
                        .act = a.data(),
                        .act_row_stride = arow,
                        .n_tok = n_tok,
                        .out = out.data(),
                        .out_stride = n_out});
            for (int64_t it = 0; it < n_tok; ++it)
              for (int64_t r = 0; r < n_out; ++r) {
                const float got = out[static_cast<size_t>(it * n_out + r)];
                if (r < r0 || r >= r1) {
                  ASSERT_TRUE(std::isnan(got))
                      << table_name(*kt) << " " << ggml_type_name(t) << " row " << r << " outside";
                  continue;
                }
                const float want = ref::vec_dot(t, n, w.data() + r * wrow, a.data() + it * arow);
                ASSERT_TRUE(same(got, want))
                    << table_name(*kt) << " " << ggml_type_name(t) << " n=" << n << " tok " << it << "/" << n_tok
                    << " rows [" << r0 << ", " << r1 << ") row " << r << " mode " << static_cast<int>(c.mode)
                    << " fill " << c.fill << ": " << got << " vs " << want;
              }
          }
        }
      }
}

// Batches longer than the token chunks of IQ1_S's all-token pass (every IQ1_S batch, 64
// activation rows per chunk) and of the int16 batch kernel (64; IQ4_XS, IQ2_XXS).
TEST(IquantKernels, LongBatchesBitExact) {
  std::mt19937 rng(29);
  const int64_t n = 512, n_out = 21, n_tok = 70;
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : {GgmlType::IQ4_XS, GgmlType::IQ2_XXS, GgmlType::IQ1_S}) {
      const auto w = iq_rows(rng, t, n, n_out, ScaleMode::kRandom, -1);
      const auto a = act_rows(rng, t, n, n_tok, -1);
      const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
      std::vector<float> out(static_cast<size_t>(n_out * n_tok), NAN);
      kt->matmul({.wtype = t,
                  .w = w.data(),
                  .w_row_stride = wrow,
                  .n_in = n,
                  .row_begin = 0,
                  .row_end = n_out,
                  .act = a.data(),
                  .act_row_stride = arow,
                  .n_tok = n_tok,
                  .out = out.data(),
                  .out_stride = n_out});
      for (int64_t it = 0; it < n_tok; ++it)
        for (int64_t r = 0; r < n_out; ++r) {
          const float want = ref::vec_dot(t, n, w.data() + r * wrow, a.data() + it * arow);
          ASSERT_TRUE(same(out[static_cast<size_t>(it * n_out + r)], want))
              << table_name(*kt) << " " << ggml_type_name(t) << " tok " << it << " row " << r;
        }
    }
}

}  // namespace
}  // namespace ds::test
