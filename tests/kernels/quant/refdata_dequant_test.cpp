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
#include "kernels/quant/fp16.h"
#include "test_util.h"

namespace ds {
namespace {

const char* const kModels[] = {
    "tiny-llama-Q4_K_M.gguf",       "tiny-qwen2-Q5_K_S.gguf", "tiny-dsv2-Q4_K_M.gguf",
    "tiny-dsv2-legacy-Q4_K_M.gguf", "tiny-dsv3-Q4_K_M.gguf",  "tiny-dsv3-IQ-MIX.gguf",
};

TEST(RefdataDequant, EveryTensorIsFinite) {
  std::set<std::string> seen_types;
  for (const char* m : kModels) {
    // check_data: every block passes the reference validator's rules (finite scales,
    // no MXFP4 exponent byte 255).
    auto f = GgufFile::open(test::shared_path(std::string("refdata/") + m), {.check_data = true});
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
  for (const char* want : {"F32", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q8_0", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS",
                           "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS", "MXFP4"}) {
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

// The Q6_K output head, checked against the reference logits: logits = W_out .
// (RMSNorm(blk{L-1}.out) * output_norm). Our float product with the dequantized head must
// match the reference (which quantized the activations to Q8_K) to NMSE ~5e-5; a wrong
// Q6_K element order gives NMSE ~1 or worse. Bound: kMaxNmse.
TEST(RefdataDequant, Q6KOutputHeadReproducesReferenceLogits) {
  constexpr double kMaxNmse = 5e-4;  // measured 5-6e-5: the reference's int8 activations
  for (const char* m : {"tiny-llama-Q4_K_M", "tiny-qwen2-Q5_K_S", "tiny-dsv3-Q4_K_M"}) {
    const std::string stem = std::string("refdata/") + m;
    auto f = GgufFile::open(test::shared_path(stem + ".gguf"));
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufFile& g = **f;
    const GgufTensorInfo* out = g.tensor("output.weight");
    const GgufTensorInfo* norm = g.tensor("output_norm.weight");
    ASSERT_TRUE(out && norm);
    ASSERT_EQ(out->type, GgmlType::Q6_K);
    const int64_t n_embd = out->ne[0], n_vocab = out->ne[1];
    const double eps = g.get_float_or(g.architecture() + ".attention.layer_norm_rms_epsilon", 1e-6).value();
    const int64_t n_layer = g.get_int_or(g.architecture() + ".block_count", 0).value();
    std::vector<float> w(static_cast<size_t>(n_embd * n_vocab)), nw(static_cast<size_t>(n_embd));
    for (int64_t r = 0; r < n_vocab; ++r)
      dequantize_row(out->type, out->data + r * out->row_bytes(), &w[r * n_embd], n_embd);
    dequantize_row(norm->type, norm->data, nw.data(), n_embd);
    const auto hid =
        test::read_file_bytes(test::shared_path(stem + ".layers/blk" + std::to_string(n_layer - 1) + ".out.f32"));
    const auto ref = test::read_file_bytes(test::shared_path(stem + ".logits.f16"));
    const size_t n_tok = hid.size() / (sizeof(float) * static_cast<size_t>(n_embd));
    ASSERT_EQ(ref.size(), n_tok * static_cast<size_t>(n_vocab) * 2);
    double se = 0.0, ss = 0.0;
    for (size_t it = 0; it < n_tok; it += 8) {
      std::vector<float> x(static_cast<size_t>(n_embd));
      std::memcpy(x.data(), hid.data() + it * x.size() * sizeof(float), x.size() * sizeof(float));
      double sum_sq = 0.0;
      for (float v : x) sum_sq += static_cast<double>(v) * v;
      const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(n_embd) + eps);
      for (int64_t i = 0; i < n_embd; ++i) x[i] = static_cast<float>(x[i] * scale) * nw[i];
      for (int64_t v = 0; v < n_vocab; ++v) {
        double dot = 0.0;
        for (int64_t i = 0; i < n_embd; ++i) dot += static_cast<double>(w[v * n_embd + i]) * x[i];
        uint16_t h;
        std::memcpy(&h, ref.data() + (it * static_cast<size_t>(n_vocab) + static_cast<size_t>(v)) * 2, 2);
        const double r = fp16_to_f32(h);
        se += (dot - r) * (dot - r);
        ss += r * r;
      }
    }
    const double nmse = se / ss;
    EXPECT_LT(nmse, kMaxNmse) << m;
    std::printf("%s: output head NMSE vs reference logits %.3g\n", m, nmse);
  }
}

}  // namespace
}  // namespace ds
