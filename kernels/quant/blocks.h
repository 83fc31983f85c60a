// Bit-exact block layouts of the GGUF quantization types (../shared/SPEC.md, "Block
// formats"). 'd' and 'dmin' are IEEE half (stored as uint16_t) unless noted. These structs
// are read straight out of the mmapped file, so their sizes are checked at compile time.
#pragma once
#include <cstdint>

namespace ds {

using half_t = uint16_t;  // IEEE 754 binary16 bits
using bf16_t = uint16_t;  // bfloat16 bits

constexpr int kQK4_0 = 32;
constexpr int kQK4_1 = 32;
constexpr int kQK5_0 = 32;
constexpr int kQK5_1 = 32;
constexpr int kQK8_0 = 32;
constexpr int kQK8_1 = 32;
constexpr int kQK_K = 256;
constexpr int kKScaleSize = 12;

struct BlockQ4_0 {
  half_t d;
  uint8_t qs[kQK4_0 / 2];  // low nibbles: elements 0..15, high nibbles: 16..31
};
struct BlockQ4_1 {
  half_t d;
  half_t m;
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  half_t d;
  uint8_t qh[4];  // bit j = 5th bit of element j
  uint8_t qs[kQK5_0 / 2];
};
struct BlockQ5_1 {
  half_t d;
  half_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
struct BlockQ8_0 {
  half_t d;
  int8_t qs[kQK8_0];
};
struct BlockQ8_1 {
  half_t d;
  half_t s;  // d * sum(qs)
  int8_t qs[kQK8_1];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low 4 bits scale, high 4 bits min
  uint8_t qs[kQK_K / 4];
  half_t d;
  half_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleSize];  // 16 6-bit scales, packed
  half_t d;
};
struct BlockQ4_K {
  half_t d;
  half_t dmin;
  uint8_t scales[kKScaleSize];  // 8 6-bit scales and 8 6-bit mins, packed
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  half_t d;
  half_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  half_t d;
};
struct BlockQ8_K {
  float d;  // float, not half
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sum of each group of 16 quants
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace ds
