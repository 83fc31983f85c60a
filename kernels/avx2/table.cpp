// The AVX2+FMA kernel table: the reference table with the entries this ISA accelerates
// replaced (one file per op in this directory).
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx2_table() {
  KernelTable t = ref::ref_table();
  t.isa = Isa::kAvx2;
  return t;
}

}  // namespace ds
