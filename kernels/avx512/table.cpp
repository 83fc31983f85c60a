// The AVX-512 (F/BW/VL/DQ, VNNI) kernel table: the reference table with the entries this
// ISA accelerates replaced (one file per op in this directory). AVX512_BF16 is optional:
// without it BF16 weights are widened to float (matmul.cpp), and attention over a BF16
// cache multiplies in float as over the other caches.
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx512_table(bool bf16) {
  KernelTable t = ref::ref_table();
  avx512::fill_entries(Isa::kAvx512, t);
  if (bf16) {
    t.flash_attn = avx512::flash_attn_bf16;
    t.mla_attn = avx512::mla_attn_bf16;
    t.indexer_scores = avx512::indexer_scores_bf16;
    t.attn_bf16_dot = true;
  } else {
    t.vec_dot = avx512::vec_dot_without_bf16;
    t.matmul = avx512::matmul_without_bf16;
  }
  return t;
}

}  // namespace ds
