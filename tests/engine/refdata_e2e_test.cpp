// End to end, tokens -> logits, against the reference logits (../shared/refdata/README.md,
// "How to compare" 2): one batch, token by token through the KV cache, and chunks of 7,
// with an f32 KV cache under every ISA this CPU runs; f16/bf16/q8_0 caches on the dense
// models.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>

#include "refdata.h"

namespace ds::test {
namespace {

struct Case {
  RefModel model;
  const KernelTable* kt;
  int chunk;  // 0: one batch
  GgmlType kv_type;
};
// Readable test parameters in gtest's messages.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model.name << " " << isa_name(c.kt->isa) << " chunk " << c.chunk << " kv " << ggml_type_name(c.kv_type);
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string n =
      c.model.name + "_" + isa_name(c.kt->isa) + "_chunk" + std::to_string(c.chunk) + "_" + ggml_type_name(c.kv_type);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

std::vector<Case> f32_cases() {
  std::vector<Case> out;
  for (const RefModel& m : ref_models())
    for (const KernelTable* kt : available_kernels())
      for (int chunk : {0, 1, 7}) out.push_back({m, kt, chunk, GgmlType::F32});
  return out;
}

// The README bounds the dense models; the MLA models' latent cache is held to the same
// NMSE bar here (measured on ref: 2.8e-4 .. 5.8e-3).
std::vector<Case> kv_type_cases() {
  std::vector<Case> out;
  for (const RefModel& m : ref_models()) {
    if (!m.kv_types) continue;
    for (const KernelTable* kt : available_kernels())
      for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
        for (int chunk : {0, 7}) out.push_back({m, kt, chunk, t});
  }
  return out;
}

void check(const Case& c, double tol, bool check_argmax, int min_argmax = kMinArgmaxAgree) {
  const std::string& M = c.model.name;
  auto r = make_runner(M, c.kt, c.kv_type);
  ASSERT_TRUE(r);
  const auto tokens = ref_tokens(M);
  const auto ref = ref_logits(M);
  const int64_t V = ref_n_vocab(M), n = static_cast<int64_t>(tokens.size());
  ASSERT_EQ(r->model().hp().n_vocab, V);
  ASSERT_EQ(ref.size(), static_cast<size_t>(n * V));
  const auto ours = eval_chunked(*r, tokens, c.chunk);
  const double e = nmse(ours.data(), ref.data(), ref.size());
  const int agree = argmax_agreement(ours.data(), ref.data(), n, V);
  std::printf("[%s %s chunk %d kv %s] logits nmse %.3g argmax %d/%lld\n", M.c_str(), isa_name(c.kt->isa), c.chunk,
              ggml_type_name(c.kv_type), e, agree, static_cast<long long>(n));
  EXPECT_LE(e, tol);
  if (check_argmax) {
    EXPECT_GE(agree, min_argmax);
  }
}

class EndToEnd : public testing::TestWithParam<Case> {};
TEST_P(EndToEnd, LogitsMatchReference) {
  const Case& c = GetParam();
  if (c.model.indexer) return check(c, kEndToEndNmseDsv32, true, kMinArgmaxAgreeDsv32);
  check(c, c.model.name.find("dsv3") != std::string::npos ? kEndToEndNmseDsv3 : kEndToEndNmse, true);
}
INSTANTIATE_TEST_SUITE_P(F32Kv, EndToEnd, testing::ValuesIn(f32_cases()), case_name);

class KvTypes : public testing::TestWithParam<Case> {};
// The README bounds only the NMSE for these cache types.
TEST_P(KvTypes, LogitsWithinTolerance) {
  const Case& c = GetParam();
  check(c, c.model.indexer ? kEndToEndNmseDsv32 : kKvTypeNmse, false);
}
INSTANTIATE_TEST_SUITE_P(AllModels, KvTypes, testing::ValuesIn(kv_type_cases()), case_name);

}  // namespace
}  // namespace ds::test
