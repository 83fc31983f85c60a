// Hyper-parameters and weight loading: explicit keys of every reference model, load errors
// that name the missing key or the mis-shaped tensor, and the alternative tensor layouts
// (merged ffn_gate_up_exps, tied output head) giving bit-identical logits to the split /
// untied files they were built from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "gguf/gguf_writer.h"
#include "refdata.h"
#include "test_util.h"

namespace ds::test {
namespace {

Result<HParams> hparams_of(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return f.status();
  return load_hparams(**f);
}

TEST(HParams, ReferenceModels) {
  auto llama = hparams_of(ref_path("tiny-llama-Q4_K_M", ".gguf"));
  ASSERT_TRUE(llama.is_ok()) << llama.message();
  EXPECT_EQ(llama->arch, Arch::kLlama);
  EXPECT_EQ(llama->n_layer, 4);
  EXPECT_EQ(llama->n_head, 4);
  EXPECT_EQ(llama->n_head_kv, 2);
  EXPECT_EQ(llama->n_embd_head_k, 64);
  EXPECT_EQ(llama->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(llama->rope_factor, 4.0f);
  EXPECT_EQ(llama->rope_base, 100000.0f);
  EXPECT_FALSE(llama->rope_params(nullptr).neox);
  EXPECT_FLOAT_EQ(llama->rope_params(nullptr).freq_scale, 0.25f);

  auto qwen = hparams_of(ref_path("tiny-qwen2-Q5_K_S", ".gguf"));
  ASSERT_TRUE(qwen.is_ok()) << qwen.message();
  EXPECT_EQ(qwen->arch, Arch::kQwen2);
  EXPECT_TRUE(qwen->rope_params(nullptr).neox);
  EXPECT_EQ(qwen->rope_base, 1e6f);

  auto v3 = hparams_of(ref_path("tiny-dsv3-Q4_K_M", ".gguf"));
  ASSERT_TRUE(v3.is_ok()) << v3.message();
  EXPECT_EQ(v3->arch, Arch::kDeepseek2);
  EXPECT_FALSE(v3->mla_legacy);
  EXPECT_EQ(v3->q_lora, 256);
  EXPECT_EQ(v3->kv_lora, 256);
  EXPECT_EQ(v3->n_nope, 64);
  EXPECT_EQ(v3->n_rot, 32);
  EXPECT_EQ(v3->n_v, 64);
  EXPECT_EQ(v3->n_layer_dense_lead, 1);
  EXPECT_EQ(v3->n_expert, 16);
  EXPECT_EQ(v3->n_expert_used, 4);
  EXPECT_EQ(v3->n_expert_shared, 1);
  EXPECT_EQ(v3->gating, MoeGating::kSigmoid);
  EXPECT_TRUE(v3->expert_weights_norm);
  EXPECT_FLOAT_EQ(v3->expert_weights_scale, 2.5f);
  EXPECT_EQ(v3->rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(v3->n_ctx_orig, 4096);
  // SPEC.md step 4: kq_scale = mscale^2 / sqrt(nope + rope), mscale = 1 + 0.1 ln(40).
  const double mscale = 1.0 + 0.1 * std::log(40.0);
  EXPECT_NEAR(v3->kq_scale(), mscale * mscale / std::sqrt(96.0), 1e-6);
  const RopeParams rp = v3->rope_params(nullptr);
  EXPECT_EQ(rp.ext_factor, 1.0f);
  EXPECT_EQ(rp.attn_factor, 1.0f);

  auto v2 = hparams_of(ref_path("tiny-dsv2-Q4_K_M", ".gguf"));
  ASSERT_TRUE(v2.is_ok()) << v2.message();
  EXPECT_EQ(v2->q_lora, 0);
  EXPECT_EQ(v2->gating, MoeGating::kSoftmax);
  EXPECT_FALSE(v2->expert_weights_norm);
  EXPECT_EQ(v2->n_expert_shared, 2);
  EXPECT_NEAR(v2->kq_scale(), 1.0 / std::sqrt(96.0), 1e-7);

  auto legacy = hparams_of(ref_path("tiny-dsv2-legacy-Q4_K_M", ".gguf"));
  ASSERT_TRUE(legacy.is_ok()) << legacy.message();
  EXPECT_TRUE(legacy->mla_legacy);
  EXPECT_EQ(legacy->n_nope, 64);
  EXPECT_EQ(legacy->n_v, 64);
  EXPECT_EQ(legacy->n_head_kv, 4);
}

// Copies refdata model `src` to a temporary file, letting `edit` change metadata and the
// tensor list. Tensor data: the source bytes when the size is unchanged, else `fill`.
struct Rewrite {
  std::function<void(GgufWriter&)> meta = nullptr;
  // name -> new shape (empty: drop the tensor)
  std::map<std::string, std::vector<int64_t>> reshape = {};
  // extra tensors appended: name -> (type, shape, bytes)
  struct Extra {
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, Extra>> extra = {};
};

// The rewritten file, deleted (with its directory) when this goes out of scope.
struct TempModel {
  std::string path;
  TempModel(std::string p) : path(std::move(p)) {}  // NOLINT: implicit by design
  TempModel(const TempModel&) = delete;
  ~TempModel() { std::filesystem::remove_all(std::filesystem::path(path).parent_path()); }
  operator const std::string&() const { return path; }  // NOLINT
};

TempModel rewrite(const std::string& model, const Rewrite& rw) {
  auto src = GgufFile::open(ref_path(model, ".gguf"));
  EXPECT_TRUE(src.is_ok());
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) w.set(k, v);
  if (rw.meta) rw.meta(w);
  std::vector<std::pair<const GgufTensorInfo*, size_t>> data;
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (auto it = rw.reshape.find(t.name); it != rw.reshape.end()) {
      if (it->second.empty()) continue;
      ne = it->second;
    }
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne).is_ok()) << t.name;
    data.push_back({&t, w.tensors().back().nbytes});
  }
  for (const auto& [name, e] : rw.extra) EXPECT_TRUE(w.add_tensor(name, e.type, e.ne).is_ok()) << name;
  const std::string path = make_temp_dir("hparams") + "/m.gguf";
  EXPECT_TRUE(w.begin(path).is_ok());
  for (const auto& [t, n] : data) {
    if (n == t->nbytes) {
      EXPECT_TRUE(w.write_data(t->data, n).is_ok());
    } else {
      std::vector<uint8_t> zeros(n);
      EXPECT_TRUE(w.write_data(zeros.data(), n).is_ok());
    }
  }
  for (const auto& [name, e] : rw.extra) EXPECT_TRUE(w.write_data(e.bytes.data(), e.bytes.size()).is_ok());
  EXPECT_TRUE(w.finish().is_ok());
  return path;
}

std::string load_error(const std::string& path) {
  auto m = Model::load(path);
  return m.is_ok() ? std::string("(loaded)") : m.message();
}

TEST(HParams, MissingRequiredKeyIsNamed) {
  for (const char* key : {"deepseek2.attention.kv_lora_rank", "deepseek2.expert_count",
                          "deepseek2.leading_dense_block_count", "deepseek2.attention.layer_norm_rms_epsilon",
                          "deepseek2.expert_weights_scale", "deepseek2.expert_shared_count"}) {
    const TempModel p = rewrite("tiny-dsv3-Q4_K_M", {.meta = [&](GgufWriter& w) { w.remove(key); }});
    EXPECT_NE(load_error(p).find(key), std::string::npos) << load_error(p);
  }
  const TempModel p = rewrite("tiny-llama-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("llama.block_count"); }});
  EXPECT_NE(load_error(p).find("llama.block_count"), std::string::npos) << load_error(p);
  const TempModel q = rewrite("tiny-dsv2-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("deepseek2.attention.value_length_mla"); }});
  EXPECT_NE(load_error(q).find("value_length_mla"), std::string::npos) << load_error(q);
}

TEST(HParams, OutOfRangeValuesAreNamed) {
  // Each value loaded before and served NaN activations (or divided by zero).
  struct Case {
    const char* model;
    const char* key;
    GgufValue value;
    const char* why;
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {"tiny-llama-Q4_K_M", "llama.rope.freq_base", gguf_f32(0.0f), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.rope.freq_base", gguf_f32(inf), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.rope.freq_base", gguf_f32(nan), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.attention.layer_norm_rms_epsilon", gguf_f32(nan), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.attention.layer_norm_rms_epsilon", gguf_f32(-1e-5f), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.attention.layer_norm_rms_epsilon", gguf_f32(0.0f), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.rope.dimension_count", gguf_u32(63), "must be even"},
      {"tiny-llama-Q4_K_M", "llama.attention.head_count", gguf_u32(0), "out of range"},
      {"tiny-llama-Q4_K_M", "llama.rope.scaling.factor", gguf_f32(inf), "out of range"},
      {"tiny-qwen2-Q5_K_S", "qwen2.rope.freq_base", gguf_f32(-10000.0f), "out of range"},
      {"tiny-dsv3-Q4_K_M", "deepseek2.expert_weights_scale", gguf_f32(nan), "out of range"},
      {"tiny-dsv3-Q4_K_M", "deepseek2.rope.scaling.yarn_log_multiplier", gguf_f32(-0.1f), "out of range"},
      {"tiny-dsv3-Q4_K_M", "deepseek2.rope.dimension_count", gguf_u32(31), "must be even"},
      {"tiny-dsv3-Q4_K_M", "deepseek2.attention.head_count", gguf_u32(0), "out of range"},
      {"tiny-dsv3-Q4_K_M", "deepseek2.attention.layer_norm_rms_epsilon", gguf_f32(inf), "out of range"},
  };
  for (const Case& c : cases) {
    const TempModel p = rewrite(c.model, {.meta = [&](GgufWriter& w) { w.set(c.key, c.value); }});
    const std::string e = load_error(p);
    EXPECT_NE(e.find(c.key), std::string::npos) << c.key << ": " << e;
    EXPECT_NE(e.find(c.why), std::string::npos) << c.key << ": " << e;
  }
}

TEST(HParams, WrongShapeOrMissingTensorIsNamed) {
  const TempModel p = rewrite("tiny-llama-Q4_K_M", {.reshape = {{"blk.2.attn_q.weight", {256, 128}}}});
  const std::string e = load_error(p);
  EXPECT_NE(e.find("blk.2.attn_q.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[256, 128]"), std::string::npos) << e;

  const TempModel q = rewrite("tiny-dsv2-Q4_K_M", {.reshape = {{"blk.1.ffn_gate_inp.weight", {}}}});
  EXPECT_NE(load_error(q).find("blk.1.ffn_gate_inp.weight"), std::string::npos) << load_error(q);

  const TempModel r = rewrite("tiny-dsv3-Q4_K_M", {.reshape = {{"blk.0.attn_k_b.weight", {64, 256, 2}}}});
  EXPECT_NE(load_error(r).find("blk.0.attn_k_b.weight"), std::string::npos) << load_error(r);

  const TempModel s = rewrite("tiny-qwen2-Q5_K_S", {.reshape = {{"blk.0.attn_k.bias", {}}}});
  EXPECT_NE(load_error(s).find("blk.0.attn_k.bias"), std::string::npos) << load_error(s);
}

std::vector<float> logits_of(const std::string& path, const std::string& tokens_of = "tiny-dsv2-Q4_K_M") {
  auto m = Model::load(path);
  EXPECT_TRUE(m.is_ok()) << m.message();
  RunnerOptions o;
  o.n_threads = 2;
  o.pin_threads = false;
  o.kv_type = GgmlType::F32;
  o.n_kv_blocks = 8;
  o.max_batch_tokens = 64;
  o.max_seq_tokens = 64;
  auto r = Runner::create(std::move(*m), o);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return eval_chunked(**r, ref_tokens(tokens_of), 0);
}

TEST(Weights, MergedGateUpExpertsEqualSplit) {
  // ffn_gate_up_exps [E, 2*Fe, X]: per expert, the gate rows then the up rows.
  const std::string M = "tiny-dsv2-Q4_K_M";
  auto src = GgufFile::open(ref_path(M, ".gguf"));
  ASSERT_TRUE(src.is_ok());
  Rewrite rw;
  for (int il = 1; il < 3; ++il) {
    const std::string g = "blk." + std::to_string(il) + ".ffn_gate_exps.weight";
    const std::string u = "blk." + std::to_string(il) + ".ffn_up_exps.weight";
    const GgufTensorInfo* tg = (*src)->tensor(g);
    const GgufTensorInfo* tu = (*src)->tensor(u);
    ASSERT_TRUE(tg && tu && tg->type == tu->type);
    const size_t per = tg->nbytes / static_cast<size_t>(tg->ne[2]);
    Rewrite::Extra e{tg->type, {tg->ne[0], 2 * tg->ne[1], tg->ne[2]}, {}};
    for (int64_t x = 0; x < tg->ne[2]; ++x) {
      e.bytes.insert(e.bytes.end(), tg->data + x * per, tg->data + (x + 1) * per);
      e.bytes.insert(e.bytes.end(), tu->data + x * per, tu->data + (x + 1) * per);
    }
    rw.reshape[g] = {};
    rw.reshape[u] = {};
    rw.extra.push_back({"blk." + std::to_string(il) + ".ffn_gate_up_exps.weight", std::move(e)});
  }
  const TempModel mf = rewrite(M, rw);
  const auto merged = logits_of(mf);
  const auto split = logits_of(ref_path(M, ".gguf"));
  ASSERT_EQ(merged.size(), split.size());
  EXPECT_EQ(std::memcmp(merged.data(), split.data(), split.size() * 4), 0);
}

TEST(Weights, TiedOutputUsesTokenEmbedding) {
  // A file whose output.weight is a copy of token_embd computes what the tied file does.
  const std::string M = "tiny-dsv2-Q4_K_M";
  auto src = GgufFile::open(ref_path(M, ".gguf"));
  ASSERT_TRUE(src.is_ok());
  const GgufTensorInfo* te = (*src)->tensor("token_embd.weight");
  ASSERT_TRUE(te);
  Rewrite tied;
  tied.reshape["output.weight"] = {};
  Rewrite copy = tied;
  copy.extra.push_back({"output.weight", {te->type, {te->ne[0], te->ne[1]}, std::vector<uint8_t>(te->data, te->data + te->nbytes)}});
  const TempModel tf = rewrite(M, tied), cf = rewrite(M, copy);
  const auto a = logits_of(tf);
  const auto b = logits_of(cf);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST(Weights, RopeFreqsDivideTheFrequencies) {
  // Llama-3.1 style rope_freqs [n_rot/2]: all ones is the identity, twos change the angles.
  const std::string M = "tiny-llama-Q4_K_M";
  auto with = [&](float v) {
    Rewrite rw;
    const std::vector<float> f(32, v);
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    rw.extra.push_back({"rope_freqs.weight", {GgmlType::F32, {32}, bytes}});
    const TempModel t = rewrite(M, rw);
    return logits_of(t, M);
  };
  const auto plain = logits_of(ref_path(M, ".gguf"), M);
  const auto ones = with(1.0f);
  const auto twos = with(2.0f);
  EXPECT_EQ(std::memcmp(plain.data(), ones.data(), plain.size() * 4), 0);
  EXPECT_NE(std::memcmp(plain.data(), twos.data(), plain.size() * 4), 0);
}

TEST(HParams, ExpertGroupsLimitTheChoice) {
  // tiny-dsv3 (16 experts, top-4) with expert_group_count 4: all 4 groups allowed is no
  // limit at all; one group allowed keeps every token's experts inside one group of 4.
  const std::string M = "tiny-dsv3-Q4_K_M";
  auto run = [&](int used, std::vector<int32_t>* ids) {
    const TempModel p = rewrite(M, {.meta = [&](GgufWriter& w) {
      w.set("deepseek2.expert_group_count", gguf_u32(4));
      w.set("deepseek2.expert_group_used_count", gguf_u32(static_cast<uint32_t>(used)));
    }});
    auto m = Model::load(p);
    EXPECT_TRUE(m.is_ok()) << m.message();
    EXPECT_EQ((*m)->hp().n_group, 4);
    EXPECT_EQ((*m)->hp().n_group_used, used);
    RunnerOptions o;
    o.n_threads = 2;
    o.pin_threads = false;
    o.kv_type = GgmlType::F32;
    o.n_kv_blocks = 8;
    o.max_batch_tokens = 64;
    o.max_seq_tokens = 64;
    auto r = Runner::create(std::move(*m), o);
    EXPECT_TRUE(r.is_ok());
    const auto toks = ref_tokens(M);
    EXPECT_TRUE((*r)->kv().reserve(0, 63).is_ok());
    std::vector<float> logits(static_cast<size_t>(63 * (*r)->model().hp().n_vocab));
    const TraceFn trace = [&](const char* name, int il, const void* data, int64_t rows, int64_t cols) {
      if (std::string(name) == "experts" && il == 1) ids->assign(static_cast<const int32_t*>(data), static_cast<const int32_t*>(data) + rows * cols);
    };
    const SeqChunk c{.seq_id = 0, .tokens = toks, .pos0 = 0, .all_logits = true};
    EXPECT_TRUE((*r)->step(std::span(&c, 1), logits.data(), &trace).is_ok());
    return logits;
  };
  std::vector<int32_t> ids_all, ids_one;
  const auto all = run(4, &ids_all);
  const auto plain = logits_of(ref_path(M, ".gguf"), M);
  EXPECT_EQ(std::memcmp(all.data(), plain.data(), all.size() * 4), 0);
  const auto one = run(1, &ids_one);
  ASSERT_EQ(ids_one.size(), 63u * 4u);
  int spread = 0;
  for (size_t t = 0; t < 63; ++t) {
    for (int k = 1; k < 4; ++k) spread += ids_one[t * 4 + k] / 4 != ids_one[t * 4] / 4;
  }
  EXPECT_EQ(spread, 0);
  EXPECT_NE(ids_all, ids_one);
}

}  // namespace
}  // namespace ds::test
