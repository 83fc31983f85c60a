// Dispatch: the tables this CPU offers are consistent, and DS_ISA lowers kern()'s choice.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/kernels.h"

namespace ds::test {
namespace {

TEST(Dispatch, TablesAreConsistent) {
  ASSERT_NE(kernel_table(Isa::kRef), nullptr);
  EXPECT_NE(kernel_table(best_isa()), nullptr);
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    const KernelTable* kt = kernel_table(isa);
    if (static_cast<int>(isa) > static_cast<int>(best_isa())) {
      EXPECT_EQ(kt, nullptr) << isa_name(isa);
      continue;
    }
    ASSERT_NE(kt, nullptr) << isa_name(isa);
    EXPECT_EQ(kt->isa, isa);
    EXPECT_TRUE(kt->quantize_act && kt->vec_dot && kt->matmul && kt->rms_norm && kt->rope && kt->silu_mul &&
                kt->softmax && kt->flash_attn && kt->mla_attn && kt->moe_route && kt->store_kv);
  }
  EXPECT_EQ(vec_dot_type(GgmlType::Q4_K), GgmlType::Q8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::Q5_0), GgmlType::Q8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::Q5_1), GgmlType::Q8_1);
  EXPECT_EQ(vec_dot_type(GgmlType::BF16), GgmlType::BF16);
}

// CPUs with AVX-512 VNNI but without AVX512_BF16 (Ice Lake, Cascade Lake) get the AVX-512
// table with only the BF16 products (weights, and attention over a BF16 cache) swapped; the
// kernel tests run it against the reference.
TEST(Dispatch, TableWithoutBf16SwapsOnlyTheProducts) {
  const KernelTable* full = kernel_table(Isa::kAvx512);
  const KernelTable* no_bf16 = kernel_table_without_bf16();
  ASSERT_EQ(full == nullptr, no_bf16 == nullptr);
  if (!full) GTEST_SKIP() << "no AVX-512 on this CPU";
  EXPECT_EQ(no_bf16->isa, Isa::kAvx512);
  EXPECT_NE(no_bf16->matmul, kernel_table(Isa::kRef)->matmul);
  EXPECT_EQ(no_bf16->quantize_act, full->quantize_act);
  EXPECT_FALSE(no_bf16->attn_bf16_dot);
  EXPECT_EQ(no_bf16->flash_attn != full->flash_attn, full->attn_bf16_dot);
  EXPECT_EQ(no_bf16->matmul != full->matmul, full->attn_bf16_dot);  // both follow CPUID's AVX512_BF16
  EXPECT_EQ(no_bf16->mla_attn != full->mla_attn, full->attn_bf16_dot);
  EXPECT_EQ(no_bf16->store_kv, full->store_kv);
}

// kern() reads DS_ISA once; ctest runs each test in its own process.
TEST(Dispatch, DsIsaLowersTheChoice) {
  setenv("DS_ISA", "ref", 1);
  EXPECT_EQ(kern().isa, Isa::kRef);
  unsetenv("DS_ISA");
}

}  // namespace
}  // namespace ds::test
