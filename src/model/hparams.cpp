// Hyper-parameter loading: explicit keys only (../shared/SPEC.md "Common keys" and
// "deepseek2"). Each getter returns a Status naming the key when it is required and absent,
// has the wrong type, or holds a value out of range. Every float key has a legal range (finite,
// and e.g. an RMS epsilon in (0, 1]): a file with rope.freq_base 0 or a NaN epsilon would load
// and then serve NaN activations.
#include "model/hparams.h"

#include <cmath>
#include <cstdio>
#include <cstdint>

#include "gguf/gguf_file.h"

namespace ds {

namespace {

// Legal values of a float key: lo < v <= hi (lo <= v with lo_inclusive); never NaN or inf.
struct FloatRange {
  double lo;
  double hi;
  bool lo_inclusive = false;
};

// Ranges of the float keys. Epsilons are tiny positive numbers; a rope base at or below 1
// gives no decreasing frequencies; scales are positive. The upper bounds are far beyond any
// published model and only keep the arithmetic finite.
constexpr FloatRange kEpsRange{.lo = 0.0, .hi = 1.0, .lo_inclusive = false};
constexpr FloatRange kRopeBaseRange{.lo = 1.0, .hi = 1e12, .lo_inclusive = false};
constexpr FloatRange kScaleRange{.lo = 0.0, .hi = 1e6, .lo_inclusive = false};
constexpr FloatRange kScaleOrZeroRange{.lo = 0.0, .hi = 1e6, .lo_inclusive = true};  // 0: "no scaling"
constexpr FloatRange kYarnLogMulRange{.lo = 0.0, .hi = 100.0, .lo_inclusive = true};

class KeyReader {
 public:
  KeyReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string key(const char* suffix) const { return arch_ + "." + suffix; }

  // Required integer key, which must be at least `min`.
  Status req_int(const char* suffix, int64_t min, int64_t* out) const {
    const std::string k = key(suffix);
    auto v = f_.get_int(k);
    if (!v) return v.status();
    if (!v.value()) return Status::error("missing required key " + k + " in " + f_.path());
    return check_range(k, **v, min, out);
  }
  Status opt_int(const char* suffix, int64_t def, int64_t min, int64_t* out) const {
    const std::string k = key(suffix);
    auto v = f_.get_int_or(k, def);
    if (!v) return v.status();
    return check_range(k, *v, min, out);
  }
  // Floats must be finite and lie in `range`.
  Status req_float(const char* suffix, FloatRange range, float* out) const {
    const std::string k = key(suffix);
    auto v = f_.get_float(k);
    if (!v) return v.status();
    if (!v.value()) return Status::error("missing required key " + k + " in " + f_.path());
    return check_float(k, **v, range, out);
  }
  Status opt_float(const char* suffix, float def, FloatRange range, float* out) const {
    auto v = f_.get_float_or(key(suffix), def);
    if (!v) return v.status();
    return check_float(key(suffix), *v, range, out);
  }
  Status opt_bool(const char* suffix, bool def, bool* out) const {
    auto v = f_.get_bool_or(key(suffix), def);
    if (!v) return v.status();
    *out = *v;
    return Status::ok();
  }
  Status opt_string(const char* suffix, std::string def, std::string* out) const {
    auto v = f_.get_string_or(key(suffix), std::move(def));
    if (!v) return v.status();
    *out = *v;
    return Status::ok();
  }
  bool has(const char* suffix) const { return f_.has(key(suffix)); }

 private:
  Status check_range(const std::string& k, int64_t v, int64_t min, int64_t* out) const {
    if (v < min || v > (int64_t{1} << 31)) {
      return Status::error("key " + k + " = " + std::to_string(v) + " is out of range in " + f_.path());
    }
    *out = v;
    return Status::ok();
  }
  Status check_float(const std::string& k, double v, FloatRange range, float* out) const {
    const bool above = range.lo_inclusive ? v >= range.lo : v > range.lo;
    if (!(above && v <= range.hi)) {  // also rejects NaN
      char buf[160];
      std::snprintf(buf, sizeof buf, "key %s = %g is out of range (must be in %c%g, %g]) in ", k.c_str(), v,
                    range.lo_inclusive ? '[' : '(', range.lo, range.hi);
      return Status::error(buf + f_.path());
    }
    *out = static_cast<float>(v);
    return Status::ok();
  }
  const GgufFile& f_;
  std::string arch_;
};

template <class T>
Status read_to(const KeyReader& r, const char* suffix, T* out, bool required, int64_t def, int64_t min) {
  int64_t v = 0;
  DS_RETURN_IF_ERROR(required ? r.req_int(suffix, min, &v) : r.opt_int(suffix, def, min, &v));
  *out = static_cast<T>(v);
  return Status::ok();
}

Status load_common(const GgufFile& f, const KeyReader& r, HParams* hp) {
  DS_RETURN_IF_ERROR(read_to(r, "context_length", &hp->n_ctx_train, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "embedding_length", &hp->n_embd, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "block_count", &hp->n_layer, true, 0, 1));
  // deepseek4 has no dense FFN; deepseek32 files need it only for their leading dense blocks
  // (checked in load_deepseek32).
  const bool ff_required = hp->arch != Arch::kDeepseek32 && hp->arch != Arch::kDeepseek4;
  DS_RETURN_IF_ERROR(read_to(r, "feed_forward_length", &hp->n_ff, ff_required, 0, ff_required ? 1 : 0));
  DS_RETURN_IF_ERROR(read_to(r, "attention.head_count", &hp->n_head, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.head_count_kv", &hp->n_head_kv, false, hp->n_head, 1));
  if (hp->n_embd % hp->n_head != 0) {
    return Status::error(r.key("embedding_length") + " is not a multiple of head_count in " + f.path());
  }
  const int64_t hd = hp->n_embd / hp->n_head;
  DS_RETURN_IF_ERROR(read_to(r, "attention.key_length", &hp->n_embd_head_k, false, hd, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.value_length", &hp->n_embd_head_v, false, hd, 1));
  DS_RETURN_IF_ERROR(r.req_float("attention.layer_norm_rms_epsilon", kEpsRange, &hp->norm_eps));
  DS_RETURN_IF_ERROR(r.opt_float("rope.freq_base", 10000.0f, kRopeBaseRange, &hp->rope_base));

  std::string scaling;
  DS_RETURN_IF_ERROR(r.opt_string("rope.scaling.type", "none", &scaling));
  if (scaling == "none") {
    hp->rope_scaling = RopeScaling::kNone;
  } else if (scaling == "linear") {
    hp->rope_scaling = RopeScaling::kLinear;
  } else if (scaling == "yarn") {
    hp->rope_scaling = RopeScaling::kYarn;
  } else {
    return Status::error("unsupported " + r.key("rope.scaling.type") + " '" + scaling + "' in " + f.path());
  }
  if (hp->rope_scaling != RopeScaling::kNone) {
    DS_RETURN_IF_ERROR(r.req_float("rope.scaling.factor", kScaleRange, &hp->rope_factor));
  }
  if (hp->rope_scaling == RopeScaling::kYarn) {
    DS_RETURN_IF_ERROR(read_to(r, "rope.scaling.original_context_length", &hp->n_ctx_orig, true, 0, 1));
    DS_RETURN_IF_ERROR(r.opt_float("rope.scaling.yarn_log_multiplier", 0.0f, kYarnLogMulRange, &hp->yarn_log_mul));
    DS_RETURN_IF_ERROR(r.opt_float("rope.scaling.yarn_beta_fast", 32.0f, kScaleRange, &hp->yarn_beta_fast));
    DS_RETURN_IF_ERROR(r.opt_float("rope.scaling.yarn_beta_slow", 1.0f, kScaleRange, &hp->yarn_beta_slow));
  }

  // Vocabulary: <arch>.vocab_size, else the token list, else token_embd's rows.
  auto vs = f.get_int(r.key("vocab_size"));
  if (!vs) return vs.status();
  if (vs.value()) {
    hp->n_vocab = **vs;
  } else if (const GgufValue* toks = f.find("tokenizer.ggml.tokens")) {
    hp->n_vocab = static_cast<int64_t>(toks->array_size());
  } else if (const GgufTensorInfo* te = f.tensor("token_embd.weight")) {
    hp->n_vocab = te->ne[1];
  }
  if (hp->n_vocab <= 0) return Status::error("cannot determine the vocabulary size of " + f.path());
  if (hp->n_vocab > INT32_MAX) {
    return Status::error("the vocabulary size " + std::to_string(hp->n_vocab) + " is out of range in " + f.path());
  }
  return Status::ok();
}

// deepseek2, and the MLA + MoE part of deepseek32 (SPEC-deepseek32-deepseek4.md 2.1, which
// makes leading_dense_block_count and expert_weights_scale optional, q_lora_rank and
// expert_gating_func required).
Status load_deepseek2(const GgufFile& f, const KeyReader& r, HParams* hp) {
  const bool v32 = hp->arch == Arch::kDeepseek32;
  DS_RETURN_IF_ERROR(read_to(r, "rope.dimension_count", &hp->n_rot, true, 0, 2));
  DS_RETURN_IF_ERROR(read_to(r, "leading_dense_block_count", &hp->n_layer_dense_lead, !v32, 0, 0));
  DS_RETURN_IF_ERROR(read_to(r, "attention.q_lora_rank", &hp->q_lora, v32, 0, v32 ? 1 : 0));
  DS_RETURN_IF_ERROR(read_to(r, "attention.kv_lora_rank", &hp->kv_lora, true, 0, 1));
  const bool has_k_mla = r.has("attention.key_length_mla");
  const bool has_v_mla = r.has("attention.value_length_mla");
  if (has_k_mla != has_v_mla) {
    return Status::error(r.key(has_k_mla ? "attention.value_length_mla" : "attention.key_length_mla") +
                         " is missing (the other *_mla key is present) in " + f.path());
  }
  if (v32 && !has_k_mla) {
    return Status::error("missing required key " + r.key("attention.key_length_mla") +
                         " (deepseek32 files use the MLA layout) in " + f.path());
  }
  hp->mla_legacy = !has_k_mla;
  int64_t k_head = hp->n_embd_head_k;
  if (has_k_mla) {
    DS_RETURN_IF_ERROR(read_to(r, "attention.key_length_mla", &k_head, true, 0, 1));
    DS_RETURN_IF_ERROR(read_to(r, "attention.value_length_mla", &hp->n_v, true, 0, 1));
  } else {
    if (!r.has("attention.key_length")) return Status::error("missing required key " + r.key("attention.key_length"));
    if (!r.has("attention.value_length"))
      return Status::error("missing required key " + r.key("attention.value_length"));
    hp->n_v = hp->n_embd_head_v;
  }
  if (k_head <= hp->n_rot) {
    return Status::error("deepseek2 key length " + std::to_string(k_head) + " must exceed rope.dimension_count " +
                         std::to_string(hp->n_rot) + " in " + f.path());
  }
  hp->n_nope = k_head - hp->n_rot;

  DS_RETURN_IF_ERROR(read_to(r, "expert_count", &hp->n_expert, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_used_count", &hp->n_expert_used, true, 0, 1));
  // Required, as the reference requires them (a missing scale must not silently become 1).
  DS_RETURN_IF_ERROR(read_to(r, "expert_shared_count", &hp->n_expert_shared, true, 0, 0));
  DS_RETURN_IF_ERROR(read_to(r, "expert_feed_forward_length", &hp->n_ff_exp, true, 0, 1));
  if (v32) {
    DS_RETURN_IF_ERROR(r.opt_float("expert_weights_scale", 1.0f, kScaleOrZeroRange, &hp->expert_weights_scale));
    if (hp->expert_weights_scale == 0.0f) hp->expert_weights_scale = 1.0f;  // 0: no scaling (SPEC 2.1)
  } else {
    DS_RETURN_IF_ERROR(r.req_float("expert_weights_scale", kScaleRange, &hp->expert_weights_scale));
  }
  DS_RETURN_IF_ERROR(r.opt_bool("expert_weights_norm", false, &hp->expert_weights_norm));
  int gating = 0;
  DS_RETURN_IF_ERROR(read_to(r, "expert_gating_func", &gating, v32, 0, 0));
  if ((gating == 0 && !v32) || gating == 1) {
    hp->gating = MoeGating::kSoftmax;
  } else if (gating == 2) {
    hp->gating = MoeGating::kSigmoid;
  } else {
    return Status::error(r.key("expert_gating_func") + " = " + std::to_string(gating) + " is not " +
                         (v32 ? "1 or 2" : "0, 1 or 2") + " in " + f.path());
  }
  DS_RETURN_IF_ERROR(read_to(r, "expert_group_count", &hp->n_group, false, 1, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_group_used_count", &hp->n_group_used, false, hp->n_group, 1));
  if (hp->n_expert_used > hp->n_expert) return Status::error(r.key("expert_used_count") + " exceeds expert_count");
  if (hp->n_expert % hp->n_group != 0 || hp->n_group_used > hp->n_group) {
    return Status::error(r.key("expert_group_count") + "/" + r.key("expert_group_used_count") +
                         " do not divide the experts");
  }
  if (hp->n_layer_dense_lead > hp->n_layer) {
    return Status::error(r.key("leading_dense_block_count") + " exceeds block_count");
  }
  return Status::ok();
}

// deepseek (DeepSeek-MoE 16B, ../shared/SPEC-deepseek32-deepseek4.md section 4): llama
// attention (RoPE over the whole head) and the deepseek2 MoE with fixed routing: softmax
// scores, no selection bias, no groups, no weight normalization.
Status load_deepseek(const GgufFile& f, const KeyReader& r, HParams* hp) {
  DS_RETURN_IF_ERROR(read_to(r, "rope.dimension_count", &hp->n_rot, false, hp->n_embd_head_k, 2));
  if (hp->n_rot != hp->n_embd_head_k) {
    return Status::error(r.key("rope.dimension_count") + " = " + std::to_string(hp->n_rot) +
                         " must equal the head size " + std::to_string(hp->n_embd_head_k) + " in " + f.path());
  }
  if (hp->n_head % hp->n_head_kv != 0) {
    return Status::error(r.key("attention.head_count") + " is not a multiple of head_count_kv in " + f.path());
  }
  DS_RETURN_IF_ERROR(read_to(r, "leading_dense_block_count", &hp->n_layer_dense_lead, true, 0, 0));
  DS_RETURN_IF_ERROR(read_to(r, "expert_count", &hp->n_expert, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_used_count", &hp->n_expert_used, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_shared_count", &hp->n_expert_shared, true, 0, 0));
  DS_RETURN_IF_ERROR(read_to(r, "expert_feed_forward_length", &hp->n_ff_exp, true, 0, 1));
  DS_RETURN_IF_ERROR(r.opt_float("expert_weights_scale", 1.0f, kScaleRange, &hp->expert_weights_scale));
  hp->gating = MoeGating::kSoftmax;
  hp->expert_weights_norm = false;
  if (hp->n_expert_used > hp->n_expert) return Status::error(r.key("expert_used_count") + " exceeds expert_count");
  if (hp->n_layer_dense_lead > hp->n_layer) {
    return Status::error(r.key("leading_dense_block_count") + " exceeds block_count");
  }
  return Status::ok();
}

// qwen3 (R1-0528-Qwen3, ../shared/SPEC-deepseek32-deepseek4.md section 8): the qwen2 block
// without biases and with per-head q/k norms; RoPE covers the whole head and K and V heads
// have one width.
Status load_qwen3(const GgufFile& f, const KeyReader& r, HParams* hp) {
  if (hp->n_embd_head_k != hp->n_embd_head_v) {
    return Status::error(r.key("attention.key_length") + " and " + r.key("attention.value_length") +
                         " must be equal in " + f.path());
  }
  DS_RETURN_IF_ERROR(read_to(r, "rope.dimension_count", &hp->n_rot, false, hp->n_embd_head_k, 2));
  if (hp->n_rot != hp->n_embd_head_k) {
    return Status::error(r.key("rope.dimension_count") + " = " + std::to_string(hp->n_rot) +
                         " must equal the head size " + std::to_string(hp->n_embd_head_k) + " in " + f.path());
  }
  if (hp->n_head % hp->n_head_kv != 0) {
    return Status::error(r.key("attention.head_count") + " is not a multiple of head_count_kv in " + f.path());
  }
  DS_RETURN_IF_ERROR(r.opt_float("rope.scaling.attn_factor", 1.0f, kScaleRange, &hp->rope_attn_factor));
  return Status::ok();
}

// A per-block array key of at least n entries (integers or floats), or a scalar applied to
// every block when scalar_ok.
Status per_block(const GgufFile& f, const KeyReader& r, const char* suffix, int n, bool scalar_ok,
                 std::vector<double>* out) {
  const std::string k = r.key(suffix);
  const GgufValue* v = f.find(k);
  if (!v) return Status::error("missing required key " + k + " in " + f.path());
  out->clear();
  if (!v->is_array()) {
    if (!scalar_ok || !(v->is_float() || v->is_integer())) {
      return Status::error("key " + k + " must be an array of " + std::to_string(n) + " numbers in " + f.path());
    }
    out->assign(static_cast<size_t>(n), v->is_float() ? v->f : static_cast<double>(v->i));
    return Status::ok();
  }
  if (v->array_size() < static_cast<size_t>(n)) {
    return Status::error("key " + k + " has " + std::to_string(v->array_size()) + " entries, expected " +
                         std::to_string(n) + " (block_count) in " + f.path());
  }
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    if (!v->arr_float.empty()) {
      out->push_back(v->arr_float[i]);
    } else if (!v->arr_int.empty()) {
      out->push_back(static_cast<double>(v->arr_int[i]));
    } else {
      return Status::error("key " + k + " must hold numbers in " + f.path());
    }
  }
  return Status::ok();
}

// deepseek4 (../shared/SPEC-deepseek32-deepseek4.md 3.1): every key the forward reads,
// each required one named when absent; values the reference rejects are rejected here.
// The lightning indexer's keys (deepseek32 and deepseek4's CSA blocks). Its heads rotate NEOX
// pairs over rope.dimension_count dims of each key (SPEC 2.3, 3.6), so it must fit and be even.
Status load_indexer(const GgufFile& f, const KeyReader& r, HParams* hp) {
  DS_RETURN_IF_ERROR(read_to(r, "attention.indexer.head_count", &hp->n_idx_head, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.indexer.key_length", &hp->n_idx_dim, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.indexer.top_k", &hp->idx_top_k, true, 0, 1));
  if (hp->n_idx_dim < hp->n_rot || hp->n_rot % 2 != 0) {
    return Status::error(r.key("attention.indexer.key_length") + " = " + std::to_string(hp->n_idx_dim) +
                         " must be at least the even rope.dimension_count " + std::to_string(hp->n_rot) + " in " +
                         f.path());
  }
  return Status::ok();
}

Status load_deepseek4(const GgufFile& f, const KeyReader& r, HParams* hp) {
  const int n_block = hp->n_layer;
  DS_RETURN_IF_ERROR(read_to(r, "nextn_predict_layers", &hp->n_nextn, false, 0, 0));
  // Honored only when the first MTP block is really stored (SPEC 3.1).
  if (hp->n_nextn > 0 && n_block > hp->n_nextn &&
      f.tensor("blk." + std::to_string(n_block - hp->n_nextn) + ".nextn.eh_proj.weight")) {
    hp->n_layer = n_block - hp->n_nextn;
  } else {
    hp->n_nextn = 0;
  }
  if (hp->n_head_kv != 1) return Status::error(r.key("attention.head_count_kv") + " must be 1 in " + f.path());
  if (hp->n_embd_head_k != hp->n_embd_head_v || !r.has("attention.key_length")) {
    return Status::error(r.key("attention.key_length") + " and value_length must be present and equal in " + f.path());
  }
  DS_RETURN_IF_ERROR(read_to(r, "rope.dimension_count", &hp->n_rot, true, 0, 2));
  if (hp->n_rot > hp->n_embd_head_k || hp->n_rot % 2 != 0) {
    return Status::error(r.key("rope.dimension_count") + " must be even and at most key_length in " + f.path());
  }
  DS_RETURN_IF_ERROR(r.req_float("attention.compress_rope_freq_base", kRopeBaseRange, &hp->compress_rope_base));
  DS_RETURN_IF_ERROR(read_to(r, "attention.q_lora_rank", &hp->q_lora, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.sliding_window", &hp->n_swa, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.output_group_count", &hp->n_out_group, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "attention.output_lora_rank", &hp->out_lora, true, 0, 1));
  if (hp->n_head % hp->n_out_group != 0) {
    return Status::error(r.key("attention.output_group_count") + " does not divide head_count in " + f.path());
  }
  DS_RETURN_IF_ERROR(load_indexer(f, r, hp));
  std::vector<double> v;
  DS_RETURN_IF_ERROR(per_block(f, r, "attention.compress_ratios", n_block, false, &v));
  for (int il = 0; il < n_block; ++il) {
    const double c = v[static_cast<size_t>(il)];
    if (c != 0 && c != 4 && c != 128) {
      return Status::error(r.key("attention.compress_ratios") + "[" + std::to_string(il) + "] = " + std::to_string(c) +
                           " is not 0, 4 or 128 in " + f.path());
    }
    if (il >= hp->n_layer && c != 0) {
      return Status::error(r.key("attention.compress_ratios") + ": MTP block " + std::to_string(il) + " must be 0");
    }
    if (il < hp->n_layer) hp->compress_ratio.push_back(static_cast<int>(c));
  }
  DS_RETURN_IF_ERROR(read_to(r, "hyper_connection.count", &hp->n_hc, true, 0, 1));
  if (hp->n_hc != 4) return Status::error(r.key("hyper_connection.count") + " must be 4 in " + f.path());
  DS_RETURN_IF_ERROR(read_to(r, "hyper_connection.sinkhorn_iterations", &hp->hc_iters, true, 0, 1));
  DS_RETURN_IF_ERROR(r.req_float("hyper_connection.epsilon", kEpsRange, &hp->hc_eps));
  DS_RETURN_IF_ERROR(read_to(r, "hash_layer_count", &hp->n_hash_layer, true, 0, 0));
  if (hp->n_hash_layer > hp->n_layer) return Status::error(r.key("hash_layer_count") + " exceeds the trunk blocks");

  DS_RETURN_IF_ERROR(read_to(r, "expert_count", &hp->n_expert, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_used_count", &hp->n_expert_used, true, 0, 1));
  DS_RETURN_IF_ERROR(read_to(r, "expert_shared_count", &hp->n_expert_shared, true, 0, 0));
  DS_RETURN_IF_ERROR(read_to(r, "expert_feed_forward_length", &hp->n_ff_exp, true, 0, 1));
  DS_RETURN_IF_ERROR(r.req_float("expert_weights_scale", kScaleRange, &hp->expert_weights_scale));
  DS_RETURN_IF_ERROR(r.opt_bool("expert_weights_norm", false, &hp->expert_weights_norm));
  int gating = 0;
  DS_RETURN_IF_ERROR(read_to(r, "expert_gating_func", &gating, true, 0, 0));
  if (gating != 4) {
    return Status::error(r.key("expert_gating_func") + " = " + std::to_string(gating) +
                         ": deepseek4 needs 4 (sqrt-softplus) in " + f.path());
  }
  if (hp->n_expert_used > hp->n_expert) return Status::error(r.key("expert_used_count") + " exceeds expert_count");
  DS_RETURN_IF_ERROR(per_block(f, r, "swiglu_clamp_exp", n_block, true, &v));
  hp->swiglu_clamp_exp.assign(v.begin(), v.begin() + hp->n_layer);
  if (r.has("swiglu_clamp_shexp")) {
    DS_RETURN_IF_ERROR(per_block(f, r, "swiglu_clamp_shexp", n_block, true, &v));
    hp->swiglu_clamp_shexp.assign(v.begin(), v.begin() + hp->n_layer);
  } else {
    hp->swiglu_clamp_shexp = hp->swiglu_clamp_exp;
  }
  return Status::ok();
}

// The lightning indexer and the MTP blocks of deepseek32 (SPEC-deepseek32-deepseek4.md 2.1);
// called after load_deepseek2. block_count includes the MTP blocks: n_layer becomes the trunk.
Status load_deepseek32(const GgufFile& f, const KeyReader& r, HParams* hp) {
  DS_RETURN_IF_ERROR(read_to(r, "nextn_predict_layers", &hp->n_nextn, false, 0, 0));
  if (hp->n_nextn >= hp->n_layer) {
    return Status::error(r.key("nextn_predict_layers") + " = " + std::to_string(hp->n_nextn) +
                         " leaves no trunk blocks of block_count " + std::to_string(hp->n_layer) + " in " + f.path());
  }
  hp->n_layer -= hp->n_nextn;
  if (hp->n_layer_dense_lead > hp->n_layer) {
    return Status::error(r.key("leading_dense_block_count") + " exceeds the trunk blocks in " + f.path());
  }
  if (hp->n_layer_dense_lead > 0 && hp->n_ff < 1) {
    return Status::error("missing required key " + r.key("feed_forward_length") + " (leading dense blocks) in " +
                         f.path());
  }
  return load_indexer(f, r, hp);
}

}  // namespace

// RoPE rotates pairs of dimensions: an odd count leaves one without a partner.
Status check_rope_dims(const KeyReader& r, const HParams& hp, const GgufFile& f) {
  if (hp.n_rot % 2 != 0) {
    return Status::error("key " + r.key("rope.dimension_count") + " = " + std::to_string(hp.n_rot) +
                         " must be even in " + f.path());
  }
  return Status::ok();
}

Result<HParams> load_hparams(const GgufFile& f) {
  HParams hp;
  hp.arch_name = f.architecture();
  if (hp.arch_name.empty()) return Status::error("missing required key general.architecture in " + f.path());
  if (hp.arch_name == "llama") {
    hp.arch = Arch::kLlama;
  } else if (hp.arch_name == "qwen2") {
    hp.arch = Arch::kQwen2;
  } else if (hp.arch_name == "deepseek2") {
    hp.arch = Arch::kDeepseek2;
  } else if (hp.arch_name == "deepseek") {
    hp.arch = Arch::kDeepseek;
  } else if (hp.arch_name == "qwen3") {
    hp.arch = Arch::kQwen3;
  } else if (hp.arch_name == "deepseek4") {
    hp.arch = Arch::kDeepseek4;
  } else if (hp.arch_name == "deepseek32") {
    hp.arch = Arch::kDeepseek32;
  } else {
    return Status::error("unsupported architecture '" + hp.arch_name + "' in " + f.path() +
                         " (supported: llama, qwen2, qwen3, deepseek, deepseek2, deepseek32, deepseek4)");
  }
  auto name = f.get_string_or("general.name", "");
  if (!name) return name.status();
  hp.name = *name;
  KeyReader r(f, hp.arch_name);
  DS_RETURN_IF_ERROR(load_common(f, r, &hp));
  if (hp.is_mla()) {
    DS_RETURN_IF_ERROR(load_deepseek2(f, r, &hp));
    if (hp.arch == Arch::kDeepseek32) DS_RETURN_IF_ERROR(load_deepseek32(f, r, &hp));
  } else if (hp.arch == Arch::kDeepseek) {
    DS_RETURN_IF_ERROR(load_deepseek(f, r, &hp));
  } else if (hp.arch == Arch::kQwen3) {
    DS_RETURN_IF_ERROR(load_qwen3(f, r, &hp));
  } else if (hp.arch == Arch::kDeepseek4) {
    DS_RETURN_IF_ERROR(load_deepseek4(f, r, &hp));
  } else {
    DS_RETURN_IF_ERROR(read_to(r, "rope.dimension_count", &hp.n_rot, false, hp.n_embd_head_k, 2));
    if (hp.n_head % hp.n_head_kv != 0) {
      return Status::error(r.key("attention.head_count") + " is not a multiple of head_count_kv in " + f.path());
    }
    if (hp.n_rot > hp.n_embd_head_k) return Status::error(r.key("rope.dimension_count") + " exceeds the head size");
  }
  DS_RETURN_IF_ERROR(check_rope_dims(r, hp, f));
  return hp;
}

RopeParams HParams::rope_params(const float* freq_factors) const {
  RopeParams p;
  p.n_rot = n_rot;
  // SPEC.md: qwen2 and qwen3 rotate halves; llama, deepseek and deepseek2 adjacent pairs.
  p.neox = arch == Arch::kQwen2 || arch == Arch::kQwen3;
  p.freq_base = rope_base;
  p.freq_factors = freq_factors;
  if (rope_scaling != RopeScaling::kNone) p.freq_scale = 1.0f / rope_factor;
  if (rope_scaling == RopeScaling::kYarn) {
    // SPEC.md step 4: all of YaRN's attention scaling goes into kq_scale; the cos/sin
    // magnitude stays 1 for DeepSeek files (mscale == mscale_all_dim).
    p.ext_factor = 1.0f;
    p.attn_factor = 1.0f;
    p.n_ctx_orig = n_ctx_orig;
    // [QWEN3_YARN_MSCALE] qwen3 keeps YaRN's magnitude in the rotation, as the reference's
    // rope does: attn_factor * (1 + 0.1 ln factor). R1-0528-Qwen3-8B's attn_factor 0.8782
    // (= 1 / (1 + 0.1 ln 4)) brings it back to 1; kq_scale stays 1/sqrt(hd).
    if (arch == Arch::kQwen3) p.attn_factor = rope_attn_factor * (1.0f + 0.1f * std::log(rope_factor));
  }
  return p;
}

float HParams::kq_scale() const {
  if (!is_mla()) return 1.0f / std::sqrt(static_cast<float>(n_embd_head_k));
  // [YARN_LOG_MUL] mscale = 1 + 0.1 * mscale_all_dim * ln(factor) = 1 + yarn_log_mul * ln(factor).
  float mscale = 1.0f;
  if (rope_scaling == RopeScaling::kYarn) mscale = 1.0f + yarn_log_mul * std::log(rope_factor);
  return mscale * mscale / std::sqrt(static_cast<float>(n_nope + n_rot));
}

}  // namespace ds
