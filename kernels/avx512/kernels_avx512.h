// Internal: the AVX-512 kernels (one .cpp per op in this directory), assembled into a
// KernelTable by table.cpp. Signatures are those of kernels.h.
#pragma once
#include "kernels/kernels.h"

namespace ds::avx512 {

void quantize_act(GgmlType act_type, const float* x, void* y, int64_t n);
float vec_dot(GgmlType wtype, int64_t n, const void* w, const void* act);
void matmul(const MatmulArgs& a);
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void rope(const RopeArgs& a, const RopeParams& p);
void silu_mul(const float* g, const float* u, float* y, int64_t n);
void softmax(float* x, int64_t n, float scale);
void flash_attn(const AttnArgs& a);
void mla_attn(const MlaArgs& a);
void store_kv(GgmlType t, const float* x, void* y, int64_t n);

// matmul_panel.cpp: 16 weight rows [r0, r0 + 16) x activation rows [t0, t0 + nt),
// nt <= kPanelMaxTok,
// bit-identical to matmul ([KQUANT_EXACT]); only for the types panel_supported() accepts.
constexpr int64_t kPanelMaxTok = 256;
bool panel_supported(GgmlType t);
void panel_matmul(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt);

}  // namespace ds::avx512
