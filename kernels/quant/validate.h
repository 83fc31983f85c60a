// Block validation of tensor data, the rules of the reference toolchain's
// ggml_validate_row_data (../shared/SPEC-iquants.md, "Validation"): every half scale of a
// quantized block (d, dmin, m, s; IQ1_M's reassembled half) and every F16/BF16/F32 value
// must be finite, and an MXFP4 block's exponent byte must not be 255 (E8M0's NaN). Index,
// sign and sub-scale bit patterns are all legal and are not checked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/quant/types.h"

namespace ds {

// Checks n_blocks blocks (elements for F32/F16/BF16) of type t at data. On the first bad
// block returns false and sets *why to what is wrong and where ("block 12: d is inf").
bool validate_blocks(GgmlType t, const void* data, int64_t n_blocks, std::string* why);

}  // namespace ds
