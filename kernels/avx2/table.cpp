// The AVX2+FMA (+F16C, BMI2) kernel table: the reference table with the entries this ISA
// accelerates replaced (one file per op in this directory).
#include "kernels/avx2/kernels_avx2.h"
#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"

namespace ds {

KernelTable avx2_table() {
  KernelTable t = ref::ref_table();
  t.isa = Isa::kAvx2;
  t.quantize_act = avx2::quantize_act;
  t.vec_dot = avx2::vec_dot;
  t.matmul = avx2::matmul;
  t.store_kv = avx2::store_kv;
  t.rms_norm = avx2::rms_norm;
  t.silu_mul = avx2::silu_mul;
  t.softmax = avx2::softmax;
  t.rope = avx2::rope;
  t.flash_attn = avx2::flash_attn;
  t.mla_attn = avx2::mla_attn;
  return t;
}

}  // namespace ds
