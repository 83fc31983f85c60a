// Quantize -> dequantize round trips on seeded Gaussian data. Bounds are on
// RMSE / RMS of the data and sit above what each format achieves on N(0, 1) data
// (the value measured with this implementation is in each comment) and well below
// what a wrong layout or a broken scale search produces (>= 0.3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/act_quant.h"

namespace ds {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

double rel_rmse(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(ggml_row_size(t, n));
  EXPECT_EQ(quantize_row(t, x.data(), q.data(), n), q.size()) << ggml_type_name(t);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  double se = 0.0, ss = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    se += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    ss += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(se / ss);
}

struct Bound {
  GgmlType type;
  double max_rel_rmse;
};

// Measured on 64 Ki N(0,1) values, seed 1234 (the same at sigma 0.02): Q8_0 0.0054,
// Q8_K 0.0070, Q6_K 0.018, Q5_K 0.036, Q5_0 0.043, Q5_1 0.038, Q4_K 0.072, Q4_0 0.086,
// Q4_1 0.079 (the GGUF ecosystem's reference quantizers land at about the same values),
// Q3_K 0.153, Q2_K 0.275 (a wrong element order or scale packing gives ~1; Q2_K's scale
// search is also checked against naive min/max below); IQ4_NL 0.0765, IQ4_XS 0.0771 (the
// non-linear table beats Q4_0 at the same 4.5 bits), MXFP4 0.114-0.116 (power-of-two
// scales cost about half a bit).
// F16 / BF16 are plain roundings: 2^-11 and 2^-8 relative at most.
const Bound kBounds[] = {
    {GgmlType::F16, 5e-4},  {GgmlType::BF16, 4e-3},   {GgmlType::Q8_0, 0.01},   {GgmlType::Q8_K, 0.01},
    {GgmlType::Q6_K, 0.03}, {GgmlType::Q5_K, 0.05},   {GgmlType::Q5_0, 0.06},   {GgmlType::Q5_1, 0.06},
    {GgmlType::Q4_K, 0.1},  {GgmlType::Q4_0, 0.12},   {GgmlType::Q4_1, 0.11},   {GgmlType::Q3_K, 0.18},
    {GgmlType::Q2_K, 0.31}, {GgmlType::IQ4_NL, 0.09}, {GgmlType::IQ4_XS, 0.09}, {GgmlType::MXFP4, 0.13},
};

TEST(Quantize, GaussianRoundTripWithinBounds) {
  for (float sigma : {1.0f, 0.02f}) {  // unit scale and typical weight scale
    const auto x = gaussian(65536, 1234, sigma);
    for (const auto& b : kBounds) {
      const double e = rel_rmse(b.type, x);
      EXPECT_LT(e, b.max_rel_rmse) << ggml_type_name(b.type) << " sigma " << sigma;
      std::printf("%-5s sigma %-5g rmse/rms %.4f (bound %.4g)\n", ggml_type_name(b.type), sigma, e, b.max_rel_rmse);
    }
  }
}

// The K-quant scale search must beat a naive min/max scale: compare Q4_K (Q2_K) against
// the error of 4-bit (2-bit) min/max quantization of each 32 (16)-element sub-block with an
// exact float scale and min (no scale rounding), which the search should still undercut.
TEST(Quantize, KQuantsBeatNaiveMinMax) {
  const auto x = gaussian(65536, 99);
  for (auto [t, sub, levels] : {std::tuple{GgmlType::Q4_K, 32, 15}, std::tuple{GgmlType::Q2_K, 16, 3}}) {
    double se = 0.0, ss = 0.0;
    for (size_t b = 0; b < x.size(); b += static_cast<size_t>(sub)) {
      float mn = x[b], mx = x[b];
      for (int j = 1; j < sub; ++j) mn = std::min(mn, x[b + j]), mx = std::max(mx, x[b + j]);
      const float d = (mx - mn) / static_cast<float>(levels);
      for (int j = 0; j < sub; ++j) {
        const float q = std::nearbyint((x[b + j] - mn) / d);
        const double err = q * d + mn - x[b + j];
        se += err * err;
        ss += static_cast<double>(x[b + j]) * x[b + j];
      }
    }
    const double naive = std::sqrt(se / ss);
    const double got = rel_rmse(t, x);
    EXPECT_LT(got, naive) << ggml_type_name(t) << " " << got << " vs naive min/max " << naive;
  }
}

TEST(Quantize, ZerosAndConstants) {
  std::vector<float> zeros(512, 0.0f), ones(512, 0.75f), y(512);
  for (const auto& b : kBounds) {
    std::vector<uint8_t> q(ggml_row_size(b.type, 512));
    ASSERT_GT(quantize_row(b.type, zeros.data(), q.data(), 512), 0u);
    dequantize_row(b.type, q.data(), y.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_type_name(b.type);
    ASSERT_GT(quantize_row(b.type, ones.data(), q.data(), 512), 0u);
    dequantize_row(b.type, q.data(), y.data(), 512);
    for (float v : y) ASSERT_NEAR(v, 0.75f, 0.75f * 0.02) << ggml_type_name(b.type);
  }
}

TEST(Quantize, Q8MatchesActivationQuantizer) {
  const auto x = gaussian(1024, 7);
  std::vector<BlockQ8_0> a(32), b(32);
  quantize_row(GgmlType::Q8_0, x.data(), a.data(), 1024);
  ref::quantize_row_q8_0(x.data(), b.data(), 1024);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8_0)));
  std::vector<BlockQ8_K> c(4), d(4);
  quantize_row(GgmlType::Q8_K, x.data(), c.data(), 1024);
  ref::quantize_row_q8_K(x.data(), d.data(), 1024);
  EXPECT_EQ(0, std::memcmp(c.data(), d.data(), c.size() * sizeof(BlockQ8_K)));
}

TEST(Quantize, UnsupportedTypesReturnZero) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_EQ(quantize_row(GgmlType::Q8_1, x.data(), q.data(), 256), 0u);  // activations only
  EXPECT_EQ(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 100), 0u);  // not a block multiple
  for (GgmlType t : {GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                     GgmlType::IQ3_XXS, GgmlType::IQ3_S}) {
    EXPECT_FALSE(quantize_supported(t)) << ggml_type_name(t);  // read-only grid types
    EXPECT_EQ(quantize_row(t, x.data(), q.data(), 256), 0u) << ggml_type_name(t);
  }
  for (GgmlType t : {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) EXPECT_TRUE(quantize_supported(t));
}

// Round trips of the three i-quant quantizers: a row that is already on the format's grid
// (the dequantization of a quantized row) quantizes back to the same values. MXFP4's
// exponent rule makes this exact (bit for bit); the IQ4 scale searches may refit a
// slightly different scale: measured 0.0077 (IQ4_NL) and 0.0081 (IQ4_XS) relative RMSE
// between the two passes, a tenth of the first pass's error; a broken search or packing
// gives ~0.1 or more.
TEST(Quantize, IQuantRoundTrips) {
  const auto x = gaussian(8192, 4321, 0.02f);
  for (auto [t, tol] : {std::pair{GgmlType::MXFP4, 0.0}, {GgmlType::IQ4_NL, 0.015}, {GgmlType::IQ4_XS, 0.015}}) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(ggml_row_size(t, n)), q2(q.size());
    std::vector<float> y(x.size()), z(x.size());
    ASSERT_EQ(quantize_row(t, x.data(), q.data(), n), q.size());
    dequantize_row(t, q.data(), y.data(), n);
    ASSERT_EQ(quantize_row(t, y.data(), q2.data(), n), q.size());
    dequantize_row(t, q2.data(), z.data(), n);
    double se = 0.0, ss = 0.0;
    for (size_t i = 0; i < y.size(); ++i) se += (z[i] - y[i]) * (z[i] - y[i]), ss += y[i] * y[i];
    EXPECT_LE(std::sqrt(se / ss), tol) << ggml_type_name(t);
    if (tol == 0.0) {
      EXPECT_EQ(0, std::memcmp(q.data(), q2.data(), q.size())) << ggml_type_name(t);
    }
  }
}

// MXFP4's exponent and element rules on hand-worked blocks: amax 1.0 -> e = 0 - 2 + 127 = 125
// (scale 2^-3: the grid is 0, 0.125, 0.25, 0.375, 0.5, 0.75, 1, 1.5 and negatives), so 1.0 is
// code 6 (8 * 2^-3), -0.3 is nearest -0.25 (code 10, -2 * 2^-3), 0.07 is nearest 0.125
// (code 1), 0.7 is nearest 0.75 (code 5, 6 * 2^-3); an all-zero block has e = 0 and code 0;
// amax 2^-140 clamps e to 0.
TEST(Quantize, Mxfp4HandWorkedBlocks) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f, x[1] = -0.3f, x[2] = 0.07f, x[16] = 0.7f;
  BlockMxfp4 b[3];
  std::vector<float> all(96, 0.0f);
  std::copy(x.begin(), x.end(), all.begin());
  all[64] = std::ldexp(1.0f, -140);
  ASSERT_EQ(quantize_row(GgmlType::MXFP4, all.data(), b, 96), sizeof(b));
  EXPECT_EQ(b[0].e, 125);
  EXPECT_EQ(b[0].qs[0], 6 | (5 << 4));  // element 0: code 6; element 16: code 5
  EXPECT_EQ(b[0].qs[1], 10);
  EXPECT_EQ(b[0].qs[2], 1);
  EXPECT_EQ(b[1].e, 0);
  for (uint8_t q : b[1].qs) EXPECT_EQ(q, 0);
  EXPECT_EQ(b[2].e, 0);
}

}  // namespace
}  // namespace ds
