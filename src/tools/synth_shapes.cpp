// Shape tables, overrides and tensor lists for ds-cli synth; see synth_shapes.h.
// Real-dimension shapes use the published configurations of the named models.
#include "tools/synth_shapes.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "util/strings.h"

namespace ds::cli {
namespace {

struct DenseShape {  // llama / qwen2 / qwen3 / deepseek (attention and dense blocks)
  const char* arch;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
  float rope_base, eps;
  const char* rope_scaling;  // nullptr: none
  float rope_factor;
  bool rope_freqs;
};

struct MlaShape {  // deepseek2 / deepseek32, MLA layout
  int64_t n_embd, n_layer, n_head, n_ff, q_lora, kv_lora, nope, rope, v;
  int64_t n_expert, n_used, n_shared, n_ff_exp, n_dense, n_vocab, n_ctx;
  int gating;  // 1 softmax, 2 sigmoid
  bool norm;
  float scale;
  int64_t n_group, n_group_used;  // 0: keys absent
  float yarn_factor;              // 0: no YaRN
  float yarn_log_mul;
  // deepseek32: the lightning indexer (SPEC-deepseek32-deepseek4.md 2.1).
  const char* arch = "deepseek2";
  int64_t idx_head = 0, idx_dim = 0, idx_top_k = 0;
};

struct V4Shape {  // deepseek4 (../shared/SPEC-deepseek32-deepseek4.md 3.1)
  int64_t n_embd, n_layer, n_head, head_dim, rope, q_lora, n_out_group, out_rank, swa;
  int64_t idx_head, idx_dim, idx_top_k, n_expert, n_used, n_shared, n_ff_exp, n_hash, n_vocab, n_ctx;
  float expert_scale;
  int32_t lead_ratio;  // compress ratio of blocks 0 and 1; the rest alternate 4 and 128
};

struct ShapeDef {
  SynthShapeInfo info;
  const DenseShape* dense;
  const MlaShape* mla;
  const V4Shape* v4 = nullptr;
};

// deepseek-coder-like tiny llama (linear RoPE x4, base 1e5) and R1-Distill-Qwen-like qwen2.
constexpr DenseShape kTinyLlama{"llama", 256, 4, 4, 2, 768, 0, 4096, 100000.0f, 1e-6f, "linear", 4.0f, false};
constexpr DenseShape kTinyQwen2{"qwen2", 256, 3, 4, 2, 512, 0, 4096, 1000000.0f, 1e-6f, nullptr, 0.0f, false};
constexpr DenseShape kQwen15B{"qwen2", 1536, 28, 12, 2, 8960, 151936, 131072, 10000.0f, 1e-6f, nullptr, 0.0f, false};
constexpr DenseShape kLlama8B{"llama", 4096, 32, 32, 8, 14336, 128256, 131072, 500000.0f, 1e-5f, nullptr, 0.0f, true};
// DeepSeek-R1-0528-Qwen3-8B (config.json: YaRN x4 from 32768) and DeepSeek-MoE 16B.
constexpr DenseShape kR1Qwen3_8B{"qwen3", 4096,       36,    32,     8,    12288, 151936,
                                 131072,  1000000.0f, 1e-6f, "yarn", 4.0f, false};
constexpr DenseShape kDsMoe16B{"deepseek", 2048,     28,    16,      16,   10944, 102400,
                               4096,       10000.0f, 1e-6f, nullptr, 0.0f, false};

// The MoE keys of a `deepseek` (V1) shape: softmax routing, no normalization (fixed by the
// architecture, so no keys for them).
struct DenseMoe {
  const DenseShape* shape;
  int64_t n_expert, n_used, n_shared, n_ff_exp, n_dense;
  float scale;
};
constexpr DenseMoe kDenseMoes[] = {{&kDsMoe16B, 64, 6, 2, 1408, 1, 1.0f}};

constexpr MlaShape kTinyDsv2{256, 3, 4, 512,  0, 256,   64,   32, 64, 8,     2,      2,
                             256, 1, 0, 4096, 1, false, 1.0f, 0,  0,  40.0f, 0.0707f};
constexpr MlaShape kTinyDsv3{256, 4, 4, 512,  256, 256,  64,   32, 64, 16,    4,   1,
                             256, 1, 0, 4096, 2,   true, 2.5f, 0,  0,  40.0f, 0.1f};
constexpr MlaShape kV2Lite{2048, 27, 16,     10944,  0, 512,   128,  64, 128, 64,    6,      2,
                           1408, 1,  102400, 163840, 1, false, 1.0f, 0,  0,   40.0f, 0.0707f};
constexpr MlaShape kV3{7168, 61, 128,    18432,  1536, 512,  128,  64, 128, 256,   8,   1,
                       2048, 3,  129280, 163840, 2,    true, 2.5f, 8,  4,   40.0f, 0.1f};
// DeepSeek-V3.2(-Exp): the V3 shape plus a 64 x 128 indexer selecting 2048 tokens. The MTP
// block real files store after the trunk is left out (--set nextn_predict_layers=1 adds one,
// counted in block_count as real files do).
constexpr MlaShape kV32{7168,   61,     128, 18432, 1536, 512, 128, 64,    128,  256,          8,  1,   2048, 3,
                        129280, 163840, 2,   true,  2.5f, 8,   4,   40.0f, 0.1f, "deepseek32", 64, 128, 2048};
constexpr MlaShape kMoeBench{2048, 6, 16,     10944,  768, 512,  128,  64, 128, 64,    6,   2,
                             1408, 1, 102400, 163840, 2,   true, 2.5f, 0,  0,   40.0f, 0.1f};

// V4-Flash (SPEC-deepseek32-deepseek4.md section 7): 43 blocks, E 4096, 64 heads x 512,
// window 128, 8 output groups x 1024, indexer 64 x 128 top-512, 256 experts top-6, x1.5.
constexpr V4Shape kV4Flash{4096, 43,  64, 512, 64,   1024, 8,      1024,    128,  64, 128,
                           512,  256, 6,  1,   2048, 3,    129280, 1048576, 1.5f, 0};
// V4 (V4-Pro; its published config.json): 61 blocks, E 7168, 128 heads x 512 (rope 64), q_lora
// 1536, 16 output groups x 1024, window 128, indexer 64 x 128 top-1024, 384 experts of 3072
// top-6, 1 shared, x2.5, 3 hash blocks; compress ratios 128, 128, then 4 and 128 alternating.
constexpr V4Shape kV4Pro{7168, 61,  128, 512, 64,   1536, 16,     1024,    128,  64, 128,
                         1024, 384, 6,   1,   3072, 3,    129280, 1048576, 2.5f, 128};

const ShapeDef kShapes[] = {
    {{"tiny-llama", "llama, 4 layers, embd 256, GQA 4/2, linear RoPE x4 (deepseek-coder style)"}, &kTinyLlama, nullptr},
    {{"tiny-qwen2", "qwen2, 3 layers, embd 256, GQA 4/2, q/k/v biases, RoPE base 1e6"}, &kTinyQwen2, nullptr},
    {{"tiny-dsv2", "deepseek2 V2-Lite style: no q_lora, 8 experts top-2 softmax, 2 shared, YaRN"}, nullptr, &kTinyDsv2},
    {{"tiny-dsv3", "deepseek2 V3 style: q_lora, 16 experts top-4 sigmoid + bias, norm, x2.5, YaRN"},
     nullptr,
     &kTinyDsv3},
    {{"r1-distill-qwen-1.5b", "qwen2, DeepSeek-R1-Distill-Qwen-1.5B dimensions"}, &kQwen15B, nullptr},
    {{"r1-distill-llama-8b", "llama, DeepSeek-R1-Distill-Llama-8B dimensions (rope_freqs)"}, &kLlama8B, nullptr},
    {{"v2-lite", "deepseek2, DeepSeek-V2-Lite dimensions (64 experts of 1408, top-6)"}, nullptr, &kV2Lite},
    {{"v3", "deepseek2, DeepSeek-V3/R1 dimensions (671B; use --layers)"}, nullptr, &kV3},
    {{"v3.2", "deepseek32, DeepSeek-V3.2 dimensions: V3 + lightning indexer 64x128, top-2048 (use --layers)"},
     nullptr,
     &kV32},
    {{"moe-bench", "deepseek2 benchmark MoE: 6 layers, q_lora 768, 64 experts top-6 sigmoid"}, nullptr, &kMoeBench},
    {{"deepseek-moe-16b", "deepseek (V1 MoE), DeepSeek-MoE 16B dimensions (MHA, 64 experts of 1408, top-6, 2 shared)"},
     &kDsMoe16B,
     nullptr},
    {{"r1-0528-qwen3-8b", "qwen3, DeepSeek-R1-0528-Qwen3-8B dimensions (GQA 32/8, q/k norms, YaRN x4)"},
     &kR1Qwen3_8B,
     nullptr},
    {{"v4-flash", "deepseek4, DeepSeek-V4-Flash dimensions (43 layers, 256 experts top-6; use --layers)"},
     nullptr,
     nullptr,
     &kV4Flash},
    {{"v4", "deepseek4, DeepSeek-V4(-Pro) dimensions (61 layers, E 7168, 384 experts top-6; use --layers)"},
     nullptr,
     nullptr,
     &kV4Pro},
};

void put_dense(const DenseShape& s, GgufWriter* w) {
  const std::string a = std::string(s.arch) + ".";
  w->set("general.architecture", gguf_str(s.arch));
  w->set(a + "context_length", gguf_u32(static_cast<uint32_t>(s.n_ctx)));
  w->set(a + "embedding_length", gguf_u32(static_cast<uint32_t>(s.n_embd)));
  w->set(a + "block_count", gguf_u32(static_cast<uint32_t>(s.n_layer)));
  w->set(a + "feed_forward_length", gguf_u32(static_cast<uint32_t>(s.n_ff)));
  w->set(a + "attention.head_count", gguf_u32(static_cast<uint32_t>(s.n_head)));
  w->set(a + "attention.head_count_kv", gguf_u32(static_cast<uint32_t>(s.n_head_kv)));
  w->set(a + "rope.freq_base", gguf_f32(s.rope_base));
  w->set(a + "rope.dimension_count", gguf_u32(static_cast<uint32_t>(s.n_embd / s.n_head)));
  w->set(a + "attention.layer_norm_rms_epsilon", gguf_f32(s.eps));
  if (s.rope_scaling) {
    w->set(a + "rope.scaling.type", gguf_str(s.rope_scaling));
    w->set(a + "rope.scaling.factor", gguf_f32(s.rope_factor));
    if (std::string_view(s.rope_scaling) == "yarn") {  // the context was extended by the factor
      const auto orig = static_cast<int64_t>(static_cast<float>(s.n_ctx) / s.rope_factor);
      w->set(a + "rope.scaling.original_context_length", gguf_u32(static_cast<uint32_t>(orig)));
    }
  }
  if (s.n_vocab) w->set(a + "vocab_size", gguf_u32(static_cast<uint32_t>(s.n_vocab)));
  for (const DenseMoe& m : kDenseMoes) {
    if (m.shape != &s) continue;
    auto u = [&](const char* k, int64_t v) { w->set(a + k, gguf_u32(static_cast<uint32_t>(v))); };
    u("leading_dense_block_count", m.n_dense);
    u("expert_feed_forward_length", m.n_ff_exp);
    u("expert_count", m.n_expert);
    u("expert_used_count", m.n_used);
    u("expert_shared_count", m.n_shared);
    w->set(a + "expert_weights_scale", gguf_f32(m.scale));
  }
}

void put_mla(const MlaShape& s, GgufWriter* w) {
  const std::string a = std::string(s.arch) + ".";
  auto u = [&](const char* k, int64_t v) { w->set(a + k, gguf_u32(static_cast<uint32_t>(v))); };
  w->set("general.architecture", gguf_str(s.arch));
  if (s.idx_head) {
    u("attention.indexer.head_count", s.idx_head);
    u("attention.indexer.key_length", s.idx_dim);
    u("attention.indexer.top_k", s.idx_top_k);
  }
  u("context_length", s.n_ctx);
  u("embedding_length", s.n_embd);
  u("block_count", s.n_layer);
  u("feed_forward_length", s.n_ff);
  u("attention.head_count", s.n_head);
  w->set(a + "attention.layer_norm_rms_epsilon", gguf_f32(1e-6f));
  w->set(a + "rope.freq_base", gguf_f32(10000.0f));
  u("leading_dense_block_count", s.n_dense);
  if (s.q_lora) u("attention.q_lora_rank", s.q_lora);
  u("attention.kv_lora_rank", s.kv_lora);
  u("attention.key_length_mla", s.nope + s.rope);
  u("attention.value_length_mla", s.v);
  u("rope.dimension_count", s.rope);
  u("expert_feed_forward_length", s.n_ff_exp);
  u("expert_count", s.n_expert);
  u("expert_used_count", s.n_used);
  u("expert_shared_count", s.n_shared);
  w->set(a + "expert_weights_scale", gguf_f32(s.scale));
  w->set(a + "expert_weights_norm", gguf_bool(s.norm));
  u("expert_gating_func", s.gating);
  if (s.n_group) {
    u("expert_group_count", s.n_group);
    u("expert_group_used_count", s.n_group_used);
  }
  if (s.yarn_factor > 0.0f) {
    w->set(a + "rope.scaling.type", gguf_str("yarn"));
    w->set(a + "rope.scaling.factor", gguf_f32(s.yarn_factor));
    u("rope.scaling.original_context_length", 4096);
    w->set(a + "rope.scaling.yarn_log_multiplier", gguf_f32(s.yarn_log_mul));
  }
  if (s.n_vocab) u("vocab_size", s.n_vocab);
}

void put_v4(const V4Shape& s, GgufWriter* w) {
  const std::string a = "deepseek4.";
  auto u = [&](const char* k, int64_t v) { w->set(a + k, gguf_u32(static_cast<uint32_t>(v))); };
  auto f = [&](const char* k, float v) { w->set(a + k, gguf_f32(v)); };
  w->set("general.architecture", gguf_str("deepseek4"));
  u("context_length", s.n_ctx);
  u("embedding_length", s.n_embd);
  u("embedding_length_out", 4 * s.n_embd);
  u("block_count", s.n_layer);
  u("attention.head_count", s.n_head);
  u("attention.head_count_kv", 1);
  u("attention.key_length", s.head_dim);
  u("attention.value_length", s.head_dim);
  u("rope.dimension_count", s.rope);
  f("rope.freq_base", 10000.0f);
  w->set(a + "rope.scaling.type", gguf_str("yarn"));
  f("rope.scaling.factor", 16.0f);
  u("rope.scaling.original_context_length", 65536);
  f("rope.scaling.yarn_beta_fast", 32.0f);
  f("rope.scaling.yarn_beta_slow", 1.0f);
  f("attention.compress_rope_freq_base", 160000.0f);
  f("attention.layer_norm_rms_epsilon", 1e-6f);
  u("attention.q_lora_rank", s.q_lora);
  u("attention.sliding_window", s.swa);
  u("attention.output_group_count", s.n_out_group);
  u("attention.output_lora_rank", s.out_rank);
  u("attention.indexer.head_count", s.idx_head);
  u("attention.indexer.key_length", s.idx_dim);
  u("attention.indexer.top_k", s.idx_top_k);
  u("hyper_connection.count", 4);
  u("hyper_connection.sinkhorn_iterations", 20);
  f("hyper_connection.epsilon", 1e-6f);
  u("hash_layer_count", s.n_hash);
  u("expert_count", s.n_expert);
  u("expert_used_count", s.n_used);
  u("expert_shared_count", s.n_shared);
  u("expert_feed_forward_length", s.n_ff_exp);
  f("expert_weights_scale", s.expert_scale);
  w->set(a + "expert_weights_norm", gguf_bool(true));
  u("expert_gating_func", 4);
  // The per-block arrays (compress_ratios, swiglu clamps) follow the final block_count in
  // synth_finalize_metadata, which keeps the lead ratio written here.
  std::vector<int32_t> ratios(static_cast<size_t>(s.n_layer), 0);
  for (int64_t il = 0; il < s.n_layer; ++il)
    ratios[static_cast<size_t>(il)] = il < 2 ? s.lead_ratio : (il % 2 == 0 ? 4 : 128);
  w->set(a + "attention.compress_ratios", gguf_arr_i32(ratios));
  if (s.n_vocab) u("vocab_size", s.n_vocab);
}

std::string arch_of(const GgufWriter& w) {
  const GgufValue* a = w.find("general.architecture");
  return a && a->type == GgufValueType::kString ? a->str : std::string();
}

bool parse_i64(std::string_view s, int64_t* out) {
  const std::string str(s);
  if (str.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(str.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

bool parse_f64(std::string_view s, double* out) {
  const std::string str(s);
  if (str.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(str.c_str(), &end);
  if (errno || *end) return false;
  *out = v;
  return true;
}

Result<GgufValue> parse_as(GgufValueType t, std::string_view key, std::string_view text) {
  GgufValue v;
  v.type = t;
  int64_t i = 0;
  double f = 0.0;
  const std::string what = "--set " + std::string(key) + "=" + std::string(text) + ": ";
  switch (t) {
    case GgufValueType::kString:
      v.str = std::string(text);
      return v;
    case GgufValueType::kBool:
      if (text != "true" && text != "false" && text != "1" && text != "0")
        return Status::error(what + "expected true or false");
      v.i = v.u = (text == "true" || text == "1") ? 1 : 0;
      return v;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      if (!parse_f64(text, &f)) return Status::error(what + "expected a number");
      v.f = f;
      return v;
    case GgufValueType::kArray:
      return Status::error(what + "arrays cannot be set from the command line");
    default:
      break;
  }
  if (!parse_i64(text, &i)) return Status::error(what + "expected an integer");
  const bool is_unsigned = t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
                           t == GgufValueType::kUint64;
  if (is_unsigned && i < 0) return Status::error(what + "expected a non-negative integer");
  if ((t == GgufValueType::kUint32 && i > std::numeric_limits<uint32_t>::max()) ||
      (t == GgufValueType::kInt32 &&
       (i > std::numeric_limits<int32_t>::max() || i < std::numeric_limits<int32_t>::min()))) {
    return Status::error(what + "out of range for a 32-bit value");
  }
  v.i = i;
  v.u = static_cast<uint64_t>(i);
  return v;
}

}  // namespace

const std::vector<SynthShapeInfo>& synth_shapes() {
  static const std::vector<SynthShapeInfo> list = [] {
    std::vector<SynthShapeInfo> l;
    for (const auto& s : kShapes) l.push_back(s.info);
    return l;
  }();
  return list;
}

Status synth_shape_metadata(std::string_view shape, GgufWriter* w, bool* rope_freqs) {
  for (const auto& s : kShapes) {
    if (shape != s.info.name) continue;
    *rope_freqs = s.dense && s.dense->rope_freqs;
    if (s.dense)
      put_dense(*s.dense, w);
    else if (s.v4)
      put_v4(*s.v4, w);
    else
      put_mla(*s.mla, w);
    return Status::ok();
  }
  std::string names;
  for (const auto& s : kShapes) names += std::string(names.empty() ? "" : ", ") + s.info.name;
  return Status::error("unknown shape '" + std::string(shape) + "' (one of " + names + ")");
}

int64_t synth_int(const GgufWriter& w, std::string_view key, int64_t def) {
  const GgufValue* v = w.find(key);
  if (!v || v->is_array() || v->type == GgufValueType::kString || v->is_float()) return def;
  return v->i != 0 ? v->i : static_cast<int64_t>(v->u);
}

Status synth_apply_override(GgufWriter* w, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::error("--set wants KEY=VALUE, got '" + std::string(assignment) + "'");
  }
  std::string key(assignment.substr(0, eq));
  const std::string_view text = assignment.substr(eq + 1);
  const std::string arch = arch_of(*w);
  if (!starts_with(key, arch + ".") && !starts_with(key, "general.") && !starts_with(key, "tokenizer.")) {
    // A short name may also stand for an existing key of the attention or rope group
    // (head_count -> <arch>.attention.head_count), so that it is never silently a new key.
    const std::string short_key = key;
    key = arch + "." + short_key;
    for (const char* group : {".attention.", ".rope."}) {
      if (!w->find(key) && w->find(arch + group + short_key)) key = arch + group + short_key;
    }
  }
  if (key == "general.architecture") return Status::error("--set cannot change general.architecture; pick a --shape");
  GgufValueType t;
  if (const GgufValue* old = w->find(key)) {
    t = old->type;
  } else {
    int64_t i = 0;
    double f = 0.0;
    if (text == "true" || text == "false")
      t = GgufValueType::kBool;
    else if (parse_i64(text, &i))
      t = i < 0 ? GgufValueType::kInt32 : GgufValueType::kUint32;
    else if (parse_f64(text, &f))
      t = GgufValueType::kFloat32;
    else
      t = GgufValueType::kString;
    if (t == GgufValueType::kUint32 && i > std::numeric_limits<uint32_t>::max()) t = GgufValueType::kUint64;
    if (t == GgufValueType::kInt32 && i < std::numeric_limits<int32_t>::min()) t = GgufValueType::kInt64;
  }
  auto v = parse_as(t, key, text);
  if (!v) return v.status();
  w->set(key, std::move(*v));
  return Status::ok();
}

}  // namespace ds::cli
