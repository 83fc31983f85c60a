// Unpacking of one i-quant block into small integers: the shared core of the scalar
// dequantizer (kernels/quant/dequant_iq.cpp) and the scalar dot products
// (kernels/ref/vec_dot_iq.cpp), so both read the bit layouts of ../shared/SPEC-iquants.md
// ("Block layouts") in one place.
//
// A 256-element block unpacks to
//   q[e]      the signed grid value of element e (grid byte times its sign; IQ1: -1, 0, +1;
//             IQ4_XS: the kvalues_iq4nl entry),
//   mult[e/16] the integer sub-scale of each 16 elements (2s+1, 1+2s, or scale6-32),
//   delta[e/8] IQ1_S / IQ1_M only: +1 or -1, the sign of the group's 0.125 shift,
//   d         the block's half scale as float,
// and the element value is  d * factor * mult * (q + 0.125 * delta)  with factor 0.125
// (IQ2_XXS, IQ2_XS, IQ2_S), 0.25 (IQ3_XXS) or 1. Every such product is exact in float32.
// Functions here are static inline on purpose: [ISA_ODR] in kernels/CMakeLists.txt.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/fp16.h"
#include "kernels/quant/iq_tables.h"

namespace ds::iq {

struct Unpacked {
  float d = 0.0f;
  int8_t q[kQK_K];
  int16_t mult[kQK_K / 16];
  int8_t delta[kQK_K / 8];
};

static inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Eight elements of one group: grid bytes (unsigned) with the signs of bit j of 'signs'.
static inline void put_signed8(int8_t* q, uint64_t grid, unsigned signs) {
  for (int j = 0; j < 8; ++j) {
    const int v = iq_grid_byte(grid, j);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
static inline void put_signed4(int8_t* q, uint32_t grid, unsigned signs) {
  for (int j = 0; j < 4; ++j) {
    const int v = iq_grid_byte(grid, j);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
static inline void set_mult32(Unpacked& u, int ib, int lo, int hi) {
  u.mult[2 * ib] = static_cast<int16_t>(lo);
  u.mult[2 * ib + 1] = static_cast<int16_t>(hi);
}

static inline void unpack(const BlockIQ2_XXS& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  const auto* rec = reinterpret_cast<const uint8_t*>(b.qs);
  for (int ib = 0; ib < 8; ++ib, rec += 8) {
    const uint32_t a = load_u32(rec), w = load_u32(rec + 4);
    const int m = 2 * static_cast<int>(w >> 28) + 1;
    set_mult32(u, ib, m, m);
    for (int l = 0; l < 4; ++l)
      put_signed8(u.q + 32 * ib + 8 * l, kIq2xxsGrid[(a >> (8 * l)) & 0xFF], kIqKsigns[(w >> (7 * l)) & 0x7F]);
  }
}

static inline void unpack(const BlockIQ2_XS& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    set_mult32(u, ib, 2 * (b.scales[ib] & 0xF) + 1, 2 * (b.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = b.qs[4 * ib + l];
      put_signed8(u.q + 32 * ib + 8 * l, kIq2xsGrid[v & 0x1FF], kIqKsigns[v >> 9]);
    }
  }
}

static inline void unpack(const BlockIQ2_S& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  const uint8_t* signs = b.qs + kQK_K / 8;
  for (int ib = 0; ib < 8; ++ib) {
    set_mult32(u, ib, 2 * (b.scales[ib] & 0xF) + 1, 2 * (b.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const int idx = b.qs[4 * ib + l] | (((b.qh[ib] >> (2 * l)) & 3) << 8);
      put_signed8(u.q + 32 * ib + 8 * l, kIq2sGrid[idx], signs[4 * ib + l]);
    }
  }
}

static inline void unpack(const BlockIQ3_XXS& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t w = load_u32(b.qs + 64 + 4 * ib);
    const int m = 2 * static_cast<int>(w >> 28) + 1;
    set_mult32(u, ib, m, m);
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = kIqKsigns[(w >> (7 * l)) & 0x7F];
      int8_t* q = u.q + 32 * ib + 8 * l;
      put_signed4(q, kIq3xxsGrid[b.qs[8 * ib + 2 * l]], signs & 0xF);
      put_signed4(q + 4, kIq3xxsGrid[b.qs[8 * ib + 2 * l + 1]], signs >> 4);
    }
  }
}

static inline void unpack(const BlockIQ3_S& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int m = 1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF);
    set_mult32(u, ib, m, m);
    for (int k = 0; k < 8; ++k) {
      const int idx = b.qs[8 * ib + k] | (((b.qh[ib] >> k) & 1) << 8);
      const unsigned signs = b.signs[4 * ib + k / 2] >> (4 * (k % 2));
      put_signed4(u.q + 32 * ib + 4 * k, kIq3sGrid[idx], signs & 0xF);
    }
  }
}

static inline void put_ternary8(int8_t* q, uint64_t grid) {
  for (int j = 0; j < 8; ++j) q[j] = static_cast<int8_t>(iq_grid_sbyte(grid, j));
}

static inline void unpack(const BlockIQ1_S& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned qh = b.qh[ib];
    const int m = 2 * static_cast<int>((qh >> 12) & 7) + 1;
    set_mult32(u, ib, m, m);
    for (int l = 0; l < 4; ++l) {
      const int idx = b.qs[4 * ib + l] | static_cast<int>(((qh >> (3 * l)) & 7) << 8);
      put_ternary8(u.q + 32 * ib + 8 * l, kIq1sGrid[idx]);
      u.delta[4 * ib + l] = static_cast<int8_t>(qh & 0x8000 ? -1 : 1);
    }
  }
}

// IQ1_M's block scale: a half scattered over the top nibbles of the four scale words.
static inline uint16_t iq1m_scale_bits(const BlockIQ1_M& b) {
  uint16_t w[4];
  std::memcpy(w, b.scales, 8);
  return static_cast<uint16_t>((w[0] >> 12) | ((w[1] >> 8) & 0x00F0) | ((w[2] >> 4) & 0x0F00) | (w[3] & 0xF000));
}

static inline void unpack(const BlockIQ1_M& b, Unpacked& u) {
  uint16_t w[4];
  std::memcpy(w, b.scales, 8);
  u.d = fp16_to_f32(iq1m_scale_bits(b));
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned sc = static_cast<unsigned>(w[ib / 2]) >> (6 * (ib % 2));
    set_mult32(u, ib, 2 * static_cast<int>(sc & 7) + 1, 2 * static_cast<int>((sc >> 3) & 7) + 1);
    for (int l = 0; l < 4; ++l) {
      const unsigned nib = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
      const int idx = b.qs[4 * ib + l] | static_cast<int>((nib & 7) << 8);
      put_ternary8(u.q + 32 * ib + 8 * l, kIq1sGrid[idx]);
      u.delta[4 * ib + l] = static_cast<int8_t>(nib & 8 ? -1 : 1);
    }
  }
}

// The 6-bit scale of sub-block ib of an IQ4_XS block (0..63; the multiplier is this - 32).
static inline int iq4xs_scale(const BlockIQ4_XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

// 32 elements of a 16-byte nibble array (IQ4_NL, IQ4_XS, MXFP4): low nibble j is element j,
// high nibble element j + 16, each looked up in 'values'.
static inline void put_nibbles32(int8_t* q, const uint8_t* qs, const int8_t* values) {
  for (int j = 0; j < 16; ++j) {
    q[j] = values[qs[j] & 0xF];
    q[j + 16] = values[qs[j] >> 4];
  }
}

static inline void unpack(const BlockIQ4_XS& b, Unpacked& u) {
  u.d = fp16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int m = iq4xs_scale(b, ib) - 32;
    set_mult32(u, ib, m, m);
    put_nibbles32(u.q + 32 * ib, b.qs + 16 * ib, kIq4nlValues);
  }
}

// MXFP4's scale 2^(e - 128) built from bits as the reference does: e >= 2 is the normal
// float with biased exponent e - 1; e = 1 and e = 0 are the subnormals 2^-127 and 2^-128.
// e = 255 decodes as 2^127 (the validator rejects it; the decoder does not special-case it).
static inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
  return bits_to_f32(bits);
}

}  // namespace ds::iq
