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
//   - the i-quant mixtures, named after their main type (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
//     IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), follow the reference's presets
//     (../shared/SPEC-iquants.md, "What llama-quantize writes") except that the main type is
//     the named one: the output head gets Q5_K under IQ1_*/IQ2_*/IQ3_XXS and Q6_K otherwise;
//     token_embd gets Q2_K under IQ1_*, IQ2_XXS, IQ2_XS and IQ3_S under IQ2_S, IQ3_XXS; in MoE
//     models attn_output gets IQ2_XXS under IQ1_* and IQ3_S under IQ2_S, IQ3_XXS; the legacy
//     attn_kv_b gets Q4_K under IQ1_*/IQ2_*;
//   - MXFP4_MOE (alias MXFP4): every 3-D tensor (the experts, and DeepSeek's per-head
//     attn_k_b / attn_v_b) MXFP4, every other matrix Q8_0;
//   - rows not a multiple of 256 fall back Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
//     Q2_K/Q3_K -> Q4_0, the 256-element i-quants -> IQ4_NL, and rows not a multiple of 32
//     to F16.
// Per-tensor overrides (--tensor-type PATTERN=TYPE) replace the mixture's choice for every
// matrix whose name contains PATTERN (the first matching override wins), with the same
// row-length fall-backs.
#pragma once
#include <cstdint>
#include <string>

#include "ds/status.h"
#include <string_view>
#include <vector>

#include "kernels/quant/types.h"

namespace ds::cli {

enum class QuantMix {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K_M,
  kQ5_K_S,
  kQ3_K_M,
  kQ2_K,
  kIQ1_S,
  kIQ1_M,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ3_XXS,
  kIQ3_S,
  kIQ4_NL,
  kIQ4_XS,
  kMXFP4_MOE,
};

// "Q4_K_M", "q4_k_m", "F16", ...; false when unknown.
bool parse_quant_mix(std::string_view name, QuantMix* out);
const char* quant_mix_name(QuantMix m);
const char* quant_mix_names();  // for usage lines: "Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, ..."
// general.file_type (llama_ftype) value of a mixture.
uint32_t quant_mix_file_type(QuantMix m);
// True when ds-cli quantize can write every type the mixture uses (the grid i-quants
// IQ1_*, IQ2_*, IQ3_* are read and synthesized, not quantized).
bool quant_mix_quantizable(QuantMix m);

// --tensor-type PATTERN=TYPE: matrices whose name contains pattern get type.
struct TypeOverride {
  std::string pattern;
  GgmlType type;
};
// Parses "ffn_down_exps=IQ2_XXS"; a usage error when malformed or TYPE unknown.
Status parse_type_override(std::string_view arg, TypeOverride* out);

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

GgmlType choose_tensor_type(QuantMix mix, const MixTensor& t, const MixModel& m,
                            const std::vector<TypeOverride>& overrides = {});

}  // namespace ds::cli
