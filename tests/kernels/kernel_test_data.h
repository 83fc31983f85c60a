// Seeded test data for the kernel tests: random weight rows of any block type (random
// quant bits, sane fp16 scales), random float rows, and the ISAs this CPU can run.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace ds::test {

// Every weight type that has a dot product.
inline const std::vector<GgmlType>& weight_types() {
  static const std::vector<GgmlType> types = {
      GgmlType::F32,   GgmlType::F16,     GgmlType::BF16,   GgmlType::Q4_0,   GgmlType::Q4_1,    GgmlType::Q5_0,
      GgmlType::Q5_1,  GgmlType::Q8_0,    GgmlType::Q2_K,   GgmlType::Q3_K,   GgmlType::Q4_K,    GgmlType::Q5_K,
      GgmlType::Q6_K,  GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,  GgmlType::IQ3_XXS, GgmlType::IQ3_S,
      GgmlType::IQ1_S, GgmlType::IQ1_M,   GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
  return types;
}

// The i-quant and MXFP4 types (ggml_type_is_iquant), in weight_types() order.
inline std::vector<GgmlType> iquant_types() {
  std::vector<GgmlType> out;
  for (GgmlType t : weight_types())
    if (ggml_type_is_iquant(t)) out.push_back(t);
  return out;
}

// The kernel tables usable on this machine (always includes the reference; with AVX-512,
// also the table a CPU without AVX512_BF16 gets).
std::vector<const KernelTable*> available_tables();
// "ref", "avx2", "avx512", "avx512-no-bf16", "amx": for failure messages.
const char* table_name(const KernelTable& kt);

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f);

// n_rows rows of n elements of type t: random quant bits, scales chosen so that every
// element is O(0.1). Rows are contiguous (stride ggml_row_size(t, n)).
std::vector<uint8_t> random_weights(std::mt19937& rng, GgmlType t, int64_t n, int64_t n_rows);

// Sets the scale of every block of the quantized rows w (type t) to one drawn from the
// format's extremes: for half scales +-65504, the smallest normal and subnormal halves and
// 0; for MXFP4 the exponents 0, 1, 2, 127, 128 and 254.
void set_extreme_scales(std::mt19937& rng, GgmlType t, std::vector<uint8_t>& w);

// Sets every byte of the quantized rows w (type t, blocks back to back) that is not an
// fp16 scale field to fill: the extreme quants (and K-quant scales) for overflow checks.
void fill_quants(GgmlType t, std::vector<uint8_t>& w, uint8_t fill);

// n_rows activation rows of n floats quantized to vec_dot_type(wtype) by table kt.
std::vector<uint8_t> quantize_rows(const KernelTable& kt, GgmlType wtype, const std::vector<float>& x, int64_t n,
                                   int64_t n_rows);

// sum |w_i * a_i| over the dequantized rows, in double: the scale of a dot product's
// rounding error.
double abs_dot(GgmlType wtype, const void* w, const void* act, int64_t n);

}  // namespace ds::test
