// Scalar dequantization of every block type to float: the reference for what a block
// means (../shared/SPEC.md, "Block formats"). One small function per type, each walking
// the block in the element order the GGUF ecosystem's dequantize_row_* functions define,
// with the same float operation order (scale products first, then the quant), so that
// results are bit-identical to the reference toolchain that wrote the files.
#include <cassert>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/dequant.h"
#include "kernels/quant/dequant_iq.h"
#include "kernels/quant/fp16.h"

namespace ds {
namespace {

void dequant_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQK4_0 / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
    const float d = fp16_to_f32(x[i].d);
    const float m = fp16_to_f32(x[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + kQK4_1 / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0/Q5_1: bit j of the 32-bit qh is the 5th bit of element j (elements 0..31).
inline uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void dequant_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
    const float d = fp16_to_f32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + kQK5_0 / 2] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dequant_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
    const float d = fp16_to_f32(x[i].d);
    const float m = fp16_to_f32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + kQK5_1 / 2] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequant_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK8_1) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_1; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

// Q2_K: 16 sub-blocks of 16. Each 128-element half uses 32 bytes of qs; within a half,
// element 32*k + l (k = 0..3, l = 0..31) is bits 2k..2k+1 of qs[l]; sub-block index
// is 8*half + 2*k + (l >= 16). x = d*sc*q - dmin*m.
void dequant_q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int k = 0; k < 4; ++k) {
        const int shift = 2 * k;
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

// Q3_K scales: 16 6-bit signed (offset 32) values; low 4 bits in scales[0..7] (low nibble
// for sub-blocks 0..7, high nibble for 8..15), high 2 bits in scales[8 + j%4] at bit 2*(j/4).
inline int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Q3_K: like Q2_K for the low 2 bits; the 3rd bit of element 32*k + l of half h is bit
// (4h + k) of hmask[l]; a clear bit subtracts 4. x = d*sc*(q - 4*(1 - hbit)).
void dequant_q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = fp16_to_f32(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int k = 0; k < 4; ++k, m = static_cast<uint8_t>(m << 1)) {
        const int shift = 2 * k;
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * static_cast<float>(q3k_scale(x[i].scales, is++));
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

// Q4_K/Q5_K packed 6-bit scale and min of sub-block j (SPEC.md).
inline void k4_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Scales and mins of chunk c's two sub-blocks (2c and 2c+1) of a Q4_K/Q5_K block.
static void k4_chunk_scales(const uint8_t* scales, int c, float d, float dmin, float* d1, float* m1, float* d2,
                            float* m2) {
  uint8_t sc, m;
  k4_scale_min(2 * c, scales, &sc, &m);
  *d1 = d * static_cast<float>(sc);
  *m1 = dmin * static_cast<float>(m);
  k4_scale_min(2 * c + 1, scales, &sc, &m);
  *d2 = d * static_cast<float>(sc);
  *m2 = dmin * static_cast<float>(m);
}

// Q4_K: 4 chunks of 64; chunk c uses qs[32c..32c+31]: low nibbles are sub-block 2c,
// high nibbles sub-block 2c+1.
void dequant_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      float d1, m1, d2, m2;
      k4_chunk_scales(x[i].scales, c, d, dmin, &d1, &m1, &d2, &m2);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: as Q4_K; the 5th bit of element l of chunk c's low-nibble sub-block is bit 2c of
// qh[l], of its high-nibble sub-block bit 2c+1.
void dequant_q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    for (int c = 0; c < 4; ++c, ql += 32) {
      float d1, m1, d2, m2;
      k4_chunk_scales(x[i].scales, c, d, dmin, &d1, &m1, &d2, &m2);
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c)), u2 = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      }
    }
  }
}

// Q6_K: two halves of 128. In half h (ql += 64h, qh += 32h, scales += 8h), for l in 0..31:
// element l      = ql[l] low  | qh[l] bits 0-1,   scale sc[l/16]
// element l + 32 = ql[l+32] low | qh[l] bits 2-3, scale sc[l/16 + 2]
// element l + 64 = ql[l] high | qh[l] bits 4-5,   scale sc[l/16 + 4]
// element l + 96 = ql[l+32] high | qh[l] bits 6-7, scale sc[l/16 + 6]; x = d*sc*(q - 32).
void dequant_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequant_q8_K(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

}  // namespace

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  assert(tr.name != nullptr && n % tr.block_size == 0);
  const int64_t nb = n / tr.block_size;
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case GgmlType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case GgmlType::Q4_0:
      return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GgmlType::Q4_1:
      return dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case GgmlType::Q5_0:
      return dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case GgmlType::Q5_1:
      return dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case GgmlType::Q8_0:
      return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GgmlType::Q8_1:
      return dequant_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
    case GgmlType::Q2_K:
      return dequant_q2_K(static_cast<const BlockQ2_K*>(src), dst, nb);
    case GgmlType::Q3_K:
      return dequant_q3_K(static_cast<const BlockQ3_K*>(src), dst, nb);
    case GgmlType::Q4_K:
      return dequant_q4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GgmlType::Q5_K:
      return dequant_q5_K(static_cast<const BlockQ5_K*>(src), dst, nb);
    case GgmlType::Q6_K:
      return dequant_q6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case GgmlType::Q8_K:
      return dequant_q8_K(static_cast<const BlockQ8_K*>(src), dst, nb);
    case GgmlType::I32:
      break;  // integer tables are read as int32, never dequantized
    default:
      if (dequantize_row_iq(t, src, dst, n)) return;
      break;
  }
  assert(false && "dequantize_row: unknown type");
}

}  // namespace ds
