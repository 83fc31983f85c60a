// Scalar dequantization of any weight type (kernels/quant/dequant.cpp). kernels.h repeats the
// declaration for its users, so that code below the kernel API can reach it without kernels.h.
#pragma once
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds {

// Dequantize one row of n elements of any weight type to float (reference path).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

}  // namespace ds
