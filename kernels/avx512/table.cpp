// The AVX-512 (F/BW/VL/DQ, VNNI, BF16) kernel table: the reference table with the entries
// this ISA accelerates replaced (one file per op in this directory).
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx512_table() {
  KernelTable t = ref::ref_table();
  avx512::fill_entries(Isa::kAvx512, t);
  return t;
}

}  // namespace ds
