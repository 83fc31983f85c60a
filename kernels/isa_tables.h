// Internal: the constructors of the per-ISA kernel tables. Each lives in its ISA's
// directory (compiled with that ISA's flags) and must only be called by dispatch.cpp
// after CPUID and XGETBV said the ISA is usable.
#pragma once
#include "kernels/kernels.h"

namespace ds {

KernelTable avx2_table();  // kernels/avx2/table.cpp: AVX2 + FMA + F16C
// kernels/avx512/table.cpp: AVX-512 F/BW/VL/DQ + VNNI; bf16: the CPU has AVX512_BF16.
KernelTable avx512_table(bool bf16);

}  // namespace ds
