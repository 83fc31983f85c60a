// oneDNN F32/BF16 matmul (kernels/onednn_gemm.cpp) against the reference dot products,
// including a row sub-range and a padded output stride.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_data.h"
#include "kernels/onednn_gemm.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

// Float summation order (oneDNN blocks K its own way): relative to sum |w_i a_i|.
constexpr double kOnednnDotTol = 2e-5;

TEST(Onednn, MatmulMatchesRef) {
  std::mt19937 rng(31);
  const int64_t n_in = 320, n_out = 45, n_tok = 19, ld = 50, r0 = 3, r1 = 44;
  for (GgmlType t : {GgmlType::F32, GgmlType::BF16}) {
    const auto w = random_weights(rng, t, n_in, n_out);
    const auto act = quantize_rows(*kernel_table(Isa::kRef), t, random_floats(rng, n_in * n_tok), n_in, n_tok);
    const size_t wrow = ggml_row_size(t, n_in), arow = ggml_row_size(t, n_in);
    std::vector<float> out(static_cast<size_t>(ld * n_tok), NAN);
    const bool ok = onednn_matmul({.wtype = t,
                                   .w = w.data(),
                                   .w_row_stride = wrow,
                                   .n_in = n_in,
                                   .row_begin = r0,
                                   .row_end = r1,
                                   .act = act.data(),
                                   .act_row_stride = arow,
                                   .n_tok = n_tok,
                                   .out = out.data(),
                                   .out_stride = ld});
    // oneDNN 2.6 has BF16 matmuls from AVX-512 on; below that the call must fail and write nothing.
    if (t == GgmlType::BF16 && !kernel_table(Isa::kAvx512)) {
      EXPECT_FALSE(ok);
      for (float v : out) EXPECT_TRUE(std::isnan(v));
      continue;
    }
    ASSERT_TRUE(ok) << ggml_type_name(t);
    for (int64_t it = 0; it < n_tok; ++it)
      for (int64_t r = 0; r < ld; ++r) {
        const float got = out[static_cast<size_t>(it * ld + r)];
        if (r < r0 || r >= r1) {
          EXPECT_TRUE(std::isnan(got)) << "wrote outside the row range at " << r;
          continue;
        }
        const void* wr = w.data() + r * wrow;
        const void* ar = act.data() + it * arow;
        EXPECT_NEAR(got, ref::vec_dot(t, n_in, wr, ar), kOnednnDotTol * abs_dot(t, wr, ar, n_in))
            << ggml_type_name(t) << " tok " << it << " row " << r;
      }
  }
  std::vector<uint8_t> q(ggml_row_size(GgmlType::Q4_K, 256));
  float y = 0.0f;
  EXPECT_FALSE(onednn_matmul({.wtype = GgmlType::Q4_K,
                              .w = q.data(),
                              .w_row_stride = q.size(),
                              .n_in = 256,
                              .row_begin = 0,
                              .row_end = 1,
                              .act = q.data(),
                              .act_row_stride = q.size(),
                              .n_tok = 1,
                              .out = &y,
                              .out_stride = 1}));
}

}  // namespace
}  // namespace ds::test
