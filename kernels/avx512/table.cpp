// The AVX-512 (F/BW/VL/DQ, VNNI, BF16) kernel table: the reference table with the entries
// this ISA accelerates replaced (one file per op in this directory).
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx512_table() {
  KernelTable t = ref::ref_table();
  t.isa = Isa::kAvx512;
  t.quantize_act = avx512::quantize_act;
  t.vec_dot = avx512::vec_dot;
  t.matmul = avx512::matmul;
  t.store_kv = avx512::store_kv;
  t.rms_norm = avx512::rms_norm;
  t.silu_mul = avx512::silu_mul;
  t.softmax = avx512::softmax;
  t.rope = avx512::rope;
  t.flash_attn = avx512::flash_attn;
  t.mla_attn = avx512::mla_attn;
  return t;
}

}  // namespace ds
