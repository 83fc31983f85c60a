// The GGUF tensor element types (ggml type ids), their block sizes and byte sizes.
// Ids and sizes are bit-exact facts of the format (../shared/SPEC.md, "Block formats";
// ../shared/SPEC-iquants.md for the i-quants and MXFP4).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ds {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I32 = 26,  // integer tables (deepseek4 ffn_gate_tid2eid); never a matmul operand
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;  // nullptr for ids this project does not know
  int block_size;    // elements per block
  int type_size;     // bytes per block
};

// Traits of a raw type id from a file; .name == nullptr when the id is unknown.
GgmlTypeTraits ggml_type_traits(uint32_t id);
static inline GgmlTypeTraits ggml_type_traits(GgmlType t) {
  return ggml_type_traits(static_cast<uint32_t>(t));
}
static inline bool ggml_type_known(uint32_t id) {
  return ggml_type_traits(id).name != nullptr;
}
static inline const char* ggml_type_name(GgmlType t) {
  return ggml_type_traits(t).name;
}
// The tensor types a model file may use, comma-separated in id order ("F32, F16, Q4_0, ...").
std::string ggml_supported_type_names();
// What an id this project does not read is, for error messages ("TQ1_0 (ternary)", "an
// ik_llama.cpp-only type such as IQ4_K"); "" when nothing is known about it.
const char* ggml_unsupported_type_hint(uint32_t id);
// True for the i-quant and MXFP4 types (ids 16-23, 29, 39).
bool ggml_type_is_iquant(GgmlType t);
// Parses "Q4_K", "q4_k", "F16", "IQ2_XXS", "MXFP4", ...; returns false when unknown.
bool ggml_type_from_name(const char* name, GgmlType* out);

// Bytes of one row of n elements (n must be a multiple of the block size).
static inline size_t ggml_row_size(GgmlType t, int64_t n) {
  auto tr = ggml_type_traits(t);
  return static_cast<size_t>(n / tr.block_size) * static_cast<size_t>(tr.type_size);
}

}  // namespace ds
