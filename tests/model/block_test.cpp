// Teacher-forced per-block comparison against the reference's layer dumps
// (../shared/refdata/README.md, "How to compare" 1): each sub-layer is fed the reference's
// input for that block and must reproduce the reference's residual delta, on every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <set>

#include "refdata.h"

namespace ds::test {
namespace {

struct Case {
  RefModel model;
  const KernelTable* kt;
};
// Readable test parameters in gtest's messages.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model.name << " " << isa_name(c.kt->isa);
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model.name + "_" + isa_name(info.param.kt->isa);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const RefModel& m : ref_models())
    for (const KernelTable* kt : available_kernels()) out.push_back({m, kt});
  return out;
}

class BlockTest : public testing::TestWithParam<Case> {};

std::vector<float> diff(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

TEST_P(BlockTest, TeacherForcedSubLayersMatchReference) {
  const Case& c = GetParam();
  const std::string& M = c.model.name;
  auto r = make_runner(M, c.kt, GgmlType::F32);
  ASSERT_TRUE(r);
  const HParams& hp = r->model().hp();
  const int64_t n = static_cast<int64_t>(ref_tokens(M).size()), E = hp.n_embd;
  ASSERT_TRUE(r->kv().reserve(0, static_cast<int32_t>(n)).is_ok());

  std::vector<int32_t> ids, topk;
  std::vector<float> topk_gap;
  const TraceFn trace = [&](const char* name, int, const void* data, int64_t rows, int64_t cols) {
    const std::string nm(name);
    const auto* p = static_cast<const int32_t*>(data);
    if (nm == "experts") ids.assign(p, p + rows * cols);
    if (nm == "topk") topk.assign(p, p + rows * cols);
    if (nm == "topk_gap") topk_gap.assign(static_cast<const float*>(data), static_cast<const float*>(data) + rows);
  };
  int64_t expert_pairs = 0, expert_same = 0;
  int64_t topk_rows = 0, topk_same = 0, topk_ties = 0, topk_sparse = 0;
  std::vector<float> out(static_cast<size_t>(n * E));
  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string b = "blk" + std::to_string(il);
    const auto in = ref_layer(M, b + ".in.f32");
    const auto mid = ref_layer(M, b + ".mid.f32");
    const auto fin = ref_layer(M, b + ".out.f32");
    ASSERT_EQ(in.size(), out.size());

    topk.clear();
    ASSERT_TRUE(r->sublayer(il, SubLayer::kAttention, 0, 0, in.data(), n, out.data(), &trace).is_ok());
    const double tol_attn = c.model.legacy ? kLegacyAttnNmse : kBlockNmse;
    const double e_attn = nmse(out.data(), diff(mid, in).data(), out.size());
    EXPECT_LE(e_attn, tol_attn) << M << " block " << il << " attention";

    if (c.model.indexer) {
      // Indexer selections as sets: the reference's row t lists top_k positions, those
      // beyond t being masked filler.
      const auto ref = ref_topk(M, il);
      const int k = hp.idx_top_k;
      ASSERT_EQ(ref.size(), static_cast<size_t>(n * k)) << "block " << il;
      ASSERT_EQ(topk.size(), ref.size()) << "block " << il << ": indexer selection not traced";
      ASSERT_EQ(topk_gap.size(), static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) {
        std::set<int32_t> a, e;
        for (int i = 0; i < k; ++i) {
          if (topk[t * k + i] >= 0) a.insert(topk[t * k + i]);
          if (ref[t * k + i] <= t) e.insert(ref[t * k + i]);
        }
        if (t < k) {  // a dense row: every earlier position on both sides
          EXPECT_EQ(a, e) << "block " << il << " row " << t;
          continue;
        }
        ++topk_sparse;
        if (a != e && topk_gap[t] < kIndexerNearTie) {
          ++topk_ties;  // a near-tie: either set is a correct float result
          continue;
        }
        ++topk_rows;
        topk_same += a == e;
        if (a != e)
          std::printf("  blk%d row %lld: indexer set differs (gap %.3g)\n", il, static_cast<long long>(t), topk_gap[t]);
      }
    }

    ids.clear();
    ASSERT_TRUE(r->sublayer(il, SubLayer::kFfn, 0, 0, mid.data(), n, out.data(), &trace).is_ok());
    const double e_ffn = nmse(out.data(), diff(fin, mid).data(), out.size());
    EXPECT_LE(e_ffn, kBlockNmse) << M << " block " << il << " ffn";
    std::printf("[%s %s] blk%d attn nmse %.3g  ffn nmse %.3g\n", M.c_str(), isa_name(c.kt->isa), il, e_attn, e_ffn);

    if (hp.is_moe_layer(il)) {
      const auto ref = ref_experts(M, il);
      const int K = hp.n_expert_used;
      ASSERT_EQ(ids.size(), ref.size()) << "block " << il << ": experts not traced";
      for (int64_t t = 0; t < n; ++t) {
        const std::set<int32_t> a(ids.begin() + t * K, ids.begin() + (t + 1) * K);
        const std::set<int32_t> e(ref.begin() + t * K, ref.begin() + (t + 1) * K);
        ++expert_pairs;
        expert_same += a == e;
      }
    } else {
      EXPECT_FALSE(c.model.moe && il >= hp.n_layer_dense_lead);
    }
  }
  if (c.model.moe) {
    ASSERT_GT(expert_pairs, 0);
    EXPECT_GE(static_cast<double>(expert_same), kExpertAgreement * static_cast<double>(expert_pairs))
        << expert_same << " of " << expert_pairs << " (token, block) expert sets agree";
    std::printf("[%s %s] expert sets agree on %lld of %lld\n", M.c_str(), isa_name(c.kt->isa),
                static_cast<long long>(expert_same), static_cast<long long>(expert_pairs));
  }
  if (c.model.indexer) {
    ASSERT_GT(topk_sparse, 0);
    EXPECT_GE(static_cast<double>(topk_same), kIndexerAgreement * static_cast<double>(topk_rows))
        << topk_same << " of " << topk_rows << " (token, block) indexer sets agree";
    EXPECT_LE(topk_ties, topk_sparse / 20) << "near-ties excluded from the indexer comparison";
    std::printf("[%s %s] indexer sets agree on %lld of %lld (%lld near-ties excluded, %lld sparse rows)\n", M.c_str(),
                isa_name(c.kt->isa), static_cast<long long>(topk_same), static_cast<long long>(topk_rows),
                static_cast<long long>(topk_ties), static_cast<long long>(topk_sparse));
  }
}

INSTANTIATE_TEST_SUITE_P(Refdata, BlockTest, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace ds::test
