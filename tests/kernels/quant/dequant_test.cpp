// Dequantization of hand-built blocks. Every expected value below was worked out by hand
// from the layout in ../shared/SPEC.md and the reference ecosystem's element order (the
// comments show the derivation); none comes from the code under test.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/kernels.h"

namespace ds {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;       // 1.0
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;   // 0.25
constexpr uint16_t kHalfMinusOne = 0xBC00;  // -1.0

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

TEST(Dequant, F16AndBF16KnownBits) {
  const uint16_t h[4] = {0x3C00, 0xC000, 0x3555, 0x0001};  // 1, -2, 0.333251953125, 2^-24
  float y[4];
  dequantize_row(GgmlType::F16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.333251953125f);
  EXPECT_EQ(y[3], 5.9604644775390625e-8f);
  const uint16_t b[3] = {0x3F80, 0xC040, 0x4049};  // 1, -3, 3.140625
  dequantize_row(GgmlType::BF16, b, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], 3.140625f);
  const float f[2] = {1.5f, -7.25f};
  dequantize_row(GgmlType::F32, f, y, 2);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -7.25f);
}

TEST(Dequant, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = 0.5f * static_cast<float>(j - 8);       // low nibble j: (j - 8) * d
    want[16 + j] = 0.5f * static_cast<float>(7 - j);  // high nibble 15-j: (15 - j - 8) * d
  }
  expect_all(dequant(GgmlType::Q4_0, b, 32), want);
}

TEST(Dequant, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalfQuarter;
  b.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = 0.25f * static_cast<float>(j) - 1.0f;
    want[16 + j] = 0.25f * static_cast<float>(15 - j) - 1.0f;
  }
  expect_all(dequant(GgmlType::Q4_1, b, 32), want);
}

TEST(Dequant, Q5_0AndQ5_1HighBits) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x00;
  // qh bit j = 5th bit of element j: set bits 3 (element 3) and 20 (element 20).
  const uint32_t qh = (1u << 3) | (1u << 20);
  std::memcpy(b.qh, &qh, 4);
  b.qs[4] = 0x50;                       // high nibble of byte 4 = element 20's low 4 bits = 5
  std::vector<float> want(32, -16.0f);  // q = 0 -> 0 - 16
  want[3] = 0.0f;                       // 16 - 16
  want[20] = 5.0f;                      // (5 | 16) - 16
  expect_all(dequant(GgmlType::Q5_0, b, 32), want);

  BlockQ5_1 c{};
  c.d = kHalfHalf;
  c.m = kHalfOne;
  std::memcpy(c.qh, &qh, 4);
  c.qs[3] = 0x02;                      // element 3 low bits 2
  std::vector<float> want1(32, 1.0f);  // q = 0 -> 0*d + m
  want1[3] = 0.5f * 18.0f + 1.0f;      // (2 | 16) = 18
  want1[20] = 0.5f * 16.0f + 1.0f;
  expect_all(dequant(GgmlType::Q5_1, c, 32), want1);
}

TEST(Dequant, Q8_0AndQ8_K) {
  BlockQ8_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j) want[j] = 0.5f * static_cast<float>(j - 16);
  expect_all(dequant(GgmlType::Q8_0, b, 32), want);

  BlockQ8_K k{};
  k.d = 0.25f;
  for (int j = 0; j < 256; ++j) k.qs[j] = static_cast<int8_t>(j - 128);
  std::vector<float> wantk(256);
  for (int j = 0; j < 256; ++j) wantk[j] = 0.25f * static_cast<float>(j - 128);
  expect_all(dequant(GgmlType::Q8_K, k, 256), wantk);
}

TEST(Dequant, Q2_K) {
  BlockQ2_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.scales[j] = 0x21;  // scale 1, min 2: q=0 -> 0 - 0.5*2 = -1
  b.scales[14] = 0x23;                              // sub-block 14: scale 3, min 2
  // qs[37]: second 128-half (bytes 32..63), l = 5, bits 6-7 (k = 3) = 3 -> element
  // 128 + 32*3 + 5 = 229, sub-block 8 + 2*3 + 0 = 14: 3*3 - 1 = 8.
  b.qs[37] = 0xC0;
  // qs[20]: first half, l = 20 (second 16 of the 32), bits 2-3 (k = 1) = 2 -> element
  // 32*1 + 20 = 52, sub-block 2*1 + 1 = 3: 1*2 - 1 = 1.
  b.qs[20] = 0x08;
  std::vector<float> want(256, -1.0f);
  want[229] = 8.0f;
  want[52] = 1.0f;
  expect_all(dequant(GgmlType::Q2_K, b, 256), want);
}

TEST(Dequant, Q3_K) {
  BlockQ3_K b{};
  b.d = kHalfOne;
  // Every 6-bit scale 33 (= 1 after -32): low nibble 1 (scales[0..7], both nibbles),
  // high 2 bits 0b10 in scales[8..11] at bits 2*(j/4): 0b10101010.
  for (int j = 0; j < 8; ++j) b.scales[j] = 0x11;
  for (int j = 8; j < 12; ++j) b.scales[j] = 0xAA;
  b.scales[3] = 0x31;  // sub-block 11's low nibble (high nibble of byte 11-8) = 3 -> 35 - 32 = 3
  std::memset(b.hmask, 0xFF, sizeof(b.hmask));  // all high bits set: nothing subtracted
  // hmask[3] bit 5 cleared: bit 4*half + k = 5 -> half 1, k 1; l = 3 -> element
  // 128 + 32 + 3 = 163 (sub-block 10, scale 1): 1 * (0 - 4) = -4.
  b.hmask[3] = 0xDF;
  // qs[32 + 19] bits 2-3 = 2: half 1, k 1, l 19 -> element 128 + 32 + 19 = 179,
  // sub-block 8 + 2 + 1 = 11 (scale 3): 3 * 2 = 6.
  b.qs[51] = 0x08;
  std::vector<float> want(256, 0.0f);
  want[163] = -4.0f;
  want[179] = 6.0f;
  expect_all(dequant(GgmlType::Q3_K, b, 256), want);
}

// Q4_K/Q5_K scales: sub-block j < 4: sc = q[j] & 63, m = q[j+4] & 63; j >= 4:
// sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4.
void k4_unit_scales(uint8_t* q) {
  for (int j = 0; j < 4; ++j) q[j] = 1;      // sc 1 for sub-blocks 0..3
  for (int j = 4; j < 8; ++j) q[j] = 0;      // m 0 for sub-blocks 0..3
  for (int j = 8; j < 12; ++j) q[j] = 0x01;  // sc 1, m 0 for sub-blocks 4..7
}

TEST(Dequant, Q4_K) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfOne;
  k4_unit_scales(b.scales);
  b.scales[9] = 0x32;   // sub-block 5: sc 2, m 3
  b.scales[10] = 0x01;  // sub-block 6: low 4 bits of sc = 1 ...
  b.scales[2] = 0x41;   // ... high 2 bits from q[2] >> 6 = 1 -> sc 17; sub-block 2 still 1
  b.qs[32 + 7] = 0xA0;  // chunk 1 high nibble -> sub-block 3, element 64 + 32 + 7 = 103: 10
  b.qs[64 + 2] = 0x70;  // chunk 2 high nibble -> sub-block 5, element 128 + 32 + 2 = 162: 2*7 - 3
  b.qs[96] = 0x01;      // chunk 3 low nibble -> sub-block 6, element 192: 17 * 1
  std::vector<float> want(256, 0.0f);
  for (int i = 160; i < 192; ++i) want[i] = -3.0f;  // sub-block 5 with q = 0: 0 - 3
  want[103] = 10.0f;
  want[162] = 11.0f;
  want[192] = 17.0f;
  expect_all(dequant(GgmlType::Q4_K, b, 256), want);
}

TEST(Dequant, Q5_K) {
  BlockQ5_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfOne;
  k4_unit_scales(b.scales);
  b.qh[0] = 0x01;       // bit 0 (chunk 0, low nibble) of l = 0 -> element 0: 16
  b.qh[4] = 0x08;       // bit 3 (chunk 1, high nibble) of l = 4 -> element 64 + 32 + 4 = 100
  b.qs[32 + 4] = 0x30;  // its low 4 bits = 3 -> 19
  b.qh[31] = 0x40;      // bit 6 (chunk 3, low nibble) of l = 31 -> element 192 + 31 = 223: 16
  std::vector<float> want(256, 0.0f);
  want[0] = 16.0f;
  want[100] = 19.0f;
  want[223] = 16.0f;
  expect_all(dequant(GgmlType::Q5_K, b, 256), want);
}

TEST(Dequant, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalfOne;
  for (int j = 0; j < 16; ++j) b.scales[j] = 1;
  b.scales[6] = 2;
  b.scales[9] = -1;
  // All ql/qh zero: q = 0 - 32 = -32 everywhere (times the sub-block scale).
  // ql[40] high nibble = 5: l = 8 of ql[l + 32] high -> element l + 96 = 104, scale
  // sc[8/16 + 6] = sc[6] = 2: 2 * (5 - 32) = -54.
  b.ql[40] = 0x50;
  // Second half: qh[32 + 17] bits 2-3 = 3 -> element 128 + 17 + 32 = 177, q = 48 - 32 = 16,
  // scale sc[8 + 17/16 + 2] = sc[11] = 1.
  b.qh[49] = 0x0C;
  // ql[64 + 1] low nibble = 15 -> element 128 + 1 = 129, sc[8 + 0] = sc[8] = 1: 15 - 32 = -17.
  b.ql[65] = 0x0F;
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = -32.0f * static_cast<float>(b.scales[i / 16]);
  want[104] = -54.0f;
  want[177] = 16.0f;
  want[129] = -17.0f;
  expect_all(dequant(GgmlType::Q6_K, b, 256), want);
  EXPECT_EQ(want[150], 32.0f);  // sub-block 9 has scale -1
}

TEST(Dequant, MultipleBlocksAdvance) {
  BlockQ8_0 b[2]{};
  b[0].d = kHalfOne;
  b[1].d = kHalfHalf;
  for (int j = 0; j < 32; ++j) b[0].qs[j] = b[1].qs[j] = 4;
  float y[64];
  dequantize_row(GgmlType::Q8_0, b, y, 64);
  EXPECT_EQ(y[31], 4.0f);
  EXPECT_EQ(y[32], 2.0f);
}

}  // namespace
}  // namespace ds
