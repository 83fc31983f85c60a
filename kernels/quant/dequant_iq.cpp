// Scalar dequantization of the i-quants and MXFP4 (../shared/SPEC-iquants.md, "Block
// layouts"): each block unpacks to integers (kernels/quant/iq_unpack.h) and every element
// is d * factor * mult * (q + 0.125 * delta). All of these products are exact in float32
// (a half times small integers and powers of two), so the result equals the reference
// toolchain's dequantization bit for bit whatever order the factors are multiplied in.
#include "kernels/quant/dequant_iq.h"

#include "kernels/quant/iq_unpack.h"

namespace ds {
namespace {

template <typename Block>
void dequant_k256(const Block* x, float* y, int64_t nb, float factor) {
  iq::Unpacked u;
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    iq::unpack(x[i], u);
    const float df = u.d * factor;
    for (int e = 0; e < kQK_K; ++e) y[e] = df * static_cast<float>(u.mult[e / 16] * u.q[e]);
  }
}

// IQ1_S / IQ1_M: q + delta/8 = (8q + delta) / 8.
template <typename Block>
void dequant_iq1(const Block* x, float* y, int64_t nb) {
  iq::Unpacked u;
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    iq::unpack(x[i], u);
    const float df = u.d * kIq1Delta;
    for (int e = 0; e < kQK_K; ++e) y[e] = df * static_cast<float>(u.mult[e / 16] * (8 * u.q[e] + u.delta[e / 8]));
  }
}

void dequant_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  int8_t q[kQK4_NL];
  for (int64_t i = 0; i < nb; ++i, y += kQK4_NL) {
    const float d = fp16_to_f32(x[i].d);
    iq::put_nibbles32(q, x[i].qs, kIq4nlValues);
    for (int j = 0; j < kQK4_NL; ++j) y[j] = d * static_cast<float>(q[j]);
  }
}

void dequant_mxfp4(const BlockMxfp4* x, float* y, int64_t nb) {
  int8_t q[kQKMxfp4];
  for (int64_t i = 0; i < nb; ++i, y += kQKMxfp4) {
    const float d = iq::mxfp4_scale(x[i].e);
    iq::put_nibbles32(q, x[i].qs, kMxfp4Values);
    for (int j = 0; j < kQKMxfp4; ++j) y[j] = d * static_cast<float>(q[j]);
  }
}

}  // namespace

bool dequantize_row_iq(GgmlType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::IQ2_XXS:
      dequant_k256(static_cast<const BlockIQ2_XXS*>(src), dst, n / kQK_K, 0.125f);
      return true;
    case GgmlType::IQ2_XS:
      dequant_k256(static_cast<const BlockIQ2_XS*>(src), dst, n / kQK_K, 0.125f);
      return true;
    case GgmlType::IQ2_S:
      dequant_k256(static_cast<const BlockIQ2_S*>(src), dst, n / kQK_K, 0.125f);
      return true;
    case GgmlType::IQ3_XXS:
      dequant_k256(static_cast<const BlockIQ3_XXS*>(src), dst, n / kQK_K, 0.25f);
      return true;
    case GgmlType::IQ3_S:
      dequant_k256(static_cast<const BlockIQ3_S*>(src), dst, n / kQK_K, 1.0f);
      return true;
    case GgmlType::IQ4_XS:
      dequant_k256(static_cast<const BlockIQ4_XS*>(src), dst, n / kQK_K, 1.0f);
      return true;
    case GgmlType::IQ1_S:
      dequant_iq1(static_cast<const BlockIQ1_S*>(src), dst, n / kQK_K);
      return true;
    case GgmlType::IQ1_M:
      dequant_iq1(static_cast<const BlockIQ1_M*>(src), dst, n / kQK_K);
      return true;
    case GgmlType::IQ4_NL:
      dequant_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n / kQK4_NL);
      return true;
    case GgmlType::MXFP4:
      dequant_mxfp4(static_cast<const BlockMxfp4*>(src), dst, n / kQKMxfp4);
      return true;
    default:
      return false;
  }
}

}  // namespace ds
