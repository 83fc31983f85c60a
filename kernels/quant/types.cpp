#include "kernels/quant/types.h"

#include <cctype>
#include <cstring>
#include <string>

#include "kernels/quant/blocks.h"

namespace ds {

GgmlTypeTraits ggml_type_traits(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: return {"F32", 1, 4};
    case GgmlType::F16: return {"F16", 1, 2};
    case GgmlType::BF16: return {"BF16", 1, 2};
    case GgmlType::Q4_0: return {"Q4_0", kQK4_0, sizeof(BlockQ4_0)};
    case GgmlType::Q4_1: return {"Q4_1", kQK4_1, sizeof(BlockQ4_1)};
    case GgmlType::Q5_0: return {"Q5_0", kQK5_0, sizeof(BlockQ5_0)};
    case GgmlType::Q5_1: return {"Q5_1", kQK5_1, sizeof(BlockQ5_1)};
    case GgmlType::Q8_0: return {"Q8_0", kQK8_0, sizeof(BlockQ8_0)};
    case GgmlType::Q8_1: return {"Q8_1", kQK8_1, sizeof(BlockQ8_1)};
    case GgmlType::Q2_K: return {"Q2_K", kQK_K, sizeof(BlockQ2_K)};
    case GgmlType::Q3_K: return {"Q3_K", kQK_K, sizeof(BlockQ3_K)};
    case GgmlType::Q4_K: return {"Q4_K", kQK_K, sizeof(BlockQ4_K)};
    case GgmlType::Q5_K: return {"Q5_K", kQK_K, sizeof(BlockQ5_K)};
    case GgmlType::Q6_K: return {"Q6_K", kQK_K, sizeof(BlockQ6_K)};
    case GgmlType::Q8_K: return {"Q8_K", kQK_K, sizeof(BlockQ8_K)};
    case GgmlType::I32: return {"I32", 1, 4};
  }
  return {nullptr, 0, 0};
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

}  // namespace ds
