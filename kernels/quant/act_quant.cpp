#include "kernels/quant/act_quant.h"

#include <cmath>

#include "kernels/quant/fp16.h"

namespace ds::ref {

// Q8_0/Q8_1 share the rule of the reference's x86 build [Q8_0_X86] (SPEC.md "Details that
// decide bit-level agreement"): amax = max|x| over one 32-block; d = amax / 127 (stored as
// a half); q = round-half-to-even(x * (127 / amax)), a float32 division, 0 when amax = 0.
// (The reference's portable C routine multiplies by 1 / d and rounds half away from zero,
// which differs in about 2 values per million; the reference logits come from x86.)
static float q8_block_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

static int q8_round(float x, float id) {
  return static_cast<int>(std::nearbyintf(x * id));
}  // half to even

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib, x += kQK8_0) {
    const float amax = q8_block_amax(x);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[ib].d = f32_to_fp16(amax / 127.0f);
    for (int j = 0; j < kQK8_0; ++j) y[ib].qs[j] = static_cast<int8_t>(q8_round(x[j], id));
  }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib, x += kQK8_1) {
    const float amax = q8_block_amax(x);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      const int q = q8_round(x[j], id);
      y[ib].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    y[ib].d = f32_to_fp16(d);
    y[ib].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t ib = 0; ib < n / kQK_K; ++ib, x += kQK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    BlockQ8_K& b = y[ib];
    if (amax == 0.0f) {
      b.d = 0.0f;
      for (int j = 0; j < kQK_K; ++j) b.qs[j] = 0;
      for (int j = 0; j < kQK_K / 16; ++j) b.bsums[j] = 0;
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = static_cast<int>(std::nearbyintf(iscale * x[j]));  // half to even (default mode)
      b.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += b.qs[j * 16 + k];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace ds::ref
