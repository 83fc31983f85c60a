// The AVX2+FMA (+F16C, BMI2) kernel table: the reference table with the entries this ISA
// accelerates replaced (one file per op in this directory).
#include "kernels/avx2/kernels_avx2.h"
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx2_table() {
  KernelTable t = ref::ref_table();
  avx2::fill_entries(Isa::kAvx2, t);
  return t;
}

}  // namespace ds
