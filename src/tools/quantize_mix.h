// Quantization mixtures: which block type each tensor gets for a file type users name
// (Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, Q4_0, or the plain F16/BF16/F32 conversions). Shared by
// `ds-cli quantize` and `ds-cli synth`. The rules follow what the GGUF ecosystem's
// quantizer does for these names (checked against ../shared/refdata, which it made):
//   - 1-D tensors (norms, biases, rope_freqs, exp_probs_b) and the MoE router
//     ffn_gate_inp stay F32;
//   - the output head (or token_embd when the head is tied) gets Q6_K, except under Q8_0;
//   - Q4_K_M: Q6_K for attn_v and ffn_down* in the "more bits" layers (the first and
//     last eighth, and every third in between);
//   - both K mixtures: models with 8 experts get Q5_K attn_output and Q8_0 attn_v, and the
//     legacy MLA attn_kv_b gets Q8_0 (as in ../shared/refdata/tiny-dsv2-legacy-Q4_K_M);
//   - Q3_K_M and Q2_K are this project's mixtures in the same spirit (the ecosystem's
//     per-tensor rules for them have more cases): Q3_K_M gives attn_v and ffn_down Q5_K in
//     the "more bits" layers and Q4_K elsewhere, attn_output Q4_K; Q2_K gives attn_v Q4_K
//     and ffn_down Q3_K in the "more bits" layers;
//   - the K mixtures also get the 8-expert and attn_kv_b rules above;
//   - rows not a multiple of 256 fall back Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
//     Q2_K/Q3_K -> Q4_0, and rows not a multiple of 32 to F16.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/quant/types.h"

namespace ds::cli {

enum class QuantMix { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K_M, kQ5_K_S, kQ3_K_M, kQ2_K };

// "Q4_K_M", "q4_k_m", "F16", ...; false when unknown.
bool parse_quant_mix(std::string_view name, QuantMix* out);
const char* quant_mix_name(QuantMix m);
const char* quant_mix_names();  // for usage lines: "Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, ..."
// general.file_type (llama_ftype) value of a mixture.
uint32_t quant_mix_file_type(QuantMix m);

struct MixModel {
  int64_t n_layer = 0;     // <arch>.block_count
  int64_t n_expert = 0;    // <arch>.expert_count (0 for dense models)
  bool has_output = true;  // false: token_embd doubles as the output head
};

struct MixTensor {
  std::string_view name;
  uint32_t n_dims = 1;
  const int64_t* ne = nullptr;  // [n_dims]
};

GgmlType choose_tensor_type(QuantMix mix, const MixTensor& t, const MixModel& m);

}  // namespace ds::cli
