// Every kernel table this CPU can run against the scalar reference, on seeded data with
// awkward shapes (tails, 1 row and many rows, odd token counts). Activation quantization
// and KV stores must be bit-exact; dot products agree to float rounding (same integer
// sums, different float summation order); matmul is batch invariant bitwise per ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "kernel_test_data.h"
#include "kernels/quant/fp16.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

// Float summation order of per-block partial sums: at most a few 2^-24 per block,
// relative to sum |w_i a_i|. Float (F32/F16/BF16) rows sum in float lanes instead of
// double: sqrt(n)-ish growth, bounded here for n <= 4099.
constexpr double kDotTol = 1e-5;
constexpr double kFloatDotTol = 2e-5;
// [KQUANT_EXACT] / [QUANT_EXACT]: quantized dot products (every block type but the float
// ones) are bit-identical to the reference on every ISA.
bool kquant(GgmlType t) {
  return ggml_type_traits(t).block_size > 1;
}
// Elementwise ops with vectorized exp/sqrt: a few ulps.
constexpr double kElemRelTol = 2e-6;

std::vector<int64_t> test_lengths(GgmlType t) {
  const int bs = ggml_type_traits(t).block_size;
  if (bs == 1) return {1, 15, 16, 17, 64, 129, 4099};
  if (bs == 32) return {32, 96, 160, 4128};
  return {256, 768, 1280};
}

std::string isa_label(const KernelTable& kt, GgmlType t) {
  return std::string(table_name(kt)) + " " + ggml_type_name(t);
}

TEST(IsaVsRef, ActivationQuantizationBitExact) {
  std::mt19937 rng(11);
  for (const KernelTable* kt : available_tables()) {
    for (GgmlType at : {GgmlType::Q8_K, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
      const int bs = ggml_type_traits(at).block_size;
      for (int64_t nb : {1, 2, 3, 17}) {
        const int64_t n = nb * (bs == 1 ? 37 : bs);
        auto x = random_floats(rng, n, -4.0f, 4.0f);
        // Awkward values: an all-zero first block, exact halves, a negative extreme.
        for (int i = 0; i < std::min<int64_t>(bs, n); ++i) x[static_cast<size_t>(i)] = 0.0f;
        if (n > bs + 3) {
          x[static_cast<size_t>(bs)] = -4.0f;
          x[static_cast<size_t>(bs + 1)] = 2.0f;
          x[static_cast<size_t>(bs + 2)] = 1.0f / 127.0f * 63.5f;
        }
        const size_t bytes = ggml_row_size(at, n);
        std::vector<uint8_t> want(bytes), got(bytes, 0xAB);
        ref::quantize_act(at, x.data(), want.data(), n);
        kt->quantize_act(at, x.data(), got.data(), n);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), bytes)) << isa_label(*kt, at) << " n=" << n;
      }
    }
  }
}

// [QUANT_CLAMP] NaN and infinite activations (a broken model's) must not overflow the int32
// block sums: every quant stays in [-127, 127] and the Q8_K group sums equal the stored
// quants' sums. The reference is not run: its float-to-int cast of NaN is itself undefined.
TEST(IsaVsRef, NonFiniteActivationsQuantizeConsistently) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const KernelTable* kt : available_tables()) {
    if (std::string(table_name(*kt)) == "ref") continue;
    for (const std::vector<float>& fill : {std::vector<float>{nan}, {inf}, {-inf}, {nan, 1.0f, -inf, 3.0f}}) {
      std::vector<float> x(kQK_K);
      for (size_t i = 0; i < x.size(); ++i) x[i] = fill[i % fill.size()];
      BlockQ8_K k{};
      kt->quantize_act(GgmlType::Q8_K, x.data(), &k, kQK_K);
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) {
          EXPECT_GE(k.qs[16 * g + j], -127) << table_name(*kt);
          sum += k.qs[16 * g + j];
        }
        EXPECT_EQ(k.bsums[g], sum) << table_name(*kt) << " group " << g;
      }
      std::vector<BlockQ8_1> b1(kQK_K / kQK8_1);
      kt->quantize_act(GgmlType::Q8_1, x.data(), b1.data(), kQK_K);
      for (const BlockQ8_1& b : b1) {
        for (int8_t q : b.qs) EXPECT_GE(q, -127) << table_name(*kt);
      }
    }
  }
}

TEST(IsaVsRef, VecDotAgreesToFloatRounding) {
  std::mt19937 rng(12);
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : weight_types())
      for (int64_t n : test_lengths(t)) {
        const auto w = random_weights(rng, t, n, 1);
        const auto x = random_floats(rng, n);
        const auto act = quantize_rows(*kt, t, x, n, 1);
        const double tol =
            (ggml_type_traits(t).block_size == 1 ? kFloatDotTol : kDotTol) * abs_dot(t, w.data(), act.data(), n);
        const float want = ref::vec_dot(t, n, w.data(), act.data());
        const float got = kt->vec_dot(t, n, w.data(), act.data());
        EXPECT_NEAR(got, want, tol) << isa_label(*kt, t) << " n=" << n;
        if (kquant(t)) {
          EXPECT_EQ(f32_to_bits(got), f32_to_bits(want)) << isa_label(*kt, t) << " n=" << n;
        }
      }
}

// Runs matmul over rows [r0, r1) and tokens [t0, t0 + nt) into out (stride ld).
void run_matmul(const KernelTable& kt, GgmlType t, int64_t n, const std::vector<uint8_t>& w,
                const std::vector<uint8_t>& act, int64_t r0, int64_t r1, int64_t t0, int64_t nt, float* out,
                int64_t ld) {
  const size_t arow = ggml_row_size(vec_dot_type(t), n);
  kt.matmul({.wtype = t,
             .w = w.data(),
             .w_row_stride = ggml_row_size(t, n),
             .n_in = n,
             .row_begin = r0,
             .row_end = r1,
             .act = act.data() + static_cast<size_t>(t0) * arow,
             .act_row_stride = arow,
             .n_tok = nt,
             .out = out,
             .out_stride = ld});
}

TEST(IsaVsRef, MatmulMatchesRefAndIsBatchInvariant) {
  std::mt19937 rng(13);
  const int64_t n_out = 37, n_tok = 13, ld = 41;  // ld > n_out: a padded output
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : weight_types()) {
      const int64_t n = test_lengths(t)[1];
      const auto w = random_weights(rng, t, n, n_out);
      const auto x = random_floats(rng, n * n_tok);
      const auto act = quantize_rows(*kt, t, x, n, n_tok);
      const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
      std::vector<float> full(static_cast<size_t>(ld * n_tok), NAN);
      run_matmul(*kt, t, n, w, act, 0, n_out, 0, n_tok, full.data(), ld);
      double worst = 0.0;
      for (int64_t it = 0; it < n_tok; ++it)
        for (int64_t r = 0; r < n_out; ++r) {
          const void* wr = w.data() + r * wrow;
          const void* ar = act.data() + it * arow;
          const double want = ref::vec_dot(t, n, wr, ar);
          const double tol = (ggml_type_traits(t).block_size == 1 ? kFloatDotTol : kDotTol) * abs_dot(t, wr, ar, n);
          const float got = full[static_cast<size_t>(it * ld + r)];
          if (kquant(t)) {
            ASSERT_EQ(f32_to_bits(got), f32_to_bits(static_cast<float>(want))) << isa_label(*kt, t);
          }
          const double err = std::fabs(got - want);
          worst = std::max(worst, err / std::max(tol, 1e-30));
          ASSERT_LE(err, tol) << isa_label(*kt, t) << " row " << r << " tok " << it;
        }
      RecordProperty(isa_label(*kt, t) + " worst err/tol", std::to_string(worst));
      // Batch invariance: each token alone, odd token groups and row sub-ranges give the
      // same bits as the full batch.
      for (int64_t t0 : {0L, 5L, 12L})
        for (int64_t nt : {1L, 3L}) {
          if (t0 + nt > n_tok) continue;
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, n_out}, {1, 2}, {3, 36}}) {
            std::vector<float> part(static_cast<size_t>(ld * nt), NAN);
            run_matmul(*kt, t, n, w, act, r0, r1, t0, nt, part.data(), ld);
            for (int64_t it = 0; it < nt; ++it)
              for (int64_t r = r0; r < r1; ++r)
                ASSERT_EQ(f32_to_bits(part[static_cast<size_t>(it * ld + r)]),
                          f32_to_bits(full[static_cast<size_t>((t0 + it) * ld + r)]))
                    << isa_label(*kt, t) << " tok " << t0 + it << " row " << r << " batch " << nt;
          }
        }
    }
}

// Decode (one activation row): the 4-row GEMV passes (kernels/avx512/matmul_gemv*.cpp)
// and the tile loop for the rows left over are bit-identical to the reference for every
// quantized type, on row ranges that are not multiples of 4 and block counts with tails
// (32-blocks go 4 at a time), also with extreme quants against +-127 activations (int16
// packing and offset arithmetic must not overflow). Rows outside the range stay untouched.
TEST(IsaVsRef, DecodeGemvBitExact) {
  std::mt19937 rng(18);
  // Ranges of 4+ rows take passes over their quarters (one row of each per pass, rows
  // q apart), the rest adjacent rows or the tile loop; rows outside must stay untouched.
  const int64_t n_out = 37;
  const std::pair<int64_t, int64_t> ranges[] = {{0, 13},  {0, 4},  {1, 6},  {3, 12}, {5, 13},
                                                {12, 13}, {0, 37}, {2, 37}, {3, 35}};
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : weight_types()) {
      if (!kquant(t)) continue;
      const bool k = ggml_type_traits(t).block_size == 256;
      for (int64_t n :
           k ? std::vector<int64_t>{256, 512, 768, 1536} : std::vector<int64_t>{32, 96, 128, 160, 224, 1408})
        for (int fill : {-1, 0xFF, 0x80, 0x00}) {
          auto w = random_weights(rng, t, n, n_out);
          std::vector<float> x = random_floats(rng, n);
          if (fill >= 0) {
            fill_quants(t, w, static_cast<uint8_t>(fill));
            for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = fill == 0xFF || i % 3 ? 1.0f : -1.0f;
          }
          const auto act = quantize_rows(*kt, t, x, n, 1);
          for (auto [r0, r1] : ranges) {
            std::vector<float> out(static_cast<size_t>(n_out), NAN);
            run_matmul(*kt, t, n, w, act, r0, r1, 0, 1, out.data(), n_out);
            for (int64_t r = 0; r < n_out; ++r) {
              const float got = out[static_cast<size_t>(r)];
              if (r < r0 || r >= r1) {
                ASSERT_TRUE(std::isnan(got)) << isa_label(*kt, t) << " row " << r << " outside the range written";
                continue;
              }
              const float want = ref::vec_dot(t, n, w.data() + r * ggml_row_size(t, n), act.data());
              ASSERT_EQ(f32_to_bits(got), f32_to_bits(want))
                  << isa_label(*kt, t) << " n=" << n << " fill=" << fill << " rows [" << r0 << ", " << r1 << ") row "
                  << r << ": " << got << " vs " << want;
            }
          }
        }
    }
}

// [IQUANT_ORDER]: the i-quant and MXFP4 dot products are bit-identical to the reference on
// every ISA also at the formats' extreme scales (+-65504, subnormal and zero halves; MXFP4
// exponents 0, 1, 2, 254), with extreme quants and +-1 activations as well as random ones,
// through vec_dot and through matmul (1 and 5 tokens).
TEST(IsaVsRef, IquantExtremeScalesBitExact) {
  std::mt19937 rng(19);
  const int64_t n_out = 9;
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : iquant_types())
      for (int64_t n :
           ggml_type_traits(t).block_size == 256 ? std::vector<int64_t>{256, 1280} : std::vector<int64_t>{32, 96, 1056})
        for (int fill : {-1, 0xFF, 0x00, 0x5A}) {
          auto w = random_weights(rng, t, n, n_out);
          if (fill >= 0) fill_quants(t, w, static_cast<uint8_t>(fill));
          set_extreme_scales(rng, t, w);
          std::vector<float> x = random_floats(rng, n * 5, -3.0f, 3.0f);
          if (fill >= 0)
            for (size_t i = 0; i < x.size(); ++i) x[i] = fill == 0xFF || i % 3 ? 1.0f : -1.0f;
          const auto act = quantize_rows(*kt, t, x, n, 5);
          const size_t wrow = ggml_row_size(t, n), arow = ggml_row_size(vec_dot_type(t), n);
          for (int64_t nt : {1L, 5L}) {
            std::vector<float> out(static_cast<size_t>(n_out * nt), NAN);
            run_matmul(*kt, t, n, w, act, 0, n_out, 0, nt, out.data(), n_out);
            for (int64_t it = 0; it < nt; ++it)
              for (int64_t r = 0; r < n_out; ++r) {
                const float want = ref::vec_dot(t, n, w.data() + r * wrow, act.data() + it * arow);
                const float got = out[static_cast<size_t>(it * n_out + r)];
                const float dot = kt->vec_dot(t, n, w.data() + r * wrow, act.data() + it * arow);
                ASSERT_EQ(f32_to_bits(got), f32_to_bits(want))
                    << isa_label(*kt, t) << " matmul n=" << n << " fill=" << fill << " tok " << it << " row " << r
                    << ": " << got << " vs " << want;
                ASSERT_EQ(f32_to_bits(dot), f32_to_bits(want))
                    << isa_label(*kt, t) << " vec_dot n=" << n << " fill=" << fill << " row " << r;
              }
          }
        }
}

TEST(IsaVsRef, ElementwiseOps) {
  std::mt19937 rng(14);
  for (const KernelTable* kt : available_tables())
    for (int64_t n : {1L, 7L, 16L, 33L, 2048L, 7168L + 5}) {
      const auto x = random_floats(rng, n, -6.0f, 6.0f), w = random_floats(rng, n);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      auto check = [&](const char* what) {
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(got[i], want[i], kElemRelTol * std::fabs(want[i]) + 1e-30)
              << table_name(*kt) << " " << what << " n=" << n << " i=" << i;
      };
      ref::rms_norm(x.data(), w.data(), want.data(), n, 1e-5f);
      kt->rms_norm(x.data(), w.data(), got.data(), n, 1e-5f);
      check("rms_norm");
      ref::rms_norm(x.data(), nullptr, want.data(), n, 1e-5f);
      kt->rms_norm(x.data(), nullptr, got.data(), n, 1e-5f);
      check("rms_norm (no weight)");
      ref::silu_mul(x.data(), w.data(), want.data(), n);
      kt->silu_mul(x.data(), w.data(), got.data(), n);
      check("silu_mul");
      want = x;
      got = x;
      ref::softmax(want.data(), n, 0.7f);
      kt->softmax(got.data(), n, 0.7f);
      check("softmax");
    }
}

TEST(IsaVsRef, Rope) {
  std::mt19937 rng(15);
  const float ff[32] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
  const RopeParams params[] = {
      {.n_rot = 64, .freq_base = 10000.0f, .freq_scale = 1.0f / 40, .ext_factor = 1.0f, .n_ctx_orig = 4096},
      {.n_rot = 64, .neox = true, .freq_base = 1e6f},
      {.n_rot = 32, .freq_base = 100000.0f, .freq_scale = 0.25f},
      {.n_rot = 64, .freq_base = 500000.0f, .freq_factors = ff},
  };
  for (const KernelTable* kt : available_tables())
    for (const RopeParams& p : params) {
      const int head = 72, n_head = 3, n_tok = 5;
      const int32_t pos[n_tok] = {0, 1, 17, 1000, 4095};
      const auto x = random_floats(rng, n_tok * n_head * head);
      auto want = x, got = x;
      const RopeArgs a{
          .x = nullptr, .n_tok = n_tok, .n_head = n_head, .tok_stride = n_head * head, .head_stride = head, .pos = pos};
      RopeArgs aw = a, ag = a;
      aw.x = want.data();
      ag.x = got.data();
      ref::rope(aw, p);
      kt->rope(ag, p);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << table_name(*kt) << " i=" << i;
    }
}

TEST(IsaVsRef, StoreKvBitExact) {
  std::mt19937 rng(16);
  for (const KernelTable* kt : available_tables())
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
      for (int64_t n : {32L, 64L, 576L}) {
        const auto x = random_floats(rng, n, -20.0f, 20.0f);
        const size_t bytes = ggml_row_size(t, n);
        std::vector<uint8_t> want(bytes), got(bytes, 0xCD);
        ref::store_kv(t, x.data(), want.data(), n);
        kt->store_kv(t, x.data(), got.data(), n);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), bytes)) << isa_label(*kt, t) << " n=" << n;
      }
}

TEST(IsaVsRef, MoeRoute) {
  std::mt19937 rng(17);
  const int n_tok = 9, n_expert = 64, k = 6;
  const auto logits = random_floats(rng, n_tok * n_expert, -3.0f, 3.0f);
  const auto bias = random_floats(rng, n_expert, -0.1f, 0.1f);
  for (const KernelTable* kt : available_tables()) {
    std::vector<int32_t> ids_want(n_tok * k), ids_got(n_tok * k);
    std::vector<float> w_want(n_tok * k), w_got(n_tok * k), scratch(moe_route_scratch_floats(n_expert));
    MoeRouteArgs a{.logits = logits.data(),
                   .n_tok = n_tok,
                   .n_expert = n_expert,
                   .n_expert_used = k,
                   .n_group = 8,
                   .n_group_used = 3,
                   .gating = MoeGating::kSigmoid,
                   .bias = bias.data(),
                   .norm = true,
                   .scale = 2.5f,
                   .ids = ids_want.data(),
                   .weights = w_want.data(),
                   .scratch = scratch.data()};
    ref::moe_route(a);
    a.ids = ids_got.data();
    a.weights = w_got.data();
    kt->moe_route(a);
    EXPECT_EQ(ids_want, ids_got) << table_name(*kt);
    for (size_t i = 0; i < w_want.size(); ++i) EXPECT_NEAR(w_got[i], w_want[i], 1e-6);
  }
}

}  // namespace
}  // namespace ds::test
