#include "kernels/quant/types.h"

#include <cctype>
#include <cstring>
#include <string>

#include "kernels/quant/blocks.h"

namespace ds {

GgmlTypeTraits ggml_type_traits(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32:
      return {"F32", 1, 4};
    case GgmlType::F16:
      return {"F16", 1, 2};
    case GgmlType::BF16:
      return {"BF16", 1, 2};
    case GgmlType::Q4_0:
      return {"Q4_0", kQK4_0, sizeof(BlockQ4_0)};
    case GgmlType::Q4_1:
      return {"Q4_1", kQK4_1, sizeof(BlockQ4_1)};
    case GgmlType::Q5_0:
      return {"Q5_0", kQK5_0, sizeof(BlockQ5_0)};
    case GgmlType::Q5_1:
      return {"Q5_1", kQK5_1, sizeof(BlockQ5_1)};
    case GgmlType::Q8_0:
      return {"Q8_0", kQK8_0, sizeof(BlockQ8_0)};
    case GgmlType::Q8_1:
      return {"Q8_1", kQK8_1, sizeof(BlockQ8_1)};
    case GgmlType::Q2_K:
      return {"Q2_K", kQK_K, sizeof(BlockQ2_K)};
    case GgmlType::Q3_K:
      return {"Q3_K", kQK_K, sizeof(BlockQ3_K)};
    case GgmlType::Q4_K:
      return {"Q4_K", kQK_K, sizeof(BlockQ4_K)};
    case GgmlType::Q5_K:
      return {"Q5_K", kQK_K, sizeof(BlockQ5_K)};
    case GgmlType::Q6_K:
      return {"Q6_K", kQK_K, sizeof(BlockQ6_K)};
    case GgmlType::Q8_K:
      return {"Q8_K", kQK_K, sizeof(BlockQ8_K)};
    case GgmlType::I32:
      return {"I32", 1, 4};
    case GgmlType::IQ2_XXS:
      return {"IQ2_XXS", kQK_K, sizeof(BlockIQ2_XXS)};
    case GgmlType::IQ2_XS:
      return {"IQ2_XS", kQK_K, sizeof(BlockIQ2_XS)};
    case GgmlType::IQ3_XXS:
      return {"IQ3_XXS", kQK_K, sizeof(BlockIQ3_XXS)};
    case GgmlType::IQ1_S:
      return {"IQ1_S", kQK_K, sizeof(BlockIQ1_S)};
    case GgmlType::IQ4_NL:
      return {"IQ4_NL", kQK4_NL, sizeof(BlockIQ4_NL)};
    case GgmlType::IQ3_S:
      return {"IQ3_S", kQK_K, sizeof(BlockIQ3_S)};
    case GgmlType::IQ2_S:
      return {"IQ2_S", kQK_K, sizeof(BlockIQ2_S)};
    case GgmlType::IQ4_XS:
      return {"IQ4_XS", kQK_K, sizeof(BlockIQ4_XS)};
    case GgmlType::IQ1_M:
      return {"IQ1_M", kQK_K, sizeof(BlockIQ1_M)};
    case GgmlType::MXFP4:
      return {"MXFP4", kQKMxfp4, sizeof(BlockMxfp4)};
  }
  return {nullptr, 0, 0};
}

std::string ggml_supported_type_names() {
  std::string s;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = ggml_type_traits(id);
    // Q8_1 and Q8_K are activation types: no weight kernel reads them.
    if (!tr.name || id == static_cast<uint32_t>(GgmlType::Q8_1) || id == static_cast<uint32_t>(GgmlType::Q8_K))
      continue;
    if (!s.empty()) s += ", ";
    s += tr.name;
  }
  return s;
}

bool ggml_type_is_iquant(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ1_S:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ3_S:
    case GgmlType::IQ2_S:
    case GgmlType::IQ4_XS:
    case GgmlType::IQ1_M:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

bool ggml_type_from_name(const char* name, GgmlType* out) {
  std::string up;
  for (const char* p = name; *p; ++p) up += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  for (uint32_t id = 0; id < 64; ++id) {
    auto tr = ggml_type_traits(id);
    if (tr.name && up == tr.name) {
      *out = static_cast<GgmlType>(id);
      return true;
    }
  }
  return false;
}

const char* ggml_unsupported_type_hint(uint32_t id) {
  // ../shared/SPEC-iquants.md, summary table notes; ik_llama.cpp numbers its own types from 137.
  switch (id) {
    case 24:
      return "I8";
    case 25:
      return "I16";
    case 26:
      return "I32";
    case 27:
      return "I64";
    case 28:
      return "F64";
    case 31:
    case 32:
    case 33:
    case 36:
    case 37:
    case 38:
      return "a retired repacked layout no current file may contain";
    case 34:
      return "TQ1_0 (ternary)";
    case 35:
      return "TQ2_0 (ternary)";
    case 40:
      return "NVFP4";
    case 41:
      return "Q1_0";
    case 42:
      return "Q2_0";
    default:
      return id >= 137 ? "an ik_llama.cpp-only type such as IQ4_K" : "";
  }
}

}  // namespace ds
