// Internal to kernels/quant: the IQ4_NL, IQ4_XS and MXFP4 part of quantize_row
// (kernels/quant/quantize.h). The grid i-quants are read-only here: quantizing them needs
// an importance matrix and a lattice search this project does not implement.
#pragma once
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds {

bool quantize_iq_supported(GgmlType t);
// Quantizes n floats (a multiple of t's block size) into y; false when t is not one of
// the three types.
bool quantize_row_iq(GgmlType t, const float* x, void* y, int64_t n);

}  // namespace ds
