// deepseek4 teacher-forced per-block comparison against tiny-dsv4-MXFP4_MOE's layer dumps
// (../shared/refdata/README.md, "V3.2, V4, ..."): each sub-layer gets the reference's
// 4-stream input for that block and must reproduce the reference's whole sub-layer (the
// state after its hyper-connection post-mix: mid, out), the sub-layer output before the
// mix (attn_out, ffn_out), the expert sets and the CSA indexer's row sets, on every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "refdata.h"
#include "test_util.h"

namespace ds::test {
namespace {

const std::string kModel = "tiny-dsv4-MXFP4_MOE";

std::vector<int32_t> read_i32(const std::string& file) {
  const auto bytes = read_file_bytes(ref_path(kModel, ".layers/" + file));
  std::vector<int32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// Rows whose sets agree: ours and ref [n][k]; ids >= limit(t) (masked filler) are dropped.
template <class Limit>
int64_t same_sets(const std::vector<int32_t>& ours, const std::vector<int32_t>& ref, int64_t n, int k, Limit limit) {
  int64_t same = 0;
  for (int64_t t = 0; t < n; ++t) {
    std::set<int32_t> a, b;
    for (int i = 0; i < k; ++i) {
      const int32_t x = ours[static_cast<size_t>(t * k + i)], y = ref[static_cast<size_t>(t * k + i)];
      if (x >= 0 && x < limit(t)) a.insert(x);
      if (y >= 0 && y < limit(t)) b.insert(y);
    }
    same += a == b;
  }
  return same;
}

class Dsv4BlockTest : public testing::TestWithParam<const KernelTable*> {};

TEST_P(Dsv4BlockTest, TeacherForcedSubLayersMatchReference) {
  const KernelTable* kt = GetParam();
  auto r = make_runner(kModel, kt, GgmlType::F32);
  ASSERT_TRUE(r);
  const HParams& hp = r->model().hp();
  ASSERT_EQ(hp.arch, Arch::kDeepseek4);
  ASSERT_EQ(hp.n_layer, 4) << "the stored MTP block is not a trunk block";
  const std::vector<int32_t> tokens = ref_tokens(kModel);
  const int64_t n = static_cast<int64_t>(tokens.size()), E = hp.n_embd, W = hp.n_hc * E;
  ASSERT_TRUE(r->kv().reserve(0, static_cast<int32_t>(n)).is_ok());

  std::vector<int32_t> ids, topk;
  std::vector<float> sub;
  const TraceFn trace = [&](const char* name, int, const void* data, int64_t rows, int64_t cols) {
    const std::string s(name);
    if (s == "experts" || s == "topk") {
      const auto* p = static_cast<const int32_t*>(data);
      (s == "experts" ? ids : topk).assign(p, p + rows * cols);
    } else if (s == "attn_out" || s == "ffn_out") {
      const auto* p = static_cast<const float*>(data);
      sub.assign(p, p + rows * cols);
    }
  };
  int64_t expert_rows = 0, expert_same = 0, topk_rows = 0, topk_same = 0;
  std::vector<float> out(static_cast<size_t>(n * W));
  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string b = "blk" + std::to_string(il);
    const auto in = ref_layer(kModel, b + ".in.f32");
    const auto mid = ref_layer(kModel, b + ".mid.f32");
    const auto fin = ref_layer(kModel, b + ".out.f32");
    const auto attn_out = ref_layer(kModel, b + ".attn_out.f32");
    const auto ffn_out = ref_layer(kModel, b + ".ffn_out.f32");
    ASSERT_EQ(in.size(), out.size());

    topk.clear();
    sub.clear();
    ASSERT_TRUE(r->sublayer(il, SubLayer::kAttention, 0, 0, in.data(), n, out.data(), &trace, tokens.data()).is_ok());
    ASSERT_EQ(sub.size(), attn_out.size());
    const double e_ao = nmse(sub.data(), attn_out.data(), sub.size());
    const double e_mid = nmse(out.data(), mid.data(), out.size());
    EXPECT_LE(e_ao, kBlockNmse) << "block " << il << " attn_out";
    EXPECT_LE(e_mid, kBlockNmse) << "block " << il << " attention sub-layer (mid)";
    if (hp.compress_ratio[static_cast<size_t>(il)] == 4) {
      const auto ref = read_i32(b + ".topk.i32");
      ASSERT_EQ(topk.size(), ref.size()) << "block " << il << ": indexer rows not traced";
      topk_rows += n;
      topk_same += same_sets(topk, ref, n, hp.idx_top_k, [](int64_t t) { return static_cast<int32_t>((t + 1) / 4); });
    }

    ids.clear();
    sub.clear();
    ASSERT_TRUE(r->sublayer(il, SubLayer::kFfn, 0, 0, mid.data(), n, out.data(), &trace, tokens.data()).is_ok());
    ASSERT_EQ(sub.size(), ffn_out.size());
    const double e_fo = nmse(sub.data(), ffn_out.data(), sub.size());
    const double e_out = nmse(out.data(), fin.data(), out.size());
    EXPECT_LE(e_fo, kBlockNmse) << "block " << il << " ffn_out";
    EXPECT_LE(e_out, kBlockNmse) << "block " << il << " ffn sub-layer (out)";
    const auto ref_ids = ref_experts(kModel, il);
    ASSERT_EQ(ids.size(), ref_ids.size()) << "block " << il << ": experts not traced";
    expert_rows += n;
    expert_same += same_sets(ids, ref_ids, n, hp.n_expert_used, [&](int64_t) { return hp.n_expert; });
    std::printf("[%s %s] blk%d attn_out %.3g mid %.3g ffn_out %.3g out %.3g\n", kModel.c_str(), isa_name(kt->isa), il,
                e_ao, e_mid, e_fo, e_out);
  }
  EXPECT_GE(static_cast<double>(expert_same), kExpertAgreement * static_cast<double>(expert_rows))
      << expert_same << " of " << expert_rows << " (token, block) expert sets agree";
  ASSERT_GT(topk_rows, 0);
  EXPECT_GE(static_cast<double>(topk_same), kExpertAgreement * static_cast<double>(topk_rows))
      << topk_same << " of " << topk_rows << " (token, block) indexer sets agree";
  std::printf("[%s %s] expert sets %lld/%lld, indexer sets %lld/%lld\n", kModel.c_str(), isa_name(kt->isa),
              static_cast<long long>(expert_same), static_cast<long long>(expert_rows),
              static_cast<long long>(topk_same), static_cast<long long>(topk_rows));
}

std::string isa_case(const testing::TestParamInfo<const KernelTable*>& info) {
  return isa_name(info.param->isa);
}
INSTANTIATE_TEST_SUITE_P(Refdata, Dsv4BlockTest, testing::ValuesIn(available_kernels()), isa_case);

}  // namespace
}  // namespace ds::test
