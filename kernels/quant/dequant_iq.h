// Internal to kernels/quant: the i-quant and MXFP4 part of dequantize_row (dequant.h).
#pragma once
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds {

// Dequantizes n elements (a multiple of t's block size) of an i-quant or MXFP4 row;
// false (nothing written) when t is not one of those types.
bool dequantize_row_iq(GgmlType t, const void* src, float* dst, int64_t n);

}  // namespace ds
