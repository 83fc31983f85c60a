// Reference dot products of i-quant and MXFP4 weight rows with quantized activation rows
// (Q8_K for the 256-element types, Q8_0 for IQ4_NL and MXFP4): the spec every ISA's
// kernel for these types reproduces bit for bit. ../shared/SPEC-iquants.md, "Activation
// quantization and dot products", gives the integer parts (exact) and the reference's
// float order on x86, which this file follows [IQUANT_ORDER]:
//
// 256-element types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS):
//   per 256-block, 8 int32 lanes; lane k = sum over the 8 sub-blocks of 32 of
//   mult * (sum of q * q8 over elements 4k..4k+3 of the sub-block) (mult = the integer
//   sub-scale of those elements). d = d_w * d_a (float32 product); acc[k] = fma(d,
//   float(lane k), acc[k]) block after block. Result: factor * hsum8(acc) with
//   hsum8 = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), factor 0.125 (IQ2_*), 0.25 (IQ3_XXS), 1.
//   IQ1_S: the shift term isum1 = sum over sub-blocks of mult * delta * (its two bsums)
//   goes to one scalar accumulator acc1 = fma(d, float(isum1), acc1); result
//   hsum8(acc) + 0.125 * acc1. IQ1_M: the shift term has its own 8 lanes (lane k: mult *
//   delta of the group * sum of q8 over elements 4k..4k+3) and accumulator; result
//   hsum8(acc) + 0.125 * hsum8(acc_delta).
// IQ4_NL and MXFP4: per 32-block isum = sum(kvalue * q8); acc = fma(float(isum),
//   d_w * d_a, acc), one sequential chain from 0 over the blocks (the reference's
//   repacked kernels' order; d_w = the half (IQ4_NL) or 2^(e-128) (MXFP4), d_a = the Q8_0
//   block's half).
// The fmas are std::fma: this directory is compiled with -ffp-contract=off, so nothing else
// is fused.
#include <cmath>

#include "kernels/quant/iq_unpack.h"
#include "kernels/ref/ref.h"

namespace ds::ref {
namespace {

float hsum8(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// Lane k of one unpacked block against one Q8_K block (see the file comment).
void block_lanes(const iq::Unpacked& u, const int8_t* q8, int32_t* lanes) {
  for (int k = 0; k < 8; ++k) lanes[k] = 0;
  for (int ib = 0; ib < 8; ++ib)
    for (int k = 0; k < 8; ++k) {
      const int e = 32 * ib + 4 * k;
      int s = 0;
      for (int j = 0; j < 4; ++j) s += u.q[e + j] * q8[e + j];
      lanes[k] += u.mult[e / 16] * s;
    }
}

template <typename Block>
float dot_k256(int64_t nb, const Block* x, const BlockQ8_K* y, float factor) {
  float acc[8] = {};
  iq::Unpacked u;
  int32_t lanes[8];
  for (int64_t i = 0; i < nb; ++i) {
    iq::unpack(x[i], u);
    block_lanes(u, y[i].qs, lanes);
    const float d = u.d * y[i].d;
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
  }
  return factor * hsum8(acc);
}

float dot_iq1_s(int64_t nb, const BlockIQ1_S* x, const BlockQ8_K* y) {
  float acc[8] = {}, acc1 = 0.0f;
  iq::Unpacked u;
  int32_t lanes[8];
  for (int64_t i = 0; i < nb; ++i) {
    iq::unpack(x[i], u);
    block_lanes(u, y[i].qs, lanes);
    int32_t isum1 = 0;
    for (int ib = 0; ib < 8; ++ib)
      isum1 += u.mult[2 * ib] * u.delta[4 * ib] * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
    const float d = u.d * y[i].d;
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
    acc1 = std::fma(d, static_cast<float>(isum1), acc1);
  }
  return hsum8(acc) + kIq1Delta * acc1;
}

float dot_iq1_m(int64_t nb, const BlockIQ1_M* x, const BlockQ8_K* y) {
  float acc[8] = {}, acc_delta[8] = {};
  iq::Unpacked u;
  int32_t lanes[8], lanes_delta[8];
  for (int64_t i = 0; i < nb; ++i) {
    iq::unpack(x[i], u);
    block_lanes(u, y[i].qs, lanes);
    for (int k = 0; k < 8; ++k) lanes_delta[k] = 0;
    for (int ib = 0; ib < 8; ++ib)
      for (int k = 0; k < 8; ++k) {
        const int e = 32 * ib + 4 * k;
        int s = 0;
        for (int j = 0; j < 4; ++j) s += y[i].qs[e + j];
        lanes_delta[k] += u.mult[e / 16] * u.delta[e / 8] * s;
      }
    const float d = u.d * y[i].d;
    for (int k = 0; k < 8; ++k) {
      acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
      acc_delta[k] = std::fma(d, static_cast<float>(lanes_delta[k]), acc_delta[k]);
    }
  }
  return hsum8(acc) + kIq1Delta * hsum8(acc_delta);
}

// IQ4_NL and MXFP4: 32-blocks of nibbles through a 16-entry value table.
template <typename Block>
float dot_nl32(int64_t nb, const Block* x, const BlockQ8_0* y, const int8_t* values) {
  float acc = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    iq::put_nibbles32(q, x[i].qs, values);
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += q[j] * y[i].qs[j];
    float dw;
    if constexpr (sizeof(Block) == sizeof(BlockMxfp4)) {
      dw = iq::mxfp4_scale(x[i].e);
    } else {
      dw = fp16_to_f32(x[i].d);
    }
    acc = std::fma(static_cast<float>(isum), dw * fp16_to_f32(y[i].d), acc);
  }
  return acc;
}

}  // namespace

float vec_dot_iq(GgmlType wtype, int64_t n, const void* w, const void* act) {
  const auto* a8k = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / kQK_K;
  switch (wtype) {
    case GgmlType::IQ2_XXS:
      return dot_k256(nb, static_cast<const BlockIQ2_XXS*>(w), a8k, 0.125f);
    case GgmlType::IQ2_XS:
      return dot_k256(nb, static_cast<const BlockIQ2_XS*>(w), a8k, 0.125f);
    case GgmlType::IQ2_S:
      return dot_k256(nb, static_cast<const BlockIQ2_S*>(w), a8k, 0.125f);
    case GgmlType::IQ3_XXS:
      return dot_k256(nb, static_cast<const BlockIQ3_XXS*>(w), a8k, 0.25f);
    case GgmlType::IQ3_S:
      return dot_k256(nb, static_cast<const BlockIQ3_S*>(w), a8k, 1.0f);
    case GgmlType::IQ4_XS:
      return dot_k256(nb, static_cast<const BlockIQ4_XS*>(w), a8k, 1.0f);
    case GgmlType::IQ1_S:
      return dot_iq1_s(nb, static_cast<const BlockIQ1_S*>(w), a8k);
    case GgmlType::IQ1_M:
      return dot_iq1_m(nb, static_cast<const BlockIQ1_M*>(w), a8k);
    case GgmlType::IQ4_NL:
      return dot_nl32(n / kQK4_NL, static_cast<const BlockIQ4_NL*>(w), static_cast<const BlockQ8_0*>(act),
                      kIq4nlValues);
    case GgmlType::MXFP4:
      return dot_nl32(n / kQKMxfp4, static_cast<const BlockMxfp4*>(w), static_cast<const BlockQ8_0*>(act),
                      kMxfp4Values);
    default:
      return 0.0f;
  }
}

}  // namespace ds::ref
