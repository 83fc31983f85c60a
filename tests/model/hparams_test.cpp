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

  // ../shared/refdata/README.md: tiny-ds1 is MHA 4 x 64, 1 dense lead block, 16 experts
  // top-4 softmax without normalization, 2 shared; tiny-qwen3 GQA 4/2 x 64, base 1e6.
  auto ds1 = hparams_of(ref_path("tiny-ds1-Q4_K_M", ".gguf"));
  ASSERT_TRUE(ds1.is_ok()) << ds1.message();
  EXPECT_EQ(ds1->arch, Arch::kDeepseek);
  EXPECT_EQ(ds1->n_head_kv, 4);
  EXPECT_EQ(ds1->n_rot, 64);
  EXPECT_EQ(ds1->n_layer_dense_lead, 1);
  EXPECT_FALSE(ds1->is_moe_layer(0));
  EXPECT_TRUE(ds1->is_moe_layer(1));
  EXPECT_EQ(ds1->n_expert, 16);
  EXPECT_EQ(ds1->n_expert_used, 4);
  EXPECT_EQ(ds1->n_expert_shared, 2);
  EXPECT_EQ(ds1->n_ff_exp, 256);
  EXPECT_EQ(ds1->gating, MoeGating::kSoftmax);
  EXPECT_FALSE(ds1->expert_weights_norm);
  EXPECT_EQ(ds1->n_group, 1);
  EXPECT_FALSE(ds1->rope_params(nullptr).neox);
  EXPECT_NEAR(ds1->kq_scale(), 1.0 / 8.0, 1e-7);

  auto qwen3 = hparams_of(ref_path("tiny-qwen3-Q4_K_M", ".gguf"));
  ASSERT_TRUE(qwen3.is_ok()) << qwen3.message();
  EXPECT_EQ(qwen3->arch, Arch::kQwen3);
  EXPECT_EQ(qwen3->n_head_kv, 2);
  EXPECT_EQ(qwen3->n_embd_head_k, 64);
  EXPECT_TRUE(qwen3->rope_params(nullptr).neox);
  EXPECT_EQ(qwen3->rope_base, 1e6f);
  EXPECT_FALSE(qwen3->is_moe_layer(1));
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
  const TempModel q =
      rewrite("tiny-dsv2-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("deepseek2.attention.value_length_mla"); }});
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

TEST(HParams, DeepseekV1AndQwen3LoadErrorsAreNamed) {
  for (const char* key :
       {"deepseek.expert_feed_forward_length", "deepseek.expert_shared_count", "deepseek.expert_count",
        "deepseek.leading_dense_block_count", "deepseek.attention.layer_norm_rms_epsilon"}) {
    const TempModel p = rewrite("tiny-ds1-Q4_K_M", {.meta = [&](GgufWriter& w) { w.remove(key); }});
    EXPECT_NE(load_error(p).find(key), std::string::npos) << load_error(p);
  }
  // Optional, 1 when absent (SPEC-deepseek32-deepseek4.md section 4).
  const TempModel scale =
      rewrite("tiny-ds1-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("deepseek.expert_weights_scale"); }});
  EXPECT_EQ(load_error(scale), "(loaded)");
  const TempModel rot =
      rewrite("tiny-ds1-Q4_K_M", {.meta = [](GgufWriter& w) { w.set("deepseek.rope.dimension_count", gguf_u32(32)); }});
  EXPECT_NE(load_error(rot).find("deepseek.rope.dimension_count"), std::string::npos) << load_error(rot);
  const TempModel shexp = rewrite("tiny-ds1-Q4_K_M", {.reshape = {{"blk.2.ffn_up_shexp.weight", {}}}});
  EXPECT_NE(load_error(shexp).find("blk.2.ffn_up_shexp.weight"), std::string::npos) << load_error(shexp);

  const TempModel qn = rewrite("tiny-qwen3-Q4_K_M", {.reshape = {{"blk.1.attn_k_norm.weight", {}}}});
  EXPECT_NE(load_error(qn).find("blk.1.attn_k_norm.weight"), std::string::npos) << load_error(qn);
  const TempModel kl =
      rewrite("tiny-qwen3-Q4_K_M", {.meta = [](GgufWriter& w) { w.set("qwen3.attention.key_length", gguf_u32(32)); }});
  EXPECT_NE(load_error(kl).find("qwen3.attention.key_length"), std::string::npos) << load_error(kl);
  const TempModel eps =
      rewrite("tiny-qwen3-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("qwen3.attention.layer_norm_rms_epsilon"); }});
  EXPECT_NE(load_error(eps).find("qwen3.attention.layer_norm_rms_epsilon"), std::string::npos) << load_error(eps);
}

// [QWEN3_YARN_MSCALE] R1-0528-Qwen3-8B's rope scaling (YaRN x4 from 32768, attn_factor
// 0.8782488562869419): the cos/sin magnitude is attn_factor * (1 + 0.1 ln 4) = 1.0000; without
// the attn_factor key it is 1 + 0.1 ln 4 = 1.1386294.
TEST(HParams, Qwen3YarnMagnitude) {
  for (const bool with_attn_factor : {true, false}) {
    const TempModel p = rewrite("tiny-qwen3-Q4_K_M", {.meta = [&](GgufWriter& w) {
                                  w.set("qwen3.rope.scaling.type", gguf_str("yarn"));
                                  w.set("qwen3.rope.scaling.factor", gguf_f32(4.0f));
                                  w.set("qwen3.rope.scaling.original_context_length", gguf_u32(32768));
                                  if (with_attn_factor)
                                    w.set("qwen3.rope.scaling.attn_factor", gguf_f32(0.8782488562869419f));
                                }});
    auto hp = hparams_of(p);
    ASSERT_TRUE(hp.is_ok()) << hp.message();
    const RopeParams rp = hp->rope_params(nullptr);
    EXPECT_TRUE(rp.neox);
    EXPECT_EQ(rp.ext_factor, 1.0f);
    EXPECT_EQ(rp.freq_scale, 0.25f);
    EXPECT_EQ(rp.n_ctx_orig, 32768);
    EXPECT_NEAR(rp.attn_factor, with_attn_factor ? 1.0 : 1.1386294, 1e-6);
    EXPECT_NEAR(hp->kq_scale(), 0.125, 1e-7);
  }
}

std::vector<float> logits_of(const std::string& path, const std::string& tokens_of = "tiny-dsv2-Q4_K_M",
                             const TraceFn* trace = nullptr) {
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
  return eval_chunked(**r, ref_tokens(tokens_of), 0, 0, trace);
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

TEST(Weights, FusedQkvEqualsSplit) {
  // attn_qkv [E, q + k + v rows] in the blocks whose q, k and v share a type (tiny-qwen3:
  // blocks 0 and 1); the q/k norms still apply.
  const std::string M = "tiny-qwen3-Q4_K_M";
  auto src = GgufFile::open(ref_path(M, ".gguf"));
  ASSERT_TRUE(src.is_ok());
  Rewrite rw;
  for (int il = 0; il < 2; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const GgufTensorInfo* tq = (*src)->tensor(b + "attn_q.weight");
    const GgufTensorInfo* tk = (*src)->tensor(b + "attn_k.weight");
    const GgufTensorInfo* tv = (*src)->tensor(b + "attn_v.weight");
    ASSERT_TRUE(tq && tk && tv && tq->type == tk->type && tk->type == tv->type);
    Rewrite::Extra e{tq->type, {tq->ne[0], tq->ne[1] + tk->ne[1] + tv->ne[1]}, {}};
    for (const GgufTensorInfo* t : {tq, tk, tv}) {
      e.bytes.insert(e.bytes.end(), t->data, t->data + t->nbytes);
      rw.reshape[t->name] = {};
    }
    rw.extra.push_back({b + "attn_qkv.weight", std::move(e)});
  }
  const TempModel mf = rewrite(M, rw);
  const auto fused = logits_of(mf, M);
  const auto split = logits_of(ref_path(M, ".gguf"), M);
  ASSERT_EQ(fused.size(), split.size());
  EXPECT_EQ(std::memcmp(fused.data(), split.data(), split.size() * 4), 0);
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
  copy.extra.push_back(
      {"output.weight", {te->type, {te->ne[0], te->ne[1]}, std::vector<uint8_t>(te->data, te->data + te->nbytes)}});
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
    auto hp = hparams_of(p);
    EXPECT_TRUE(hp.is_ok()) << hp.message();
    EXPECT_EQ(hp->n_group, 4);
    EXPECT_EQ(hp->n_group_used, used);
    const TraceFn trace = [&](const char* name, int il, const void* data, int64_t rows, int64_t cols) {
      if (std::string(name) == "experts" && il == 1)
        ids->assign(static_cast<const int32_t*>(data), static_cast<const int32_t*>(data) + rows * cols);
    };
    return logits_of(p, M, &trace);
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

// deepseek32 (SPEC-deepseek32-deepseek4.md 2.1): every key of the tiny V3.2 file, the trunk
// without the stored MTP block, and the required keys named when missing.
TEST(HParams, Deepseek32Keys) {
  auto v32 = hparams_of(ref_path("tiny-dsv32-Q4_K_M", ".gguf"));
  ASSERT_TRUE(v32.is_ok()) << v32.message();
  EXPECT_EQ(v32->arch, Arch::kDeepseek32);
  EXPECT_EQ(v32->n_layer, 4);  // block_count 5 = 4 trunk blocks + 1 MTP block
  EXPECT_EQ(v32->n_nextn, 1);
  EXPECT_EQ(v32->n_idx_head, 64);
  EXPECT_EQ(v32->n_idx_dim, 64);
  EXPECT_EQ(v32->idx_top_k, 16);
  EXPECT_EQ(v32->q_lora, 256);
  EXPECT_EQ(v32->kv_lora, 256);
  EXPECT_EQ(v32->n_nope, 64);
  EXPECT_EQ(v32->n_rot, 32);
  EXPECT_EQ(v32->n_v, 64);
  EXPECT_EQ(v32->n_layer_dense_lead, 1);
  EXPECT_EQ(v32->n_expert, 32);
  EXPECT_EQ(v32->n_expert_used, 8);
  EXPECT_EQ(v32->n_group, 8);
  EXPECT_EQ(v32->n_group_used, 4);
  EXPECT_EQ(v32->gating, MoeGating::kSigmoid);
  EXPECT_TRUE(v32->expert_weights_norm);
  EXPECT_FLOAT_EQ(v32->expert_weights_scale, 2.5f);
  EXPECT_TRUE(v32->is_moe_layer(1));
  EXPECT_FALSE(v32->is_moe_layer(0));
  const double mscale = 1.0 + 0.1 * std::log(40.0);
  EXPECT_NEAR(v32->kq_scale(), mscale * mscale / std::sqrt(96.0), 1e-6);
  EXPECT_FALSE(v32->rope_params(nullptr).neox);  // the MLA rope; the indexer's is NEOX

  auto m = Model::load(ref_path("tiny-dsv32-Q4_K_M", ".gguf"));
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_EQ((*m)->weights().layers.size(), 4u);
  EXPECT_TRUE((*m)->weights().layers[3].idx_wq_b);
}

TEST(HParams, Deepseek32MissingKeysAndMtpBlock) {
  for (const char* key : {"deepseek32.attention.indexer.head_count", "deepseek32.attention.indexer.key_length",
                          "deepseek32.attention.indexer.top_k", "deepseek32.attention.q_lora_rank",
                          "deepseek32.expert_gating_func", "deepseek32.attention.key_length_mla"}) {
    const TempModel p = rewrite("tiny-dsv32-Q4_K_M", {.meta = [&](GgufWriter& w) { w.remove(key); }});
    EXPECT_NE(load_error(p).find(key), std::string::npos) << load_error(p);
  }
  const TempModel n = rewrite("tiny-dsv32-Q4_K_M",
                              {.meta = [](GgufWriter& w) { w.set("deepseek32.nextn_predict_layers", gguf_u32(5)); }});
  EXPECT_NE(load_error(n).find("deepseek32.nextn_predict_layers"), std::string::npos) << load_error(n);
  // The forward never needs the MTP block's tensors: a file without them loads.
  auto src = GgufFile::open(ref_path("tiny-dsv32-Q4_K_M", ".gguf"));
  ASSERT_TRUE(src.is_ok());
  Rewrite no_mtp;
  for (const GgufTensorInfo& t : (*src)->tensors())
    if (t.name.rfind("blk.4.", 0) == 0) no_mtp.reshape[t.name] = {};
  ASSERT_FALSE(no_mtp.reshape.empty());
  const TempModel q = rewrite("tiny-dsv32-Q4_K_M", no_mtp);
  EXPECT_EQ(load_error(q), "(loaded)");
  // A trunk block's indexer tensor is required and named.
  const TempModel r = rewrite("tiny-dsv32-Q4_K_M", {.reshape = {{"blk.2.indexer.k_norm.bias", {}}}});
  EXPECT_NE(load_error(r).find("blk.2.indexer.k_norm.bias"), std::string::npos) << load_error(r);
  // expert_weights_scale is optional for deepseek32 (absent: no scaling).
  const TempModel s =
      rewrite("tiny-dsv32-Q4_K_M", {.meta = [](GgufWriter& w) { w.remove("deepseek32.expert_weights_scale"); }});
  auto hs = hparams_of(s);
  ASSERT_TRUE(hs.is_ok()) << hs.message();
  EXPECT_EQ(hs->expert_weights_scale, 1.0f);
}

}  // namespace
}  // namespace ds::test

namespace ds::test {
namespace {

const char* const kDsv4 = "tiny-dsv4-MXFP4_MOE";

TEST(HParams, Deepseek4Keys) {
  auto hp = hparams_of(ref_path(kDsv4, ".gguf"));
  ASSERT_TRUE(hp.is_ok()) << hp.message();
  EXPECT_EQ(hp->arch, Arch::kDeepseek4);
  EXPECT_EQ(hp->n_layer, 4);  // block_count 5 = 4 trunk blocks + the stored MTP block
  EXPECT_EQ(hp->n_nextn, 1);
  EXPECT_EQ(hp->compress_ratio, (std::vector<int>{0, 4, 128, 4}));
  EXPECT_EQ(hp->swiglu_clamp_exp, (std::vector<float>{1.5f, 2.0f, 1.5f, 2.0f}));
  EXPECT_EQ(hp->swiglu_clamp_shexp, (std::vector<float>{2.5f, 1.5f, 3.0f, 2.5f}));
  EXPECT_EQ(hp->n_hc, 4);
  EXPECT_EQ(hp->hc_iters, 20);
  EXPECT_EQ(hp->n_swa, 16);
  EXPECT_EQ(hp->n_out_group, 2);
  EXPECT_EQ(hp->out_lora, 128);
  EXPECT_EQ(hp->n_idx_head, 64);
  EXPECT_EQ(hp->n_idx_dim, 64);
  EXPECT_EQ(hp->idx_top_k, 8);
  EXPECT_EQ(hp->n_hash_layer, 2);
  EXPECT_EQ(hp->n_embd_head_k, 128);
  EXPECT_EQ(hp->n_rot, 32);
  EXPECT_EQ(hp->compress_rope_base, 160000.0f);
  EXPECT_EQ(hp->rope_scaling, RopeScaling::kYarn);
  EXPECT_TRUE(hp->is_moe_layer(0));
}

TEST(HParams, Deepseek4BadFilesAreNamed) {
  for (const char* key :
       {"deepseek4.attention.compress_ratios", "deepseek4.hyper_connection.count", "deepseek4.hash_layer_count",
        "deepseek4.attention.sliding_window", "deepseek4.attention.output_group_count", "deepseek4.swiglu_clamp_exp",
        "deepseek4.attention.compress_rope_freq_base", "deepseek4.expert_gating_func"}) {
    const TempModel p = rewrite(kDsv4, {.meta = [&](GgufWriter& w) { w.remove(key); }});
    EXPECT_NE(load_error(p).find(key), std::string::npos) << load_error(p);
  }
  const TempModel ratio = rewrite(kDsv4, {.meta = [](GgufWriter& w) {
                                    w.set("deepseek4.attention.compress_ratios", gguf_arr_i32({0, 4, 64, 4, 0}));
                                  }});
  EXPECT_NE(load_error(ratio).find("compress_ratios[2]"), std::string::npos) << load_error(ratio);
  const TempModel gating =
      rewrite(kDsv4, {.meta = [](GgufWriter& w) { w.set("deepseek4.expert_gating_func", gguf_u32(2)); }});
  EXPECT_NE(load_error(gating).find("sqrt-softplus"), std::string::npos) << load_error(gating);
  const TempModel sinks = rewrite(kDsv4, {.reshape = {{"blk.2.attn_sinks.weight", {}}}});
  EXPECT_NE(load_error(sinks).find("blk.2.attn_sinks.weight"), std::string::npos) << load_error(sinks);
  const TempModel ape = rewrite(kDsv4, {.reshape = {{"blk.1.indexer_compressor_ape.weight", {}}}});
  EXPECT_NE(load_error(ape).find("blk.1.indexer_compressor_ape.weight"), std::string::npos) << load_error(ape);
  // An expert id outside [0, expert_count) in the hash table.
  std::vector<uint8_t> bad(4 * 32256 * 4, 0);
  bad[4 * 100 + 0] = 16;
  const TempModel ids =
      rewrite(kDsv4, {.reshape = {{"blk.0.ffn_gate_tid2eid.weight", {}}},
                      .extra = {{"blk.0.ffn_gate_tid2eid.weight", {GgmlType::I32, {4, 32256}, bad}}}});
  EXPECT_NE(load_error(ids).find("blk.0.ffn_gate_tid2eid.weight"), std::string::npos) << load_error(ids);
}

}  // namespace
}  // namespace ds::test
