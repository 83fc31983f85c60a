// Model hyper-parameters, read from explicit GGUF keys (../shared/SPEC.md "Architectures").
// Design: one flat struct for all architectures; fields that an architecture does not
// use stay at their defaults. Nothing is inferred from the layer count or from tensor
// shapes: a missing required key is a load error that names the key. The deepseek2 file
// layout (MLA split k_b/v_b versus legacy attn_kv_b) is decided by the presence of the
// `*_mla` keys, as SPEC.md describes, and then confirmed by the tensors at weight load.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ds/status.h"
#include "kernels/kernels.h"

namespace ds {

class GgufFile;

enum class Arch { kLlama, kQwen2, kDeepseek2, kDeepseek32, kDeepseek, kQwen3, kDeepseek4 };
enum class RopeScaling { kNone, kLinear, kYarn };

struct HParams {
  Arch arch = Arch::kLlama;
  std::string arch_name;  // general.architecture
  std::string name;       // general.name

  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int n_layer = 0;
  int64_t n_ff = 0;  // dense FFN width
  int n_head = 0;
  int n_head_kv = 0;
  int64_t n_embd_head_k = 0;  // key_length (per head)
  int64_t n_embd_head_v = 0;  // value_length (per head)
  int n_rot = 0;              // rope.dimension_count
  float norm_eps = 1e-6f;

  // RoPE (SPEC.md deepseek2 step 4 for YaRN; linear for deepseek-coder).
  float rope_base = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;
  int n_ctx_orig = 0;
  float yarn_log_mul = 0.0f;      // [YARN_LOG_MUL] 0.1 x mscale_all_dim
  float rope_attn_factor = 1.0f;  // qwen3: rope.scaling.attn_factor (YaRN cos/sin magnitude)

  // deepseek2 (MLA and MoE) and deepseek (MoE only: the V1 MoE keeps llama attention).
  int n_layer_dense_lead = 0;
  int64_t q_lora = 0;  // 0: attn_q instead of attn_q_a/attn_q_b
  int64_t kv_lora = 0;
  int64_t n_nope = 0;       // per-head non-rotated key width
  int64_t n_v = 0;          // per-head value width
  bool mla_legacy = false;  // attn_kv_b layout (no *_mla keys)
  int n_expert = 0;
  int n_expert_used = 0;
  int n_expert_shared = 0;
  int64_t n_ff_exp = 0;
  float expert_weights_scale = 1.0f;
  bool expert_weights_norm = false;
  MoeGating gating = MoeGating::kSoftmax;
  int n_group = 1;
  int n_group_used = 1;

  // deepseek4 only (../shared/SPEC-deepseek32-deepseek4.md section 3.1). n_layer counts the
  // trunk blocks; MTP blocks stored after them (n_nextn) are not part of the forward.
  int n_nextn = 0;
  int n_hc = 1;      // hyper-connection residual streams (4)
  int hc_iters = 0;  // Sinkhorn iterations
  float hc_eps = 0.0f;
  int n_swa = 0;                    // raw sliding window
  int n_out_group = 0;              // grouped output LoRA: groups
  int64_t out_lora = 0;             //   and rank per group
  std::vector<int> compress_ratio;  // per trunk block: 0, 4 (CSA + indexer) or 128 (HCA)
  int n_hash_layer = 0;             // first blocks routed by token id (ffn_gate_tid2eid)
  float compress_rope_base = 0.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  std::vector<float> swiglu_clamp_exp;  // per trunk block; <= 1e-6: no clamp
  std::vector<float> swiglu_clamp_shexp;

  // deepseek32 (../shared/SPEC-deepseek32-deepseek4.md 2.1): n_layer counts the trunk; the
  // n_nextn MTP blocks stored after it (n_nextn above) are never part of the forward.
  // The lightning indexer, deepseek32 and deepseek4's CSA blocks (where k counts compressed
  // rows): attention.indexer.*
  int n_idx_head = 0;     // head_count (H_I)
  int64_t n_idx_dim = 0;  // key_length (D_I)
  int idx_top_k = 0;      // top_k

  // deepseek2 and deepseek32 share MLA attention and MoE routing.
  bool is_mla() const { return arch == Arch::kDeepseek2 || arch == Arch::kDeepseek32; }
  bool is_moe_layer(int il) const {
    return arch == Arch::kDeepseek4 || ((is_mla() || arch == Arch::kDeepseek) && il >= n_layer_dense_lead);
  }
  // Rope parameters shared by every layer (kernels.h RopeParams).
  RopeParams rope_params(const float* freq_factors) const;
  // kq_scale (SPEC.md: deepseek2 uses mscale^2 / sqrt(nope + rope)).
  float kq_scale() const;
};

// Reads and validates the keys of `file`'s architecture. Errors name the missing key.
Result<HParams> load_hparams(const GgufFile& file);

}  // namespace ds
