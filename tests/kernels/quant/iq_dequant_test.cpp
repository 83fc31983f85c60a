// The i-quants and MXFP4: dequantization of hand-built blocks and the reference dot
// products. Expected values are worked out by hand from the layouts in
// ../shared/SPEC-iquants.md and table entries read from ../shared/quant/iq_tables.json
// (entry 0 of the 2-bit grids is eight 8s, entry 1 is 43 then seven 8s; iq3xxs entry 1 is
// 20,4,4,4; iq3s entry 1 is 3,1,1,1 and entry 256 is 7,5,9,5; iq2s entry 256 is
// 25,25,25,25,25,8,25,8; iq1s entry 0 is eight -1, entry 1 is +1 then seven -1, entry 256 is
// -1,0,1,0,1,-1,0,-1; ksigns[1] = 0x81, ksigns[2] = 0x82). The derivation is in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant/fp16.h"

namespace ds {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;
constexpr uint16_t kHalfHalf = 0x3800;

template <class B>
std::vector<float> dequant(GgmlType t, const B& b, int n) {
  std::vector<float> y(static_cast<size_t>(n), -12345.0f);
  dequantize_row(t, &b, y.data(), n);
  return y;
}

void expect_all(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 8; ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

TEST(IqDequant, IQ2_XXS) {
  BlockIQ2_XXS b{};
  b.d = kHalfOne;
  auto* rec = reinterpret_cast<uint8_t*>(b.qs);
  rec[0] = 1;                         // group 0 of sub-block 0: grid entry 1
  put_u32(rec + 4, 1u | (3u << 28));  // group 0 sign code 1 (elements 0, 7 negative), s = 3
  // sub-block 0: 1 * (0.5 + 3) * 0.25 = 0.875 times the grid; the rest: 0.125 * 8 = 1.
  std::vector<float> want(256, 1.0f);
  for (int e = 0; e < 32; ++e) want[e] = 7.0f;
  want[0] = -0.875f * 43, want[7] = -7.0f;
  expect_all(dequant(GgmlType::IQ2_XXS, b, 256), want);
}

TEST(IqDequant, IQ2_XS) {
  BlockIQ2_XS b{};
  b.d = kHalfHalf;
  b.qs[0] = 1 | (2 << 9);  // entry 1, sign code 2 (elements 1 and 7 negative)
  b.scales[0] = 0x51;      // groups 0-1: s = 1; groups 2-3: s = 5
  // groups 0-1: 0.5 * 1.5 * 0.25 = 0.1875 (x 8 = 1.5); groups 2-3: 0.5 * 5.5 * 0.25 * 8 = 5.5;
  // other sub-blocks: 0.5 * 0.5 * 0.25 * 8 = 0.5.
  std::vector<float> want(256, 0.5f);
  for (int e = 0; e < 16; ++e) want[e] = 1.5f;
  for (int e = 16; e < 32; ++e) want[e] = 5.5f;
  want[0] = 0.1875f * 43, want[1] = -1.5f, want[7] = -1.5f;
  expect_all(dequant(GgmlType::IQ2_XS, b, 256), want);
}

TEST(IqDequant, IQ2_S) {
  BlockIQ2_S b{};
  b.d = kHalfOne;
  b.qs[0] = 1;                         // group 0: entry 1
  b.qh[0] = 1 << 2;                    // group 1: index bits 8-9 = 1, low byte 0 -> entry 256
  b.qs[32] = 0x03;                     // group 0 signs: elements 0 and 1 negative (plain bits)
  b.scales[0] = 0x20;                  // groups 0-1: s = 0 (0.125); groups 2-3: s = 2 (0.625)
  std::vector<float> want(256, 1.0f);  // other sub-blocks: 0.125 * 8
  const int e256[8] = {25, 25, 25, 25, 25, 8, 25, 8};
  for (int e = 0; e < 8; ++e) want[e] = 1.0f;
  for (int e = 0; e < 8; ++e) want[8 + e] = 0.125f * static_cast<float>(e256[e]);
  for (int e = 16; e < 32; ++e) want[e] = 5.0f;
  want[0] = -0.125f * 43, want[1] = -1.0f;
  expect_all(dequant(GgmlType::IQ2_S, b, 256), want);
}

TEST(IqDequant, IQ3_XXS) {
  BlockIQ3_XXS b{};
  b.d = kHalfOne;
  b.qs[0] = 1;                          // piece 0 of sub-block 0: entry 1 (20, 4, 4, 4)
  put_u32(b.qs + 64, 1u | (2u << 28));  // group 0 sign code 1: elements 0 and 7; s = 2
  // sub-block 0: (0.5 + 2) * 0.5 = 1.25 times the grid; others: 0.25 * 4 = 1.
  std::vector<float> want(256, 1.0f);
  for (int e = 0; e < 32; ++e) want[e] = 5.0f;
  want[0] = -25.0f, want[7] = -5.0f;
  expect_all(dequant(GgmlType::IQ3_XXS, b, 256), want);
}

TEST(IqDequant, IQ3_S) {
  BlockIQ3_S b{};
  b.d = kHalfOne;
  b.qs[0] = 1;                         // piece 0: entry 1 (3, 1, 1, 1)
  b.qh[0] = 1 << 1;                    // piece 1: 9th bit -> entry 256 (7, 5, 9, 5)
  b.signs[0] = 0x10;                   // element 4 negative
  b.scales[0] = 0x31;                  // sub-block 0: s = 1 -> 3; sub-block 1: s = 3 -> 7
  std::vector<float> want(256, 1.0f);  // s = 0 -> 1, entry 0 = 1
  for (int e = 0; e < 32; ++e) want[e] = 3.0f;
  for (int e = 32; e < 64; ++e) want[e] = 7.0f;
  want[0] = 9.0f;
  want[4] = -21.0f, want[5] = 15.0f, want[6] = 27.0f, want[7] = 15.0f;
  expect_all(dequant(GgmlType::IQ3_S, b, 256), want);
}

TEST(IqDequant, IQ1_S) {
  BlockIQ1_S b{};
  b.d = kHalfOne;
  b.qs[0] = 1;                            // group 0: entry 1 (+1, then seven -1)
  b.qh[0] = (2 << 12) | 0x8000;           // s = 2 -> 5; delta -0.125
  b.qh[2] = 1 << 3;                       // sub-block 2, group 1: entry 256; s = 0, delta +0.125
  std::vector<float> want(256, -0.875f);  // entry 0 (-1) + 0.125, times 1
  for (int e = 0; e < 32; ++e) want[e] = 5 * -1.125f;
  want[0] = 5 * 0.875f;
  const int e256[8] = {-1, 0, 1, 0, 1, -1, 0, -1};
  for (int j = 0; j < 8; ++j) want[64 + 8 + j] = static_cast<float>(e256[j]) + 0.125f;
  expect_all(dequant(GgmlType::IQ1_S, b, 256), want);
}

TEST(IqDequant, IQ1_M) {
  BlockIQ1_M b{};
  // d = 1.0 = 0x3C00: top nibbles of the words w0..w3 are 0, 0, C, 3.
  // w0 low bits: sub-block 0 s1 = 1, s2 = 2 (bits 0-5); sub-block 1 s1 = 0, s2 = 7 (bits 6-11).
  const uint16_t w[4] = {static_cast<uint16_t>(1 | (2 << 3) | (0 << 6) | (7 << 9)), 0, 0xC000, 0x3000};
  std::memcpy(b.scales, w, 8);
  b.qs[0] = 1;     // group 0: entry 1
  b.qh[0] = 0x08;  // group 0: delta -0.125; group 1 (high nibble): +0.125, index hi 0
  b.qh[1] = 0x01;  // group 2: index hi 1 -> entry 256; delta +0.125
  std::vector<float> want(256, 0.0f);
  for (int j = 0; j < 8; ++j) want[j] = 3 * -1.125f;
  want[0] = 3 * 0.875f;
  for (int j = 8; j < 16; ++j) want[j] = 3 * -0.875f;
  const int e256[8] = {-1, 0, 1, 0, 1, -1, 0, -1};
  for (int j = 0; j < 8; ++j) want[16 + j] = 5 * (static_cast<float>(e256[j]) + 0.125f);
  for (int j = 24; j < 32; ++j) want[j] = 5 * -0.875f;
  for (int j = 32; j < 48; ++j) want[j] = 1 * -0.875f;
  for (int j = 48; j < 64; ++j) want[j] = 15 * -0.875f;
  for (int j = 64; j < 256; ++j) want[j] = -0.875f;  // scale words 0 below the top nibble: s = 0
  expect_all(dequant(GgmlType::IQ1_M, b, 256), want);
}

TEST(IqDequant, IQ4_NL) {
  BlockIQ4_NL b{};
  b.d = kHalfHalf;
  b.qs[0] = 0x1F;  // element 0: value 15 (113), element 16: value 1 (-104)
  std::vector<float> want(32, 0.5f * -127);
  want[0] = 0.5f * 113, want[16] = 0.5f * -104;
  expect_all(dequant(GgmlType::IQ4_NL, b, 32), want);
}

TEST(IqDequant, IQ4_XS) {
  BlockIQ4_XS b{};
  b.d = kHalfOne;
  b.scales_h = 2;        // sub-block 0: high bits 2 -> 32 + low nibble
  b.scales_l[0] = 0x03;  // sub-block 0 low nibble 3 -> scale 35, multiplier 3; sub-block 1: 0 -> -32
  b.qs[0] = 0xF0;        // element 0: value 0 (-127), element 16: value 15 (113)
  std::vector<float> want(256, -127.0f * -32);
  for (int e = 0; e < 32; ++e) want[e] = -381.0f;
  want[16] = 339.0f;
  expect_all(dequant(GgmlType::IQ4_XS, b, 256), want);
}

TEST(IqDequant, MXFP4Exponents) {
  BlockMxfp4 b{};
  b.qs[0] = 0x9F;  // element 0: code 15 (-12), element 16: code 9 (-1); the rest code 0 (0)
  const std::pair<uint8_t, float> cases[] = {{128, 1.0f},
                                             {130, 4.0f},
                                             {127, 0.5f},
                                             {254, std::ldexp(1.0f, 126)},
                                             {2, std::ldexp(1.0f, -126)},
                                             {1, std::ldexp(1.0f, -127)},
                                             {0, std::ldexp(1.0f, -128)}};
  for (const auto& [e, scale] : cases) {
    b.e = e;
    std::vector<float> want(32, 0.0f);
    want[0] = -12 * scale, want[16] = -1 * scale;
    SCOPED_TRACE(static_cast<int>(e));
    expect_all(dequant(GgmlType::MXFP4, b, 32), want);
  }
  b.qs[1] = 0x07;  // element 1: code 7 = 12 (E2M1 6.0 doubled)
  b.e = 128;
  EXPECT_EQ(dequant(GgmlType::MXFP4, b, 32)[1], 12.0f);
}

// Random valid blocks: random bytes with the scale set to a finite value.
std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng, float dmax) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  std::vector<uint8_t> row(ggml_row_size(t, n));
  for (auto& c : row) c = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> ud(-dmax, dmax);
  for (size_t off = 0; off < row.size(); off += static_cast<size_t>(tr.type_size)) {
    uint8_t* blk = row.data() + off;
    if (t == GgmlType::MXFP4) {
      blk[0] = static_cast<uint8_t>(110 + rng() % 30);
    } else if (t == GgmlType::IQ1_M) {
      const uint16_t h = f32_to_fp16(ud(rng));
      uint16_t w[4];
      std::memcpy(w, blk + 48, 8);
      for (int k = 0; k < 4; ++k) w[k] = static_cast<uint16_t>((w[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
      std::memcpy(blk + 48, w, 8);
    } else {
      const uint16_t h = f32_to_fp16(ud(rng));
      std::memcpy(blk, &h, 2);
    }
  }
  return row;
}

const GgmlType kIqTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,  GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                             GgmlType::IQ1_S,   GgmlType::IQ1_M,  GgmlType::IQ4_NL, GgmlType::IQ4_XS,  GgmlType::MXFP4};

// The reference dot product is the exact dot product of the dequantized weight row with the
// dequantized activation row, up to float32 accumulation (SPEC-iquants.md). Compared with
// a double-precision sum; an error in any integer part (a wrong lane, scale or shift term)
// is far larger than the bound.
TEST(IqDot, ReferenceEqualsDequantizedDotProduct) {
  std::mt19937 rng(1234);
  const KernelTable& ref = *kernel_table(Isa::kRef);
  for (GgmlType t : kIqTypes) {
    SCOPED_TRACE(ggml_type_name(t));
    for (int64_t n : {256, 1024, 2304}) {
      const std::vector<uint8_t> w = random_row(t, n, rng, 0.05f);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n)), wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng);
      const GgmlType at = vec_dot_type(t);
      std::vector<uint8_t> a(ggml_row_size(at, n));
      ref.quantize_act(at, x.data(), a.data(), n);
      dequantize_row(t, w.data(), wf.data(), n);
      dequantize_row(at, a.data(), xf.data(), n);
      double exact = 0.0, mag = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(wf[i]) * xf[i];
        mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
      }
      const float got = ref.vec_dot(t, n, w.data(), a.data());
      EXPECT_NEAR(got, exact, 2e-6 * mag) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace ds
