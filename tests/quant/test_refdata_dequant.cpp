// Every tensor of every model in ../shared/refdata dequantizes to finite values, and
// the models exercise the block types the refdata README promises.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace ds {
namespace {

const char* const kModels[] = {
    "tiny-llama-Q4_K_M.gguf", "tiny-qwen2-Q5_K_S.gguf", "tiny-dsv2-Q4_K_M.gguf",
    "tiny-dsv2-legacy-Q4_K_M.gguf", "tiny-dsv3-Q4_K_M.gguf",
};

TEST(RefdataDequant, EveryTensorIsFinite) {
  std::set<std::string> seen_types;
  for (const char* m : kModels) {
    auto f = GgufFile::open(test::shared_path(std::string("refdata/") + m));
    ASSERT_TRUE(f.is_ok()) << f.message();
    ASSERT_FALSE((*f)->tensors().empty()) << m;
    for (const auto& t : (*f)->tensors()) {
      seen_types.insert(ggml_type_name(t.type));
      std::vector<float> row(static_cast<size_t>(t.ne[0]));
      double sum_sq = 0.0;
      for (int64_t r = 0; r < t.n_rows(); ++r) {
        dequantize_row(t.type, t.data + static_cast<size_t>(r) * t.row_bytes(), row.data(), t.ne[0]);
        for (float v : row) {
          ASSERT_TRUE(std::isfinite(v)) << m << " " << t.name << " row " << r;
          sum_sq += static_cast<double>(v) * v;
        }
      }
      EXPECT_GT(sum_sq, 0.0) << m << " " << t.name << " is all zeros";
    }
  }
  for (const char* want : {"F32", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q8_0"}) {
    EXPECT_TRUE(seen_types.count(want)) << "no refdata tensor of type " << want;
  }
}

// blk0.in.f32 is the token embedding of the prompt (refdata README), computed by the
// reference with its own dequantizer: our dequantized token_embd rows must equal it
// bit for bit. This pins the element order of Q4_K and Q5_K (the embedding types).
TEST(RefdataDequant, TokenEmbeddingRowsMatchReferenceExactly) {
  for (const char* m : kModels) {
    const std::string base = std::string("refdata/") + m;
    const std::string stem = base.substr(0, base.size() - 5);  // drop ".gguf"
    auto f = GgufFile::open(test::shared_path(base));
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufTensorInfo* emb = (*f)->tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr) << m;
    const auto meta = nlohmann::json::parse(test::read_file_text(test::shared_path(stem + ".json")));
    const auto tokens = meta.at("tokens").get<std::vector<int64_t>>();
    const auto ref_bytes = test::read_file_bytes(test::shared_path(stem + ".layers/blk0.in.f32"));
    const int64_t n_embd = emb->ne[0];
    ASSERT_EQ(ref_bytes.size(), tokens.size() * static_cast<size_t>(n_embd) * sizeof(float)) << m;
    std::vector<float> row(static_cast<size_t>(n_embd)), ref(static_cast<size_t>(n_embd));
    for (size_t it = 0; it < tokens.size(); ++it) {
      ASSERT_LT(tokens[it], emb->ne[1]);
      dequantize_row(emb->type, emb->data + static_cast<size_t>(tokens[it]) * emb->row_bytes(), row.data(), n_embd);
      std::memcpy(ref.data(), ref_bytes.data() + it * ref.size() * sizeof(float), ref.size() * sizeof(float));
      for (int64_t i = 0; i < n_embd; ++i) {
        ASSERT_EQ(row[i], ref[i]) << m << " (" << ggml_type_name(emb->type) << ") token " << it << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ds
