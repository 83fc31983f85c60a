// The reference kernel table: every entry is the scalar spec in kernels/ref/.
#include "kernels/ref/ref.h"

namespace ds::ref {

KernelTable ref_table() {
  KernelTable t{};
  t.isa = Isa::kRef;
  t.quantize_act = quantize_act;
  t.vec_dot = vec_dot;
  t.matmul = matmul;
  t.rms_norm = rms_norm;
  t.rope = rope;
  t.silu_mul = silu_mul;
  t.softmax = softmax;
  t.flash_attn = flash_attn;
  t.mla_attn = mla_attn;
  t.moe_route = moe_route;
  t.store_kv = store_kv;
  return t;
}

}  // namespace ds::ref
