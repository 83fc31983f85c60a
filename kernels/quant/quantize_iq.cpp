// Weight quantizers for IQ4_NL, IQ4_XS and MXFP4 (no importance matrix), after the GGUF
// ecosystem's reference quantizer so that files written here look like the ones users
// download:
//  - IQ4_NL / IQ4_XS: per 32 elements, the scale is searched over 15 candidates
//    (1/d = (k + v[0]) / max for k = -7..7, v = kvalues_iq4nl, max = the element of largest
//    magnitude) plus the start d = max / -v[0]; each candidate is scored by weighted least
//    squares with weights x^2 (the reference's choice without an importance matrix) and
//    refitted as d = sum(w q x) / sum(w q^2). Elements go to the nearest table value.
//    IQ4_XS then stores the 8 scales of a 256-block as 6-bit multiples of the block's half
//    d = -max_scale / 32 and requantizes every element with its stored scale.
//  - MXFP4: per 32, e = floor(log2(amax)) - 2 + 127 (so amax / 2^(e-128) lies in [8, 16)),
//    clamped to 0..254; each element gets the nearest of the 16 doubled E2M1 values times
//    2^(e-128) (first minimum in table order).
// Unpacking: kernels/quant/dequant_iq.cpp; layouts: ../shared/SPEC-iquants.md.
#include "kernels/quant/quantize_iq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/fp16.h"
#include "kernels/quant/iq_tables.h"
#include "kernels/quant/iq_unpack.h"

namespace ds {
namespace {

constexpr int kIq4Tries = 7;
constexpr float kGroupMaxEps = 1e-15f;

// Index of the table value nearest v (values sorted ascending; ties to the lower index).
int nearest_value(const int8_t* values, float v) {
  if (v <= values[0]) return 0;
  if (v >= values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - static_cast<float>(values[lo]) < static_cast<float>(values[hi]) - v ? lo : hi;
}

int round_int(float v) {
  return static_cast<int>(std::nearbyintf(v));
}

// The best scale of one 32-element group for the non-linear 4-bit table (file comment);
// 0 for an all-zero group.
float best_nl_scale(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const int8_t* v = kIq4nlValues;
  auto fit = [&](float id, float* sumqx, float* sumq2) {
    *sumqx = 0.0f, *sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = v[nearest_value(v, id * x[j])], w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1.0f / (-max / v[0]), &sumqx, &sumq2);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int k = -kIq4Tries; k <= kIq4Tries; ++k) {
    fit((static_cast<float>(k + v[0])) / max, &sumqx, &sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 elements -> 16 bytes of nibbles (low: element j, high: element j + 16) at scale d.
void pack_nl32(const float* x, float d, uint8_t* qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int lo = nearest_value(kIq4nlValues, id * x[j]), hi = nearest_value(kIq4nlValues, id * x[j + 16]);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_NL) {
    const float d = best_nl_scale(x);
    y[i].d = f32_to_fp16(d);
    pack_nl32(x, d, y[i].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    BlockIQ4_XS& b = y[i];
    std::memset(&b, 0, sizeof(b));
    float scales[8], max_scale = 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      scales[ib] = best_nl_scale(x + 32 * ib);
      if (std::fabs(scales[ib]) > std::fabs(max_scale)) max_scale = scales[ib];
    }
    const float d = -max_scale / 32.0f;
    b.d = f32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      const int l = std::clamp(round_int(id * scales[ib]), -32, 31);
      pack_nl32(x + 32 * ib, d * static_cast<float>(l), b.qs + 16 * ib);
      const int u = l + 32;
      b.scales_l[ib / 2] = static_cast<uint8_t>(b.scales_l[ib / 2] | ((u & 0xF) << (4 * (ib % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((u >> 4) << (2 * ib)));
    }
  }
}

int nearest_fp4(float v, float scale) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * scale - v);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[k]) * scale - v);
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKMxfp4) {
    float amax = 0.0f;
    for (int j = 0; j < kQKMxfp4; ++j) amax = std::max(amax, std::fabs(x[j]));
    const int e = amax > 0.0f ? static_cast<int>(std::floor(std::log2(amax))) - 2 + 127 : 0;
    y[i].e = static_cast<uint8_t>(std::clamp(e, 0, 254));
    const float scale = iq::mxfp4_scale(y[i].e);
    for (int j = 0; j < 16; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest_fp4(x[j], scale) | (nearest_fp4(x[j + 16], scale) << 4));
  }
}

}  // namespace

bool quantize_iq_supported(GgmlType t) {
  return t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS || t == GgmlType::MXFP4;
}

bool quantize_row_iq(GgmlType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case GgmlType::IQ4_NL:
      quantize_iq4_nl(x, static_cast<BlockIQ4_NL*>(y), n / kQK4_NL);
      return true;
    case GgmlType::IQ4_XS:
      quantize_iq4_xs(x, static_cast<BlockIQ4_XS*>(y), n / kQK_K);
      return true;
    case GgmlType::MXFP4:
      quantize_mxfp4(x, static_cast<BlockMxfp4*>(y), n / kQKMxfp4);
      return true;
    default:
      return false;
  }
}

}  // namespace ds
