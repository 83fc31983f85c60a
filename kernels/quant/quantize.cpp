// Reference weight quantizers; see quantize.h for the design. Element orders mirror
// dequant.cpp (the spec of each layout): whatever is packed here must unpack there.
#include "kernels/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/fp16.h"
#include "kernels/quant/quantize_iq.h"
#include "kernels/quant/act_quant.h"

namespace ds {
namespace {

// Round to nearest, ties to even, for |v| < 2^22 (larger values are clamped first):
// adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. Same result as
// nearbyintf in the default rounding mode, without a libm call in the scale searches.
inline int nearest(float v) {
  v = std::clamp(v, -4194303.0f, 4194303.0f) + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &v, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// The element of largest magnitude, with its sign.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Q4_0 / Q5_0: x = d * (q - 2^(bits-1)) with d = max / -2^(bits-1), so the element of
// largest magnitude maps exactly onto the extreme level -2^(bits-1).
template <int kBits>
void quant_sym_block(const float* x, half_t* d_out, uint8_t* q) {
  constexpr int kOff = 1 << (kBits - 1), kMax = (1 << kBits) - 1;
  const float d = signed_absmax(x, 32) / -static_cast<float>(kOff);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = f32_to_fp16(d);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::min(kMax, static_cast<int>(x[j] * id + kOff + 0.5f)));
}

// Q4_1 / Q5_1: x = d*q + m with m = min, d = (max - min) / (2^bits - 1).
template <int kBits>
void quant_affine_block(const float* x, half_t* d_out, half_t* m_out, uint8_t* q) {
  constexpr int kMax = (1 << kBits) - 1;
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) {
    mn = std::min(mn, x[j]);
    mx = std::max(mx, x[j]);
  }
  const float d = (mx - mn) / static_cast<float>(kMax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = f32_to_fp16(d);
  *m_out = f32_to_fp16(mn);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::min(kMax, static_cast<int>((x[j] - mn) * id + 0.5f)));
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {  // 32 quants: low = 0..15, high = 16..31
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

uint32_t fifth_bits(const uint8_t* q) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return qh;
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    quant_sym_block<4>(x, &y[i].d, q);
    pack_nibbles(q, y[i].qs);
  }
}
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    quant_sym_block<5>(x, &y[i].d, q);
    pack_nibbles(q, y[i].qs);
    const uint32_t qh = fifth_bits(q);
    std::memcpy(y[i].qh, &qh, 4);
  }
}
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    quant_affine_block<4>(x, &y[i].d, &y[i].m, q);
    pack_nibbles(q, y[i].qs);
  }
}
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    quant_affine_block<5>(x, &y[i].d, &y[i].m, q);
    pack_nibbles(q, y[i].qs);
    const uint32_t qh = fifth_bits(q);
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// Best weighted least-squares fit of x ~ scale * L + min (L in [0, nmax], min <= 0) for
// one sub-block of n elements (32 for Q4_K/Q5_K, 16 for Q2_K). Tries the plain min/max grid step and nstep + 1
// stretched ones (nmax + rmin + rdelta*is levels across the range), solving the 2x2 normal equations for scale and min
// at each candidate assignment and keeping the lowest weighted error. Returns scale; *neg_min receives -min (>= 0), the
// value stored in the block.
struct FitParams {
  int nmax;
  float rmin, rdelta;
  int nstep;
};
template <int n>
float fit_scale_min(const float* x, const float* w, FitParams p, uint8_t* L, float* neg_min) {
  static_assert(n % 8 == 0);
  float mn = x[0], mx = x[0], sum_w = 0.0f, sum_x = 0.0f;
  for (int i = 0; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  mn = std::min(mn, 0.0f);
  if (mx <= mn) {
    std::fill(L, L + n, 0);
    *neg_min = -mn;
    return 0.0f;
  }
  auto level = [&](float iscale, float v) { return std::clamp(nearest(iscale * (v - mn)), 0, p.nmax); };
  float scale = (mx - mn) / static_cast<float>(p.nmax), best_min = mn, best_err = 0.0f;
  for (int i = 0; i < n; ++i) {  // the plain min/max grid, error measured the same way
    L[i] = static_cast<uint8_t>(level(1.0f / scale, x[i]));
    const float l = static_cast<float>(L[i]);
    best_err +=
        w[i] * (scale * scale * l * l + 2.0f * scale * mn * l + mn * mn - 2.0f * scale * l * x[i] - 2.0f * mn * x[i]);
  }
  // The candidate loop is written to vectorize under strict FP (this is the hot spot of
  // K-quant quantization): x - mn >= 0, so truncating v + 0.5 rounds to nearest, and the
  // weighted sums run in 8 independent lanes.
  float xm[n], lf[n];
  for (int i = 0; i < n; ++i) xm[i] = x[i] - mn;
  const float fmax_level = static_cast<float>(p.nmax);
  for (int is = 0; is <= p.nstep; ++is) {
    const float iscale = (p.rmin + p.rdelta * static_cast<float>(is) + static_cast<float>(p.nmax)) / (mx - mn);
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(static_cast<int>(iscale * xm[i] + 0.5f));
      lf[i] = l < fmax_level ? l : fmax_level;
    }
    float a_l[8] = {}, a_l2[8] = {}, a_xl[8] = {};
    for (int i = 0; i < n; i += 8) {
      for (int k = 0; k < 8; ++k) {
        const float wl = w[i + k] * lf[i + k];
        a_l[k] += wl;
        a_l2[k] += wl * lf[i + k];
        a_xl[k] += wl * x[i + k];
      }
    }
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int k = 0; k < 8; ++k) {
      sum_l += a_l[k];
      sum_l2 += a_l2[k];
      sum_xl += a_xl[k];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.0f) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0.0f) {  // the format only subtracts: refit the scale with min = 0
      m = 0.0f;
      s = sum_xl / sum_l2;
    }
    // Weighted squared error from the sums, without the constant sum(w x^2):
    // sum w (s l + m - x)^2 = s^2 Sll + 2 s m Sl + m^2 Sw - 2 s Sxl - 2 m Sx + const.
    const float err = s * s * sum_l2 + 2.0f * s * m * sum_l + m * m * sum_w - 2.0f * s * sum_xl - 2.0f * m * sum_x;
    if (err < best_err) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(lf[i]);
      best_err = err;
      scale = s;
      best_min = m;
    }
  }
  *neg_min = -best_min;
  return scale;
}

// Q4_K/Q5_K common part: fits the 8 sub-blocks, stores d, dmin and the packed 6-bit
// scales/mins, and returns the final levels L[256] computed with the stored scales.
void quant_k4_common(const float* x, int nmax, FitParams fp, half_t* d_out, half_t* dmin_out, uint8_t* packed,
                     uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);  // favour large elements
    scales[j] = fit_scale_min<32>(xs, w, fp, L + 32 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(packed, 0, kKScaleSize);
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest(inv_min * mins[j])));
    if (j < 4) {  // layout: SPEC.md, "The 12-byte scales"
      packed[j] = ls[j];
      packed[j + 4] = lm[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  *d_out = f32_to_fp16(max_scale / 63.0f);
  *dmin_out = f32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_f32(*d_out), dmin = fp16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(ls[j]);
    const float mj = dmin * static_cast<float>(lm[j]);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = dj == 0.0f ? 0 : static_cast<uint8_t>(std::clamp(nearest((x[32 * j + l] + mj) / dj), 0, nmax));
    }
  }
}

void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quant_k4_common(x, 15, {15, -1.0f, 0.1f, 20}, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
      }
    }
  }
}

void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quant_k4_common(x, 31, {31, -0.5f, 0.1f, 15}, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// Symmetric fit x ~ scale * l, l in [-nmax, nmax - 1], weighted by x^2 (big elements
// matter most): tries 19 grid stretches around nmax/|max| and keeps the assignment whose
// least-squares scale explains the most weighted energy. L receives l + nmax.
float fit_scale_sym(const float* x, int n, int nmax, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, static_cast<int8_t>(nmax));
    return 0.0f;
  }
  float best_scale = 0.0f, best = -1.0f;
  for (int is = -9; is <= 9; ++is) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l * l);
    }
    if (suml2 <= 0.0f) continue;
    const float energy = sumlx * sumlx / suml2;  // = scale * sumlx at the optimal scale
    if (energy > best) {
      best = energy;
      best_scale = sumlx / suml2;
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1) + nmax);
    }
  }
  return best_scale;
}

// The symmetric fits of a superblock's 16 sub-blocks of 16 (levels -nmax..nmax-1 into L,
// scales into scales); returns the scale of largest magnitude, with its sign.
float fit_sub16_sym(const float* x, int nmax, int8_t* L, float* scales) {
  float max_scale = 0.0f, max_abs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_scale_sym(x + 16 * j, 16, nmax, L + 16 * j);
    if (std::fabs(scales[j]) > max_abs) {
      max_abs = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  return max_scale;
}

void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float max_scale = fit_sub16_sym(x, 32, L, scales);
    BlockQ6_K& b = y[i];
    std::memset(&b, 0, sizeof(b));
    if (std::fabs(max_scale) < 1e-15f) continue;  // all zero: d = 0
    const float iscale = -128.0f / max_scale;
    b.d = f32_to_fp16(1.0f / iscale);
    const float d = fp16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      b.scales[j] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[j])));
      const float dj = d * static_cast<float>(b.scales[j]);
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(dj == 0.0f ? 32 : std::clamp(nearest(x[16 * j + l] / dj), -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {  // element order: dequant.cpp, dequant_q6_K
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = b.ql + 64 * h;
      uint8_t* qh = b.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                     ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

// Q2_K: 16 sub-blocks of 16, x ~ d * sc * L - dmin * m with L in [0, 3] and 4-bit sc, m
// (the Q4_K fit per sub-block, then d = max scale / 15, dmin = max min / 15). Element
// order: dequant.cpp, dequant_q2_K.
void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  float scales[16], mins[16], w[16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      const float* xs = x + 16 * j;
      float sum_x2 = 0.0f;
      for (int l = 0; l < 16; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 16.0f);
      for (int l = 0; l < 16; ++l) w[l] = av_x + std::fabs(xs[l]);
      scales[j] = fit_scale_min<16>(xs, w, {3, -0.5f, 0.1f, 15}, L + 16 * j, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& b = y[i];
    std::memset(&b, 0, sizeof(b));
    const float inv_scale = max_scale > 0.0f ? 15.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 15.0f / max_min : 0.0f;
    b.d = f32_to_fp16(max_scale / 15.0f);
    b.dmin = f32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int j = 0; j < 16; ++j) {
      const int ls = std::min(15, nearest(inv_scale * scales[j])), lm = std::min(15, nearest(inv_min * mins[j]));
      b.scales[j] = static_cast<uint8_t>(ls | (lm << 4));
      const float dj = d * static_cast<float>(ls), mj = dmin * static_cast<float>(lm);
      for (int l = 0; l < 16; ++l) {
        const float v = x[16 * j + l];
        L[16 * j + l] = dj == 0.0f ? 0 : static_cast<uint8_t>(std::clamp(nearest((v + mj) / dj), 0, 3));
      }
    }
    for (int e = 0; e < kQK_K; ++e) {  // e = 128n + 32s + l: bits 2s of qs[32n + l]
      const int n = e / 128, s = (e % 128) / 32, l = e % 32;
      b.qs[32 * n + l] = static_cast<uint8_t>(b.qs[32 * n + l] | (L[e] << (2 * s)));
    }
  }
}

// Q3_K: 16 sub-blocks of 16, x ~ d * sc * (L - 4) with L in [0, 7] and signed 6-bit sc
// (the Q6_K symmetric fit with 4 levels each side, then d = max |scale| / 32). L's low 2
// bits go to qs, its third bit to hmask (a set bit means no -4). Element order and scale
// packing: dequant.cpp, dequant_q3_K.
void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t nb) {
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float max_scale = fit_sub16_sym(x, 4, L, scales);
    BlockQ3_K& b = y[i];
    std::memset(&b, 0, sizeof(b));
    if (std::fabs(max_scale) < 1e-15f) continue;  // all zero: d = 0
    const float iscale = -32.0f / max_scale;
    b.d = f32_to_fp16(1.0f / iscale);
    const float d = fp16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      const int ls = std::clamp(nearest(iscale * scales[j]), -32, 31);
      const int u = ls + 32;  // the stored 6-bit value
      b.scales[j % 8] = static_cast<uint8_t>(b.scales[j % 8] | ((u & 0xF) << (j < 8 ? 0 : 4)));
      b.scales[8 + j % 4] = static_cast<uint8_t>(b.scales[8 + j % 4] | ((u >> 4) << (2 * (j / 4))));
      const float dj = d * static_cast<float>(ls);
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(dj == 0.0f ? 4 : std::clamp(nearest(x[16 * j + l] / dj), -4, 3) + 4);
      }
    }
    for (int e = 0; e < kQK_K; ++e) {  // e = 128n + 32s + l: bits 2s of qs[32n + l], bit 4n + s of hmask[l]
      const int n = e / 128, s = (e % 128) / 32, l = e % 32;
      b.qs[32 * n + l] = static_cast<uint8_t>(b.qs[32 * n + l] | ((L[e] & 3) << (2 * s)));
      b.hmask[l] = static_cast<uint8_t>(b.hmask[l] | ((L[e] >> 2) << (4 * n + s)));
    }
  }
}

}  // namespace

bool quantize_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
      return true;
    default:
      return quantize_iq_supported(t);
  }
}

size_t quantize_row(GgmlType t, const float* x, void* y, int64_t n) {
  if (!quantize_supported(t)) return 0;
  const GgmlTypeTraits tr = ggml_type_traits(t);
  if (n % tr.block_size != 0) return 0;
  const int64_t nb = n / tr.block_size;
  switch (t) {
    case GgmlType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = f32_to_fp16(x[i]);
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = f32_to_bf16(x[i]);
      break;
    case GgmlType::Q4_0:
      quantize_q4_0(x, static_cast<BlockQ4_0*>(y), nb);
      break;
    case GgmlType::Q4_1:
      quantize_q4_1(x, static_cast<BlockQ4_1*>(y), nb);
      break;
    case GgmlType::Q5_0:
      quantize_q5_0(x, static_cast<BlockQ5_0*>(y), nb);
      break;
    case GgmlType::Q5_1:
      quantize_q5_1(x, static_cast<BlockQ5_1*>(y), nb);
      break;
    case GgmlType::Q8_0:
      ref::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(y), n);
      break;
    case GgmlType::Q2_K:
      quantize_q2_K(x, static_cast<BlockQ2_K*>(y), nb);
      break;
    case GgmlType::Q3_K:
      quantize_q3_K(x, static_cast<BlockQ3_K*>(y), nb);
      break;
    case GgmlType::Q4_K:
      quantize_q4_K(x, static_cast<BlockQ4_K*>(y), nb);
      break;
    case GgmlType::Q5_K:
      quantize_q5_K(x, static_cast<BlockQ5_K*>(y), nb);
      break;
    case GgmlType::Q6_K:
      quantize_q6_K(x, static_cast<BlockQ6_K*>(y), nb);
      break;
    case GgmlType::Q8_K:
      ref::quantize_row_q8_K(x, static_cast<BlockQ8_K*>(y), n);
      break;
    default:
      if (!quantize_row_iq(t, x, y, n)) return 0;
      break;
  }
  return static_cast<size_t>(nb) * static_cast<size_t>(tr.type_size);
}

}  // namespace ds
