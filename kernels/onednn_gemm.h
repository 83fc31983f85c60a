// Large F32/BF16 matrix products through oneDNN (kernels/onednn_gemm.cpp is the only file
// that includes oneDNN). Opt-in and separate from KernelTable::matmul on purpose: oneDNN
// picks its blocking (and so its summation order) from the shape, so its results are not
// [BATCH_INVARIANT]; callers that need invariance use kern().matmul.
#pragma once
#include "kernels/kernels.h"

namespace ds {

// Computes a like KernelTable::matmul for wtype F32 or BF16 (activations in the same
// type). Returns false (and writes nothing) for other types or when oneDNN fails.
// Primitives are cached per shape; the call is thread-safe.
bool onednn_matmul(const MatmulArgs& a);

}  // namespace ds
