// The prefill path of matmul (16-row panels from 8 activation rows on, at most 256 rows per
// pass; the tile loop below that and for the rows the panels leave) against the scalar
// reference bit for bit ([KQUANT_EXACT] / [QUANT_EXACT]), at every token count that changes
// the split: 1..9, panel passes with 4-token groups and 1-3 left over, 255..257 and 300 (two
// passes). Row ranges are not multiples of 16 and start off a multiple of 16 (panels plus
// tile-loop rows), and the 32-block types run at the MoE expert-down width (1408 = 5.5
// superblocks). Equality with the reference for every count is [BATCH_INVARIANT].
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_data.h"
#include "kernels/quant/fp16.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(PanelMatmul, EveryTokenCountMatchesRefBitwise) {
  std::mt19937 rng(21);
  const int64_t n_out = 37, max_tok = 300, ld = 41;
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                            GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  const int64_t counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 48, 64, 255, 256, 257, 300};
  for (GgmlType t : types) {
    const int64_t n = ggml_type_traits(t).block_size == 32 ? 1408 : 768;
    const auto w = random_weights(rng, t, n, n_out);
    const auto x = random_floats(rng, n * max_tok);
    const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
    for (const KernelTable* kt : available_tables()) {
      if (kt->isa == Isa::kRef) continue;  // the reference against itself
      const auto act = quantize_rows(*kt, t, x, n, max_tok);
      std::vector<float> want(static_cast<size_t>(n_out * max_tok));
      for (int64_t it = 0; it < max_tok; ++it)
        for (int64_t r = 0; r < n_out; ++r)
          want[static_cast<size_t>(it * n_out + r)] = ref::vec_dot(t, n, w.data() + r * wrow, act.data() + it * arow);
      for (int64_t nt : counts) {
        const int64_t t0 = (nt * 7) % (max_tok - nt + 1);  // varied first token
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, n_out}, {3, 37}, {5, 21}}) {
          std::vector<float> out(static_cast<size_t>(ld * nt), NAN);
          kt->matmul({.wtype = t,
                      .w = w.data(),
                      .w_row_stride = wrow,
                      .n_in = n,
                      .row_begin = r0,
                      .row_end = r1,
                      .act = act.data() + static_cast<size_t>(t0) * arow,
                      .act_row_stride = arow,
                      .n_tok = nt,
                      .out = out.data(),
                      .out_stride = ld});
          for (int64_t it = 0; it < nt; ++it)
            for (int64_t r = r0; r < r1; ++r)
              ASSERT_EQ(bits_of(out[static_cast<size_t>(it * ld + r)]),
                        bits_of(want[static_cast<size_t>((t0 + it) * n_out + r)]))
                  << table_name(*kt) << " " << ggml_type_name(t) << " n_tok " << nt << " tok " << t0 + it << " row "
                  << r << " rows [" << r0 << ", " << r1 << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace ds::test
