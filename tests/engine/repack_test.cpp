// Runner option repack (docs/repack.md): every refdata model gives bit-identical logits with
// the K-quant weights repacked into 16-row panels and without, for every chunking of the
// prompt (chunk 1: the fused one-row kernels; 3 and 8: the small-batch panel loop; 9 and the
// whole prompt: the panel kernels reading the packed copy), on the best
// kernel table of this CPU (AVX-512 packs; elsewhere the option changes nothing, which is
// what the test then checks).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/quant/repack.h"
#include "refdata.h"

namespace ds::test {
namespace {

TEST(Repack, LogitsBitIdenticalToUnpacked) {
  const KernelTable* kt = &kern();
  for (const RefModel& rm : ref_models()) {
    auto plain = make_runner(rm.name, kt, GgmlType::F16, 1, 2, 128, false);
    auto packed = make_runner(rm.name, kt, GgmlType::F16, 1, 2, 128, true);
    ASSERT_TRUE(plain && packed);
    if (kt->isa == Isa::kAvx512) {
      const Mat& w = packed->model().weights().layers[0].ffn_down.data ? packed->model().weights().layers[0].ffn_down
                                                                        : packed->model().weights().output;
      EXPECT_TRUE(!repack_supported(w.type) || w.n_out < kPanelRows || w.panels) << rm.name << ": nothing was packed";
    }
    const auto toks = ref_tokens(rm.name);
    for (int chunk : {0, 1, 3, 8, 9}) {
      const auto a = eval_chunked(*plain, toks, chunk), b = eval_chunked(*packed, toks, chunk);
      ASSERT_EQ(a.size(), b.size());
      size_t i = 0;
      while (i < a.size() && std::memcmp(&a[i], &b[i], 4) == 0) ++i;
      EXPECT_EQ(i, a.size()) << rm.name << " chunk " << chunk << ": first difference at " << i << ": " << a[i]
                             << " vs " << b[i];
    }
  }
}

}  // namespace
}  // namespace ds::test
