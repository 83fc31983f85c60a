// Reference weight quantization (float rows -> GGUF blocks), used by `ds-cli quantize`
// and `ds-cli synth`. Not on any hot path: clarity and quality over speed.
//
// Q8_0 and Q8_K are the bit-exact activation quantizers of kernels/quant/act_quant.h.
// Q4_0/Q5_0 (and Q4_1/Q5_1) use the plain per-block scale (and min) of the format's
// definition. The K-quants search each sub-block's scale (and min) by weighted least
// squares over a grid of candidate scales, as the GGUF ecosystem's reference quantizer does
// without an importance matrix, then quantize the sub-block scales themselves to 6 (Q4_K,
// Q5_K) or 8 (Q6_K) bits and requantize every element with the stored scales.
// IQ4_NL, IQ4_XS and MXFP4: kernels/quant/quantize_iq.cpp. The grid i-quants (IQ1_*, IQ2_*,
// IQ3_*) are not produced here.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds {

// True when quantize_row can produce type t.
bool quantize_supported(GgmlType t);

// Quantizes n floats (a multiple of t's block size) into y; returns the bytes written
// (ggml_row_size(t, n)), or 0 when t is not supported. F32, F16 and BF16 are conversions.
size_t quantize_row(GgmlType t, const float* x, void* y, int64_t n);

}  // namespace ds
