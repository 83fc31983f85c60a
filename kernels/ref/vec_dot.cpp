// Reference dot products of one weight row with one activation row, and the reference
// matmul built from them. Numerics (SPEC.md "How the ecosystem computes quantized dot
// products"): the activation row is already in vec_dot_type(wtype); each weight block's
// quants are unpacked to small integers exactly as the reference dequantizer orders them,
// the products run in int32 per block (K-quants: per 256-superblock, scales applied as
// integers per sub-block, mins through the activation's bsums), and one float per block
// is scaled by the two block scales and summed in float, block by block.
// Float weights (F32/F16/BF16) are summed in double, like the reference's scalar path.
#include <cstring>

#include "kernels/quant/fp16.h"
#include "kernels/quant/act_quant.h"
#include "kernels/ref/ref.h"

namespace ds::ref {
namespace {

int dot32(const int8_t* a, const int8_t* b, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<int>(a[i]) * static_cast<int>(b[i]);
  return s;
}

// Legacy 32-blocks: unpack quants to int8 q[32] (offset removed for _0 types).
void unpack_q4(const uint8_t* qs, int offset, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0xF) - offset);
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}
void unpack_q5(const uint8_t* qs, const uint8_t* qh4, int offset, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
    q[j] = static_cast<int8_t>(((qs[j] & 0xF) | (h0 << 4)) - offset);
    q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | (h1 << 4)) - offset);
  }
}

float dot_q4_0(int64_t nb, const BlockQ4_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q4(x[i].qs, 8, q);
    sum += static_cast<float>(dot32(q, y[i].qs, 32)) * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
  }
  return sum;
}
float dot_q4_1(int64_t nb, const BlockQ4_1* x, const BlockQ8_1* y) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q4(x[i].qs, 0, q);
    sum += static_cast<float>(dot32(q, y[i].qs, 32)) * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) +
           fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
  }
  return sum;
}
float dot_q5_0(int64_t nb, const BlockQ5_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q5(x[i].qs, x[i].qh, 16, q);
    sum += static_cast<float>(dot32(q, y[i].qs, 32)) * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
  }
  return sum;
}
float dot_q5_1(int64_t nb, const BlockQ5_1* x, const BlockQ8_1* y) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q5(x[i].qs, x[i].qh, 0, q);
    sum += static_cast<float>(dot32(q, y[i].qs, 32)) * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) +
           fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
  }
  return sum;
}
float dot_q8_0(int64_t nb, const BlockQ8_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    sum += static_cast<float>(dot32(x[i].qs, y[i].qs, 32)) * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
  return sum;
}

// Sum over the 16 sub-blocks of 16 of sc[j] * bsums[j] (K-quant mins and offsets).
int bsum_dot(const int16_t* bsums, const int* per16) {
  int s = 0;
  for (int j = 0; j < 16; ++j) s += per16[j] * bsums[j];
  return s;
}

float dot_q2_k(int64_t nb, const BlockQ2_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[256];
    const uint8_t* qs = x[i].qs;
    for (int n = 0, k = 0; n < 256; n += 128, qs += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int l = 0; l < 32; ++l) q[k++] = static_cast<int8_t>((qs[l] >> shift) & 3);
    int sumi = 0, mins[16];
    for (int j = 0; j < 16; ++j) {
      sumi += (x[i].scales[j] & 0xF) * dot32(q + 16 * j, y[i].qs + 16 * j, 16);
      mins[j] = x[i].scales[j] >> 4;
    }
    const float dall = y[i].d * fp16_to_f32(x[i].d);
    const float dmin = y[i].d * fp16_to_f32(x[i].dmin);
    sum += dall * static_cast<float>(sumi) - dmin * static_cast<float>(bsum_dot(y[i].bsums, mins));
  }
  return sum;
}

float dot_q3_k(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[256], sc[16];
    q3_k_scales(x[i].scales, sc);
    const uint8_t* qs = x[i].qs;
    int bit = 0;
    for (int n = 0, k = 0; n < 256; n += 128, qs += 32)
      for (int shift = 0; shift < 8; shift += 2, ++bit)
        for (int l = 0; l < 32; ++l, ++k) {
          const int hi = (x[i].hmask[l] >> bit) & 1;
          q[k] = static_cast<int8_t>(((qs[l] >> shift) & 3) - (hi ? 0 : 4));
        }
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += sc[j] * dot32(q + 16 * j, y[i].qs + 16 * j, 16);
    sum += (y[i].d * fp16_to_f32(x[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Q4_K and Q5_K share everything but the 5th bit (qh == nullptr for Q4_K).
float dot_q45_k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, half_t d, half_t dmin,
                const BlockQ8_K& y) {
  int8_t q[256];
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * p + l] & 0xF, hi = qs[32 * p + l] >> 4;
      if (qh) {
        lo |= ((qh[l] >> (2 * p)) & 1) << 4;
        hi |= ((qh[l] >> (2 * p + 1)) & 1) << 4;
      }
      q[64 * p + l] = static_cast<int8_t>(lo);
      q[64 * p + 32 + l] = static_cast<int8_t>(hi);
    }
  int sumi = 0, mins[16];
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, scales, &sc, &m);
    sumi += sc * dot32(q + 32 * j, y.qs + 32 * j, 32);
    mins[2 * j] = mins[2 * j + 1] = m;
  }
  const float dall = y.d * fp16_to_f32(d);
  const float dm = y.d * fp16_to_f32(dmin);
  return dall * static_cast<float>(sumi) - dm * static_cast<float>(bsum_dot(y.bsums, mins));
}

float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[256];
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        q[n + l] = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
        q[n + l + 32] = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
        q[n + l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        q[n + l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    // sum_j sc_j * sum (q - 32) * a  ==  sum_j sc_j * dot(q, a) - 32 * sum_j sc_j * bsums_j
    int sumi = 0, sc[16];
    for (int j = 0; j < 16; ++j) {
      sc[j] = x[i].scales[j];
      sumi += sc[j] * dot32(q + 16 * j, y[i].qs + 16 * j, 16);
    }
    sumi -= 32 * bsum_dot(y[i].bsums, sc);
    sum += (y[i].d * fp16_to_f32(x[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

template <typename T, float (*kConv)(uint16_t)>
float dot_half(int64_t n, const T* x, const T* y) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(kConv(x[i]) * kConv(y[i]));
  return static_cast<float>(s);
}

}  // namespace

void q3_k_scales(const uint8_t* p, int8_t* out) {
  // 16 6-bit values: low 4 bits in p[0..7] (nibbles), high 2 bits in p[8..11].
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (p[j] & 0xF) : (p[j - 8] >> 4);
    const int hi = (p[8 + (j % 4)] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

float vec_dot(GgmlType wtype, int64_t n, const void* w, const void* act) {
  switch (wtype) {
    case GgmlType::F32: {
      const float* x = static_cast<const float*>(w);
      const float* y = static_cast<const float*>(act);
      double s = 0.0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i] * y[i]);
      return static_cast<float>(s);
    }
    case GgmlType::F16:
      return dot_half<uint16_t, fp16_to_f32>(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
    case GgmlType::BF16:
      return dot_half<uint16_t, bf16_to_f32>(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
    case GgmlType::Q4_0:
      return dot_q4_0(n / 32, static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(act));
    case GgmlType::Q4_1:
      return dot_q4_1(n / 32, static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(act));
    case GgmlType::Q5_0:
      return dot_q5_0(n / 32, static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(act));
    case GgmlType::Q5_1:
      return dot_q5_1(n / 32, static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(act));
    case GgmlType::Q8_0:
      return dot_q8_0(n / 32, static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(act));
    case GgmlType::Q2_K:
      return dot_q2_k(n / 256, static_cast<const BlockQ2_K*>(w), static_cast<const BlockQ8_K*>(act));
    case GgmlType::Q3_K:
      return dot_q3_k(n / 256, static_cast<const BlockQ3_K*>(w), static_cast<const BlockQ8_K*>(act));
    case GgmlType::Q4_K: {
      const auto* x = static_cast<const BlockQ4_K*>(w);
      const auto* y = static_cast<const BlockQ8_K*>(act);
      float s = 0.0f;
      for (int64_t i = 0; i < n / 256; ++i) s += dot_q45_k(x[i].scales, x[i].qs, nullptr, x[i].d, x[i].dmin, y[i]);
      return s;
    }
    case GgmlType::Q5_K: {
      const auto* x = static_cast<const BlockQ5_K*>(w);
      const auto* y = static_cast<const BlockQ8_K*>(act);
      float s = 0.0f;
      for (int64_t i = 0; i < n / 256; ++i) s += dot_q45_k(x[i].scales, x[i].qs, x[i].qh, x[i].d, x[i].dmin, y[i]);
      return s;
    }
    case GgmlType::Q6_K:
      return dot_q6_k(n / 256, static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(act));
    default:
      // i-quants and MXFP4; 0 for activation-only types (Q8_1, Q8_K)
      return vec_dot_iq(wtype, n, w, act);
  }
}

void quantize_act(GgmlType act_type, const float* x, void* y, int64_t n) {
  switch (act_type) {
    case GgmlType::Q8_K:
      quantize_row_q8_K(x, static_cast<BlockQ8_K*>(y), n);
      return;
    case GgmlType::Q8_0:
      quantize_row_q8_0(x, static_cast<BlockQ8_0*>(y), n);
      return;
    case GgmlType::Q8_1:
      quantize_row_q8_1(x, static_cast<BlockQ8_1*>(y), n);
      return;
    case GgmlType::F16: {
      auto* o = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_fp16(x[i]);
      return;
    }
    case GgmlType::BF16: {
      auto* o = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(x[i]);
      return;
    }
    case GgmlType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    default:
      return;
  }
}

void matmul(const MatmulArgs& a) {
  const auto* w = static_cast<const uint8_t*>(a.w);
  const auto* act = static_cast<const uint8_t*>(a.act);
  for (int64_t t = 0; t < a.n_tok; ++t)
    for (int64_t r = a.row_begin; r < a.row_end; ++r)
      a.out[t * a.out_stride + r] = vec_dot(a.wtype, a.n_in, w + r * a.w_row_stride, act + t * a.act_row_stride);
}

}  // namespace ds::ref
