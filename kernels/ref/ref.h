// The scalar reference of every kernel in kernels.h: the executable spec that each ISA
// version is tested against. Written for clarity and for agreement with the reference
// ecosystem's numerics (../shared/SPEC.md), not for speed. The SIMD tables start from
// ref_table() and replace the entries they accelerate, so an op without a fast version
// still works on every ISA.
//
// Also holds the small helpers the SIMD paths share with the reference so that both
// compute the same function: RoPE angle tables, KV row addressing and loading.
#pragma once
// Functions here are static inline on purpose: [ISA_ODR] in kernels/CMakeLists.txt.
#include <cstdint>

#include "kernels/kernels.h"

namespace ds::ref {

#include "kernels/entry_points.inc"
void moe_route(const MoeRouteArgs& a);

// The reference dot product of an i-quant or MXFP4 weight row (kernels/ref/vec_dot_iq.cpp,
// float order [IQUANT_ORDER]); 0 for other types. Every ISA's vec_dot and matmul give
// these types' results bit-identical to it.
float vec_dot_iq(GgmlType wtype, int64_t n, const void* w, const void* act);

// The reference table (isa = kRef).
KernelTable ref_table();

// cs[2i] = cos(theta_i) * attn_factor, cs[2i+1] = sin(theta_i) * attn_factor for the
// n_rot/2 pairs at position pos ([ROPE], SPEC.md deepseek2 step 4). cs: [n_rot].
void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs);

// Address of token j's row in a paged KV view (element 0 of head 0).
static inline const uint8_t* kv_row(const KvView& v, int64_t j) {
  return v.blocks[j / v.block_size] + static_cast<size_t>(j % v.block_size) * v.row_stride + v.elem_offset;
}
// Converts n elements (F32, F16, BF16, Q8_0; Q8_0 needs n % 32 == 0) of a KV row to float.
void load_kv(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (SPEC.md "Block formats").
static inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// The 16 signed 6-bit scales (value - 32) of a Q3_K block.
void q3_k_scales(const uint8_t* packed, int8_t* out16);

}  // namespace ds::ref
