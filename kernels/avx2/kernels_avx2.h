// Internal: the AVX2 kernels (one .cpp per op in this directory), assembled into a
// KernelTable by table.cpp. Signatures are those of kernels.h (kernels/entry_points.inc).
#pragma once
#include "kernels/kernels.h"

namespace ds::avx2 {

#include "kernels/entry_points.inc"

}  // namespace ds::avx2
