// Tensor lists of synth models, derived from the final metadata (synth_shapes.h).
// Names and shapes: ../shared/SPEC.md "Architectures" (ggml order, ne[0] contiguous).
#include <string>
#include <vector>

#include "tools/synth_shapes.h"

namespace ds::cli {
namespace {

// A hyper-parameter read for tensor shapes: must be present (or defaulted) and in range.
struct Hp {
  const GgufWriter& w;
  std::string arch;
  Status status;
  int64_t get(const char* suffix, int64_t def, int64_t lo, int64_t hi) {
    const std::string key = arch + "." + suffix;
    const int64_t v = synth_int(w, key, def);
    if (status.is_ok() && (v < lo || v > hi)) {
      status = Status::error(key + " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
    }
    return v;
  }
};

constexpr int64_t kMaxDim = int64_t{1} << 20;

void add(std::vector<SynthTensor>* out, std::string name, std::vector<int64_t> ne,
         SynthInit init = SynthInit::kNormal) {
  out->push_back({std::move(name), std::move(ne), init, 0.02f});
}

std::string blk(int64_t il, const char* what) {
  return "blk." + std::to_string(il) + "." + what;
}

// The MoE FFN of a deepseek (V1) block: router, routed experts, shared experts.
struct DenseMoeKeys {
  int64_t n_expert = 0, n_shared = 0, n_ff_exp = 0, n_dense = 0;
};

void moe_ffn_tensors(const DenseMoeKeys& m, int64_t il, int64_t n_embd, std::vector<SynthTensor>* out) {
  add(out, blk(il, "ffn_gate_inp.weight"), {n_embd, m.n_expert});
  add(out, blk(il, "ffn_gate_exps.weight"), {n_embd, m.n_ff_exp, m.n_expert});
  add(out, blk(il, "ffn_up_exps.weight"), {n_embd, m.n_ff_exp, m.n_expert});
  add(out, blk(il, "ffn_down_exps.weight"), {m.n_ff_exp, n_embd, m.n_expert});
  if (m.n_shared > 0) {
    add(out, blk(il, "ffn_gate_shexp.weight"), {n_embd, m.n_ff_exp * m.n_shared});
    add(out, blk(il, "ffn_up_shexp.weight"), {n_embd, m.n_ff_exp * m.n_shared});
    add(out, blk(il, "ffn_down_shexp.weight"), {m.n_ff_exp * m.n_shared, n_embd});
  }
}

// llama, qwen2 (q/k/v biases), qwen3 (per-head q/k norms) and deepseek (MoE blocks after
// the leading dense ones).
Status dense_tensors(Hp& hp, bool qwen2, bool rope_freqs, std::vector<SynthTensor>* out) {
  const int64_t n_embd = hp.get("embedding_length", 0, 1, kMaxDim);
  const int64_t n_layer = hp.get("block_count", 0, 1, 4096);
  const int64_t n_head = hp.get("attention.head_count", 0, 1, 4096);
  const int64_t n_head_kv = hp.get("attention.head_count_kv", n_head, 1, n_head);
  const int64_t n_ff = hp.get("feed_forward_length", 0, 1, kMaxDim);
  const int64_t n_vocab = hp.get("vocab_size", 0, 1, int64_t{1} << 24);
  DS_RETURN_IF_ERROR(hp.status);
  if (n_head % n_head_kv != 0) return Status::error("head_count must be a multiple of head_count_kv");
  if (!hp.w.find(hp.arch + ".attention.key_length") && n_embd % n_head != 0) {
    return Status::error("embedding_length must be a multiple of head_count");
  }
  const int64_t hd = hp.get("attention.key_length", n_embd / n_head, 2, 65536);
  DenseMoeKeys moe;
  if (hp.arch == "deepseek") {
    moe.n_expert = hp.get("expert_count", 0, 1, 4096);
    hp.get("expert_used_count", 0, 1, moe.n_expert);  // validated only
    moe.n_shared = hp.get("expert_shared_count", 0, 0, 64);
    moe.n_ff_exp = hp.get("expert_feed_forward_length", 0, 1, kMaxDim);
    moe.n_dense = hp.get("leading_dense_block_count", 0, 0, n_layer);
  }
  DS_RETURN_IF_ERROR(hp.status);
  add(out, "token_embd.weight", {n_embd, n_vocab});
  if (rope_freqs) add(out, "rope_freqs.weight", {hd / 2}, SynthInit::kRopeFreqs);
  for (int64_t il = 0; il < n_layer; ++il) {
    add(out, blk(il, "attn_norm.weight"), {n_embd}, SynthInit::kOnes);
    add(out, blk(il, "attn_q.weight"), {n_embd, n_head * hd});
    add(out, blk(il, "attn_k.weight"), {n_embd, n_head_kv * hd});
    add(out, blk(il, "attn_v.weight"), {n_embd, n_head_kv * hd});
    if (qwen2) {
      add(out, blk(il, "attn_q.bias"), {n_head * hd});
      add(out, blk(il, "attn_k.bias"), {n_head_kv * hd});
      add(out, blk(il, "attn_v.bias"), {n_head_kv * hd});
    }
    if (hp.arch == "qwen3") {
      add(out, blk(il, "attn_q_norm.weight"), {hd}, SynthInit::kOnes);
      add(out, blk(il, "attn_k_norm.weight"), {hd}, SynthInit::kOnes);
    }
    add(out, blk(il, "attn_output.weight"), {n_head * hd, n_embd});
    add(out, blk(il, "ffn_norm.weight"), {n_embd}, SynthInit::kOnes);
    if (moe.n_expert > 0 && il >= moe.n_dense) {
      moe_ffn_tensors(moe, il, n_embd, out);
      continue;
    }
    add(out, blk(il, "ffn_gate.weight"), {n_embd, n_ff});
    add(out, blk(il, "ffn_up.weight"), {n_embd, n_ff});
    add(out, blk(il, "ffn_down.weight"), {n_ff, n_embd});
  }
  add(out, "output_norm.weight", {n_embd}, SynthInit::kOnes);
  add(out, "output.weight", {n_embd, n_vocab});
  return Status::ok();
}

Status mla_tensors(Hp& hp, std::vector<SynthTensor>* out) {
  const int64_t n_embd = hp.get("embedding_length", 0, 1, kMaxDim);
  const int64_t n_layer = hp.get("block_count", 0, 1, 4096);
  const int64_t n_head = hp.get("attention.head_count", 0, 1, 4096);
  const int64_t n_ff = hp.get("feed_forward_length", 0, 1, kMaxDim);
  const int64_t n_vocab = hp.get("vocab_size", 0, 1, int64_t{1} << 24);
  const int64_t q_lora = hp.get("attention.q_lora_rank", 0, 0, kMaxDim);
  const int64_t kv_lora = hp.get("attention.kv_lora_rank", 0, 1, kMaxDim);
  const int64_t n_rope = hp.get("rope.dimension_count", 0, 2, 65536);
  const int64_t k_mla = hp.get("attention.key_length_mla", 0, n_rope + 1, 65536);
  const int64_t n_v = hp.get("attention.value_length_mla", 0, 1, 65536);
  const int64_t n_expert = hp.get("expert_count", 0, 0, 4096);
  hp.get("expert_used_count", 0, n_expert ? 1 : 0, n_expert);  // validated only
  const int64_t n_shared = hp.get("expert_shared_count", 0, 0, 64);
  const int64_t n_ff_exp = hp.get("expert_feed_forward_length", 0, n_expert ? 1 : 0, kMaxDim);
  const int64_t n_dense = hp.get("leading_dense_block_count", 0, 0, n_layer);
  const int64_t gating = hp.get("expert_gating_func", 0, 0, 2);
  const int64_t n_group = hp.get("expert_group_count", 1, 1, n_expert > 0 ? n_expert : 1);
  hp.get("expert_group_used_count", 1, 1, n_group);
  DS_RETURN_IF_ERROR(hp.status);
  if (n_expert % n_group != 0) return Status::error("deepseek2.expert_count must be a multiple of expert_group_count");
  // deepseek32: the indexer in every block, and the MTP blocks after the trunk.
  const bool v32 = hp.arch == "deepseek32";
  const int64_t idx_head = v32 ? hp.get("attention.indexer.head_count", 0, 1, 4096) : 0;
  const int64_t idx_dim = v32 ? hp.get("attention.indexer.key_length", 0, n_rope, 65536) : 0;
  if (v32) hp.get("attention.indexer.top_k", 0, 1, int64_t{1} << 24);
  const int64_t n_nextn = v32 ? hp.get("nextn_predict_layers", 0, 0, n_layer - 1) : 0;
  DS_RETURN_IF_ERROR(hp.status);
  const int64_t n_nope = k_mla - n_rope;
  add(out, "token_embd.weight", {n_embd, n_vocab});
  for (int64_t il = 0; il < n_layer; ++il) {
    add(out, blk(il, "attn_norm.weight"), {n_embd}, SynthInit::kOnes);
    if (q_lora > 0) {
      add(out, blk(il, "attn_q_a.weight"), {n_embd, q_lora});
      add(out, blk(il, "attn_q_a_norm.weight"), {q_lora}, SynthInit::kOnes);
      add(out, blk(il, "attn_q_b.weight"), {q_lora, n_head * k_mla});
    } else {
      add(out, blk(il, "attn_q.weight"), {n_embd, n_head * k_mla});
    }
    add(out, blk(il, "attn_kv_a_mqa.weight"), {n_embd, kv_lora + n_rope});
    add(out, blk(il, "attn_kv_a_norm.weight"), {kv_lora}, SynthInit::kOnes);
    add(out, blk(il, "attn_k_b.weight"), {n_nope, kv_lora, n_head});
    add(out, blk(il, "attn_v_b.weight"), {kv_lora, n_v, n_head});
    add(out, blk(il, "attn_output.weight"), {n_head * n_v, n_embd});
    if (v32) {
      add(out, blk(il, "indexer.attn_q_b.weight"), {q_lora, idx_head * idx_dim});
      add(out, blk(il, "indexer.attn_k.weight"), {n_embd, idx_dim});
      add(out, blk(il, "indexer.k_norm.weight"), {idx_dim}, SynthInit::kOnes);
      add(out, blk(il, "indexer.k_norm.bias"), {idx_dim});
      add(out, blk(il, "indexer.proj.weight"), {n_embd, idx_head});
    }
    if (il >= n_layer - n_nextn) {  // MTP block (SPEC-deepseek32-deepseek4.md 2.2)
      add(out, blk(il, "nextn.eh_proj.weight"), {2 * n_embd, n_embd});
      add(out, blk(il, "nextn.enorm.weight"), {n_embd}, SynthInit::kOnes);
      add(out, blk(il, "nextn.hnorm.weight"), {n_embd}, SynthInit::kOnes);
      add(out, blk(il, "nextn.shared_head_norm.weight"), {n_embd}, SynthInit::kOnes);
      add(out, blk(il, "nextn.shared_head_head.weight"), {n_embd, n_vocab});
    }
    add(out, blk(il, "ffn_norm.weight"), {n_embd}, SynthInit::kOnes);
    if (il < n_dense || n_expert == 0) {
      add(out, blk(il, "ffn_gate.weight"), {n_embd, n_ff});
      add(out, blk(il, "ffn_up.weight"), {n_embd, n_ff});
      add(out, blk(il, "ffn_down.weight"), {n_ff, n_embd});
      continue;
    }
    add(out, blk(il, "ffn_gate_inp.weight"), {n_embd, n_expert});
    if (gating == 2) add(out, blk(il, "exp_probs_b.bias"), {n_expert});
    add(out, blk(il, "ffn_gate_exps.weight"), {n_embd, n_ff_exp, n_expert});
    add(out, blk(il, "ffn_up_exps.weight"), {n_embd, n_ff_exp, n_expert});
    add(out, blk(il, "ffn_down_exps.weight"), {n_ff_exp, n_embd, n_expert});
    if (n_shared > 0) {
      add(out, blk(il, "ffn_gate_shexp.weight"), {n_embd, n_ff_exp * n_shared});
      add(out, blk(il, "ffn_up_shexp.weight"), {n_embd, n_ff_exp * n_shared});
      add(out, blk(il, "ffn_down_shexp.weight"), {n_ff_exp * n_shared, n_embd});
    }
  }
  add(out, "output_norm.weight", {n_embd}, SynthInit::kOnes);
  add(out, "output.weight", {n_embd, n_vocab});
  return Status::ok();
}

// deepseek4 (SPEC-deepseek32-deepseek4.md 3.2); the per-block compress ratios come from the
// finalized deepseek4.attention.compress_ratios.
Status v4_tensors(Hp& hp, std::vector<SynthTensor>* out) {
  const int64_t E = hp.get("embedding_length", 0, 1, kMaxDim);
  const int64_t n_layer = hp.get("block_count", 0, 1, 4096);
  const int64_t H = hp.get("attention.head_count", 0, 1, 4096);
  const int64_t D = hp.get("attention.key_length", 0, 2, 65536);
  const int64_t V = hp.get("vocab_size", 0, 1, int64_t{1} << 24);
  const int64_t ql = hp.get("attention.q_lora_rank", 0, 1, kMaxDim);
  const int64_t G = hp.get("attention.output_group_count", 0, 1, H);
  const int64_t O = hp.get("attention.output_lora_rank", 0, 1, kMaxDim);
  const int64_t HI = hp.get("attention.indexer.head_count", 0, 1, 4096);
  const int64_t DI = hp.get("attention.indexer.key_length", 0, 2, 65536);
  const int64_t X = hp.get("expert_count", 0, 1, 4096);
  const int64_t K = hp.get("expert_used_count", 0, 1, X);
  const int64_t S = hp.get("expert_shared_count", 0, 0, 64);
  const int64_t Fe = hp.get("expert_feed_forward_length", 0, 1, kMaxDim);
  const int64_t n_hash = hp.get("hash_layer_count", 0, 0, n_layer);
  const int64_t hc = hp.get("hyper_connection.count", 4, 4, 4);
  DS_RETURN_IF_ERROR(hp.status);
  if (H % G != 0) return Status::error("deepseek4.attention.output_group_count must divide head_count");
  const GgufValue* ratios = hp.w.find("deepseek4.attention.compress_ratios");
  if (!ratios || ratios->arr_int.size() < static_cast<size_t>(n_layer)) {
    return Status::error("deepseek4.attention.compress_ratios must have block_count entries");
  }
  const int64_t nmix = (2 + hc) * hc;
  add(out, "token_embd.weight", {E, V});
  for (int64_t il = 0; il < n_layer; ++il) {
    const int64_t r = ratios->arr_int[static_cast<size_t>(il)];
    add(out, blk(il, "attn_norm.weight"), {E}, SynthInit::kOnes);
    add(out, blk(il, "attn_sinks.weight"), {H});
    add(out, blk(il, "attn_q_a.weight"), {E, ql});
    add(out, blk(il, "attn_q_a_norm.weight"), {ql}, SynthInit::kOnes);
    add(out, blk(il, "attn_q_b.weight"), {ql, H * D});
    add(out, blk(il, "attn_kv.weight"), {E, D});
    add(out, blk(il, "attn_kv_a_norm.weight"), {D}, SynthInit::kOnes);
    add(out, blk(il, "attn_output_a.weight"), {H * D / G, O * G});
    add(out, blk(il, "attn_output_b.weight"), {G * O, E});
    for (const char* sub : {"attn", "ffn"}) {
      const std::string p = std::string("hc_") + sub;
      add(out, blk(il, (p + "_fn.weight").c_str()), {hc * E, nmix});
      add(out, blk(il, (p + "_base.weight").c_str()), {nmix});
      add(out, blk(il, (p + "_scale.weight").c_str()), {3}, SynthInit::kOnes);
    }
    if (r != 0) {
      const int64_t c = r == 4 ? 2 : 1;
      add(out, blk(il, "attn_compressor_kv.weight"), {E, c * D});
      add(out, blk(il, "attn_compressor_gate.weight"), {E, c * D});
      add(out, blk(il, "attn_compressor_ape.weight"), {c * D, r});
      add(out, blk(il, "attn_compressor_norm.weight"), {D}, SynthInit::kOnes);
    }
    if (r == 4) {
      add(out, blk(il, "indexer.attn_q_b.weight"), {ql, HI * DI});
      add(out, blk(il, "indexer.proj.weight"), {E, HI});
      add(out, blk(il, "indexer_compressor_kv.weight"), {E, 2 * DI});
      add(out, blk(il, "indexer_compressor_gate.weight"), {E, 2 * DI});
      add(out, blk(il, "indexer_compressor_ape.weight"), {2 * DI, 4});
      add(out, blk(il, "indexer_compressor_norm.weight"), {DI}, SynthInit::kOnes);
    }
    add(out, blk(il, "ffn_norm.weight"), {E}, SynthInit::kOnes);
    add(out, blk(il, "ffn_gate_inp.weight"), {E, X});
    if (il < n_hash) {
      add(out, blk(il, "ffn_gate_tid2eid.weight"), {K, V}, SynthInit::kExpertIds);
    } else {
      add(out, blk(il, "exp_probs_b.bias"), {X});
    }
    add(out, blk(il, "ffn_gate_exps.weight"), {E, Fe, X});
    add(out, blk(il, "ffn_up_exps.weight"), {E, Fe, X});
    add(out, blk(il, "ffn_down_exps.weight"), {Fe, E, X});
    if (S > 0) {
      add(out, blk(il, "ffn_gate_shexp.weight"), {E, Fe * S});
      add(out, blk(il, "ffn_up_shexp.weight"), {E, Fe * S});
      add(out, blk(il, "ffn_down_shexp.weight"), {Fe * S, E});
    }
  }
  add(out, "output_hc_fn.weight", {hc * E, hc});
  add(out, "output_hc_base.weight", {hc});
  add(out, "output_hc_scale.weight", {1}, SynthInit::kOnes);
  add(out, "output_norm.weight", {E}, SynthInit::kOnes);
  add(out, "output.weight", {E, V});
  return Status::ok();
}

}  // namespace

Status synth_finalize_metadata(GgufWriter* w, int64_t n_vocab) {
  const GgufValue* a = w->find("general.architecture");
  if (!a) return Status::error("no general.architecture");
  const std::string arch = a->str;
  w->set(arch + ".vocab_size", gguf_u32(static_cast<uint32_t>(n_vocab)));
  if (arch == "deepseek2" || arch == "deepseek32") {
    const int64_t kv_lora = synth_int(*w, arch + ".attention.kv_lora_rank", 0);
    const int64_t n_rope = synth_int(*w, arch + ".rope.dimension_count", 0);
    if (kv_lora <= 0 || n_rope <= 0 || kv_lora > kMaxDim || n_rope > 65536) {
      return Status::error(arch + ".attention.kv_lora_rank and rope.dimension_count must be positive");
    }
    w->set(arch + ".attention.head_count_kv", gguf_u32(1));  // MLA layout (SPEC.md)
    w->set(arch + ".attention.key_length", gguf_u32(static_cast<uint32_t>(kv_lora + n_rope)));
    w->set(arch + ".attention.value_length", gguf_u32(static_cast<uint32_t>(kv_lora)));
  }
  if (arch == "deepseek4") {
    // The real models' per-block pattern at the final block count: blocks 0 and 1 at the
    // shape's lead ratio (V4-Flash 0, V4 128), then ratio 4 and 128 alternating (SPEC 3.1);
    // SwiGLU limit 10 everywhere.
    const int64_t n_layer = synth_int(*w, "deepseek4.block_count", 0);
    if (n_layer < 1 || n_layer > 4096) return Status::error("deepseek4.block_count must be in [1, 4096]");
    const GgufValue* shape_ratios = w->find("deepseek4.attention.compress_ratios");
    const int32_t lead =
        shape_ratios && !shape_ratios->arr_int.empty() ? static_cast<int32_t>(shape_ratios->arr_int[0]) : 0;
    std::vector<int32_t> ratios;
    for (int64_t il = 0; il < n_layer; ++il) ratios.push_back(il < 2 ? lead : (il % 2 == 0 ? 4 : 128));
    w->set("deepseek4.attention.compress_ratios", gguf_arr_i32(ratios));
    const std::vector<float> clamp(static_cast<size_t>(n_layer), 10.0f);
    w->set("deepseek4.swiglu_clamp_exp", gguf_arr_f32(clamp));
    w->set("deepseek4.swiglu_clamp_shexp", gguf_arr_f32(clamp));
    const int64_t E = synth_int(*w, "deepseek4.embedding_length", 0);
    w->set("deepseek4.embedding_length_out", gguf_u32(static_cast<uint32_t>(4 * E)));
    if (synth_int(*w, "deepseek4.hash_layer_count", 0) > n_layer) {
      w->set("deepseek4.hash_layer_count", gguf_u32(static_cast<uint32_t>(n_layer)));
    }
  }
  return Status::ok();
}

Result<std::vector<SynthTensor>> synth_tensors(const GgufWriter& w, bool rope_freqs) {
  const GgufValue* a = w.find("general.architecture");
  if (!a) return Status::error("no general.architecture");
  Hp hp{w, a->str, Status::ok()};
  std::vector<SynthTensor> out;
  Status s;
  const bool dense_attn = a->str == "llama" || a->str == "qwen2" || a->str == "qwen3" || a->str == "deepseek";
  if (dense_attn) {
    s = dense_tensors(hp, a->str == "qwen2", rope_freqs, &out);
  } else if (a->str == "deepseek2" || a->str == "deepseek32") {
    s = mla_tensors(hp, &out);
  } else if (a->str == "deepseek4") {
    s = v4_tensors(hp, &out);
  } else {
    s = Status::error("unknown architecture '" + a->str + "'");
  }
  if (!s.is_ok()) return s;
  return out;
}

}  // namespace ds::cli
