// Mixture rules; see quantize_mix.h for the rules and where they come from.
#include "tools/quantize_mix.h"

#include <cctype>
#include <cstdio>
#include <string>

namespace ds::cli {
namespace {

struct MixInfo {
  QuantMix mix;
  const char* name;
  uint32_t file_type;  // llama_ftype
  GgmlType base;
};
constexpr MixInfo kMixes[] = {
    {QuantMix::kQ4_K_M, "Q4_K_M", 15, GgmlType::Q4_K},
    {QuantMix::kQ5_K_S, "Q5_K_S", 16, GgmlType::Q5_K},
    {QuantMix::kQ3_K_M, "Q3_K_M", 12, GgmlType::Q3_K},
    {QuantMix::kQ2_K, "Q2_K", 10, GgmlType::Q2_K},
    {QuantMix::kQ8_0, "Q8_0", 7, GgmlType::Q8_0},
    {QuantMix::kQ4_0, "Q4_0", 2, GgmlType::Q4_0},
    {QuantMix::kF16, "F16", 1, GgmlType::F16},
    {QuantMix::kBF16, "BF16", 32, GgmlType::BF16},
    {QuantMix::kF32, "F32", 0, GgmlType::F32},
    {QuantMix::kIQ1_S, "IQ1_S", 24, GgmlType::IQ1_S},
    {QuantMix::kIQ1_M, "IQ1_M", 31, GgmlType::IQ1_M},
    {QuantMix::kIQ2_XXS, "IQ2_XXS", 19, GgmlType::IQ2_XXS},
    {QuantMix::kIQ2_XS, "IQ2_XS", 20, GgmlType::IQ2_XS},
    {QuantMix::kIQ2_S, "IQ2_S", 28, GgmlType::IQ2_S},
    {QuantMix::kIQ3_XXS, "IQ3_XXS", 23, GgmlType::IQ3_XXS},
    {QuantMix::kIQ3_S, "IQ3_S", 26, GgmlType::IQ3_S},
    {QuantMix::kIQ4_NL, "IQ4_NL", 25, GgmlType::IQ4_NL},
    {QuantMix::kIQ4_XS, "IQ4_XS", 30, GgmlType::IQ4_XS},
    {QuantMix::kMXFP4_MOE, "MXFP4_MOE", 38, GgmlType::MXFP4},
};

const MixInfo& info(QuantMix m) {
  for (const auto& i : kMixes) {
    if (i.mix == m) return i;
  }
  return kMixes[0];
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Layer index from "blk.N.", or -1.
int64_t layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int64_t v = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) v = v * 10 + (name[i] - '0');
  return v;
}

// The ecosystem's "use more bits" layer pattern: first and last eighth, every third between.
bool use_more_bits(int64_t i_layer, int64_t n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

GgmlType fallback(GgmlType t, int64_t row) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  if (row % tr.block_size == 0) return t;
  GgmlType f = GgmlType::F16;
  switch (t) {
    case GgmlType::Q4_K:
      f = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      f = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      f = GgmlType::Q8_0;
      break;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      f = GgmlType::Q4_0;
      break;
    default:
      if (ggml_type_is_iquant(t)) f = GgmlType::IQ4_NL;
      break;
  }
  return row % ggml_type_traits(f).block_size == 0 ? f : GgmlType::F16;
}

}  // namespace

bool parse_quant_mix(std::string_view name, QuantMix* out) {
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up == "MXFP4") up = "MXFP4_MOE";
  for (const auto& i : kMixes) {
    if (up == i.name) {
      *out = i.mix;
      return true;
    }
  }
  return false;
}

const char* quant_mix_name(QuantMix m) {
  return info(m).name;
}
const char* quant_mix_names() {
  return "Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, Q4_0, F16, BF16, F32, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, "
         "IQ3_S, IQ4_NL, IQ4_XS, MXFP4_MOE (alias MXFP4)";
}
uint32_t quant_mix_file_type(QuantMix m) {
  return info(m).file_type;
}

bool quant_mix_quantizable(QuantMix m) {
  switch (m) {
    case QuantMix::kIQ1_S:
    case QuantMix::kIQ1_M:
    case QuantMix::kIQ2_XXS:
    case QuantMix::kIQ2_XS:
    case QuantMix::kIQ2_S:
    case QuantMix::kIQ3_XXS:
    case QuantMix::kIQ3_S:
      return false;
    default:
      return true;
  }
}

Status parse_type_override(std::string_view arg, TypeOverride* out) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size()) {
    return Status::invalid_argument("--tensor-type wants NAME=TYPE (e.g. ffn_down_exps=IQ2_XXS), got '" +
                                    std::string(arg) + "'");
  }
  const std::string type(arg.substr(eq + 1));
  if (!ggml_type_from_name(type.c_str(), &out->type) || out->type == GgmlType::Q8_1 || out->type == GgmlType::Q8_K) {
    return Status::invalid_argument("--tensor-type: unknown tensor type '" + type + "' (one of " +
                                    ggml_supported_type_names() + ")");
  }
  out->pattern = std::string(arg.substr(0, eq));
  return Status::ok();
}

namespace {

// The i-quant presets' special tensors (see quantize_mix.h); base otherwise.
GgmlType iquant_rule(QuantMix mix, GgmlType base, std::string_view name, const MixModel& m) {
  const bool iq1 = mix == QuantMix::kIQ1_S || mix == QuantMix::kIQ1_M;
  const bool iq2 = mix == QuantMix::kIQ2_XXS || mix == QuantMix::kIQ2_XS || mix == QuantMix::kIQ2_S;
  const bool low = iq1 || iq2 || mix == QuantMix::kIQ3_XXS;
  if (name == "output.weight" || (!m.has_output && name == "token_embd.weight")) {
    return low ? GgmlType::Q5_K : GgmlType::Q6_K;
  }
  if (name == "token_embd.weight") {
    if (iq1 || mix == QuantMix::kIQ2_XXS || mix == QuantMix::kIQ2_XS) return GgmlType::Q2_K;
    if (mix == QuantMix::kIQ2_S || mix == QuantMix::kIQ3_XXS) return GgmlType::IQ3_S;
    return base;
  }
  if (contains(name, "attn_output.weight") && m.n_expert > 0 && m.n_expert != 8) {
    if (iq1) return GgmlType::IQ2_XXS;
    if (mix == QuantMix::kIQ2_S || mix == QuantMix::kIQ3_XXS) return GgmlType::IQ3_S;
  }
  if (contains(name, "attn_kv_b.weight") && (iq1 || iq2) && m.n_expert >= 4) return GgmlType::Q4_K;
  return base;
}

GgmlType mixture_type(QuantMix mix, const MixTensor& t, const MixModel& m) {
  const std::string_view name = t.name;
  const GgmlType base = info(mix).base;
  if (mix == QuantMix::kF32 || mix == QuantMix::kF16 || mix == QuantMix::kBF16) return base;
  if (mix == QuantMix::kMXFP4_MOE) return t.n_dims >= 3 && t.ne[2] > 1 ? GgmlType::MXFP4 : GgmlType::Q8_0;
  if (ggml_type_is_iquant(base)) return iquant_rule(mix, base, name, m);

  GgmlType type = base;
  const bool k_mix =
      mix == QuantMix::kQ4_K_M || mix == QuantMix::kQ5_K_S || mix == QuantMix::kQ3_K_M || mix == QuantMix::kQ2_K;
  const int64_t il = layer_of(name);
  const bool more_bits = il >= 0 && use_more_bits(il, m.n_layer);
  if (name == "output.weight" || (!m.has_output && name == "token_embd.weight")) {
    if (mix != QuantMix::kQ8_0) type = GgmlType::Q6_K;
  } else if (contains(name, "attn_v.weight")) {
    if (mix == QuantMix::kQ4_K_M && more_bits) type = GgmlType::Q6_K;
    if (mix == QuantMix::kQ3_K_M) type = more_bits ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (mix == QuantMix::kQ2_K && more_bits) type = GgmlType::Q4_K;
    if (m.n_expert == 8 && k_mix) type = GgmlType::Q8_0;
  } else if (contains(name, "ffn_down")) {
    if (mix == QuantMix::kQ4_K_M && more_bits) type = GgmlType::Q6_K;
    if (mix == QuantMix::kQ3_K_M) type = more_bits ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (mix == QuantMix::kQ2_K && more_bits) type = GgmlType::Q3_K;
  } else if (contains(name, "attn_output.weight")) {
    if (mix == QuantMix::kQ3_K_M) type = GgmlType::Q4_K;
    if (m.n_expert == 8 && k_mix) type = GgmlType::Q5_K;
  } else if (contains(name, "attn_kv_b.weight")) {
    if (k_mix) type = GgmlType::Q8_0;
  }
  return type;
}

}  // namespace

GgmlType choose_tensor_type(QuantMix mix, const MixTensor& t, const MixModel& m,
                            const std::vector<TypeOverride>& overrides) {
  const std::string_view name = t.name;
  const bool matrix = t.n_dims >= 2 && t.ne[1] > 1;
  if (!matrix || contains(name, "ffn_gate_inp") || !contains(name, ".weight")) return GgmlType::F32;
  for (const TypeOverride& o : overrides) {
    if (contains(name, o.pattern)) return fallback(o.type, t.ne[0]);
  }
  return fallback(mixture_type(mix, t, m), t.ne[0]);
}

}  // namespace ds::cli
