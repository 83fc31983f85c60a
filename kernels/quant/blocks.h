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

// The i-quants and MXFP4 (../shared/SPEC-iquants.md, "Block layouts"). The grid types
// decode through the tables of kernels/quant/iq_tables.h. Every multi-byte field is
// little-endian; u16 arrays are read as the bytes they are stored in.
constexpr int kQK4_NL = 32;
constexpr int kQKMxfp4 = 32;

struct BlockIQ2_XXS {
  half_t d;
  uint16_t qs[kQK_K / 8];  // 8 records of 8 bytes per 32: 4 grid indices (bytes), then a u32 of 4 7-bit sign codes +
                           // 4-bit scale
};
struct BlockIQ2_XS {
  half_t d;
  uint16_t qs[kQK_K / 8];      // per group of 8: bits 0-8 grid index, bits 9-15 sign code
  uint8_t scales[kQK_K / 32];  // per 32: low nibble groups 0-1, high nibble groups 2-3
};
struct BlockIQ2_S {
  half_t d;
  uint8_t qs[kQK_K / 4];   // 32 low index bytes, then 32 plain sign bytes
  uint8_t qh[kQK_K / 32];  // index bits 8-9, 2 bits per group
  uint8_t scales[kQK_K / 32];
};
struct BlockIQ3_XXS {
  half_t d;
  uint8_t qs[3 * kQK_K / 8];  // 64 grid indices (4 elements each), then 8 u32: 4 sign codes + 4-bit scale
};
struct BlockIQ3_S {
  half_t d;
  uint8_t qs[kQK_K / 4];       // low 8 index bits per 4 elements
  uint8_t qh[kQK_K / 32];      // 9th index bit
  uint8_t signs[kQK_K / 8];    // plain sign bytes per group of 8
  uint8_t scales[kQK_K / 64];  // 4-bit scale per 32, two per byte
};
struct BlockIQ1_S {
  half_t d;
  uint8_t qs[kQK_K / 8];    // low 8 index bits per group of 8
  uint16_t qh[kQK_K / 32];  // per 32: index bits 8-10 per group, scale (bits 12-14), delta sign (bit 15)
};
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];       // low 8 index bits per group of 8
  uint8_t qh[kQK_K / 16];      // per group a nibble: index bits 8-10, delta sign
  uint8_t scales[kQK_K / 32];  // 4 u16: 3-bit scales per 16; the block's half d in the top nibbles
};
struct BlockIQ4_NL {
  half_t d;
  uint8_t qs[kQK4_NL / 2];  // low nibbles: elements 0..15, high nibbles: 16..31
};
struct BlockIQ4_XS {
  half_t d;
  uint16_t scales_h;             // bits 2ib..2ib+1: high 2 bits of sub-block ib's 6-bit scale
  uint8_t scales_l[kQK_K / 64];  // low 4 bits, nibble (ib % 2) of byte ib / 2
  uint8_t qs[kQK_K / 2];         // 16 bytes per 32 as in IQ4_NL
};
struct BlockMxfp4 {
  uint8_t e;  // E8M0 exponent: scale 2^(e - 128) applied to the doubled E2M1 values
  uint8_t qs[kQKMxfp4 / 2];
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
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMxfp4) == 17);

}  // namespace ds
