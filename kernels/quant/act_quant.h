// Reference activation quantizers (bit-exact, ../shared/SPEC.md "How the ecosystem computes
// quantized dot products"). They are also the weight quantizers for Q8_0 and Q8_K.
#pragma once
#include <cstdint>

#include "kernels/quant/blocks.h"

namespace ds::ref {

// Q8_0: per 32: d = amax/127 (float32), stored as fp16(d); q = round-half-even(x * (127/amax))
// (the reference's x86 rule [Q8_0_X86]).
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
// Q8_1: as Q8_0 plus s = d * sum(q) (both stored as fp16).
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
// Q8_K: per 256: m = element of largest magnitude (signed); iscale = -127/m;
// q = min(127, round-half-even(iscale * x)); d = 1/iscale; bsums = sums of 16 quants.
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace ds::ref
