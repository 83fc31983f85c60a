#include "kernel_test_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/fp16.h"

namespace ds::test {
namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Byte offsets of the fp16 scale fields of one block: {d, second (dmin/m) or -1}.
std::pair<int, int> half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return {0, -1};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108, -1};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208, -1};
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return {0, -1};
    default:
      return {-1, -1};  // IQ1_M and MXFP4: see set_scale
  }
}

// Byte offset of IQ1_M's scale words: the block's half is their four top nibbles.
constexpr int kIq1mScales = 48;

// Sets a block's scale: the half fields of half_fields(t); IQ1_M's scattered half; for
// MXFP4 the exponent byte (the scale 2^(e-128) nearest |v|).
void set_scale(GgmlType t, uint8_t* blk, float v) {
  if (t == GgmlType::MXFP4) {
    const int e = 128 + static_cast<int>(std::lround(std::log2(std::max(std::fabs(v), 1e-30f))));
    blk[0] = static_cast<uint8_t>(std::clamp(e, 0, 254));
  } else if (t == GgmlType::IQ1_M) {
    const uint16_t h = f32_to_fp16(v);
    for (int k = 0; k < 4; ++k) {
      uint8_t& hi = blk[kIq1mScales + 2 * k + 1];
      hi = static_cast<uint8_t>((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
    }
  } else {
    put_half(blk + half_fields(t).first, v);
  }
}

// True for the bytes of a block that hold a scale (kept by fill_quants).
bool is_scale_byte(GgmlType t, int o) {
  if (t == GgmlType::MXFP4) return o == 0;
  if (t == GgmlType::IQ1_M) return false;  // the half shares bytes with sub-scales: fill_quants keeps its nibbles
  const auto [d_off, m_off] = half_fields(t);
  return o == d_off || o == d_off + 1 || (m_off >= 0 && (o == m_off || o == m_off + 1));
}

}  // namespace

std::vector<const KernelTable*> available_tables() {
  std::vector<const KernelTable*> out;
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    if (const KernelTable* kt = kernel_table(isa)) out.push_back(kt);
  if (const KernelTable* kt = kernel_table_without_bf16()) out.push_back(kt);
  return out;
}

const char* table_name(const KernelTable& kt) {
  return &kt == kernel_table_without_bf16() ? "avx512-no-bf16" : isa_name(kt.isa);
}

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> random_weights(std::mt19937& rng, GgmlType t, int64_t n, int64_t n_rows) {
  const size_t row = ggml_row_size(t, n);
  std::vector<uint8_t> out(row * static_cast<size_t>(n_rows));
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const std::vector<float> f = random_floats(rng, n * n_rows);
    for (size_t i = 0; i < f.size(); ++i) {
      if (t == GgmlType::F32) std::memcpy(&out[4 * i], &f[i], 4);
      const uint16_t h = t == GgmlType::F16 ? f32_to_fp16(f[i]) : f32_to_bf16(f[i]);
      if (t != GgmlType::F32) std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  const auto tr = ggml_type_traits(t);
  const int m_off = half_fields(t).second;
  std::uniform_real_distribution<float> scale(0.002f, 0.02f), sign(-1.0f, 1.0f);
  for (size_t ib = 0; ib < out.size() / static_cast<size_t>(tr.type_size); ++ib) {
    uint8_t* blk = out.data() + ib * static_cast<size_t>(tr.type_size);
    set_scale(t, blk, scale(rng) * (sign(rng) < 0 && tr.block_size == 32 ? -1.0f : 1.0f));
    if (m_off >= 0) put_half(blk + m_off, scale(rng) * (tr.block_size == 32 ? sign(rng) * 8.0f : 1.0f));
  }
  return out;
}

void fill_quants(GgmlType t, std::vector<uint8_t>& w, uint8_t fill) {
  const size_t size = static_cast<size_t>(ggml_type_traits(t).type_size);
  for (size_t i = 0; i < w.size(); ++i) {
    const int o = static_cast<int>(i % size);
    if (t == GgmlType::IQ1_M && o >= kIq1mScales && (o - kIq1mScales) % 2 == 1) {
      w[i] = static_cast<uint8_t>((w[i] & 0xF0) | (fill & 0x0F));  // keep the half's nibble
    } else if (!is_scale_byte(t, o)) {
      w[i] = fill;
    }
  }
}

void set_extreme_scales(std::mt19937& rng, GgmlType t, std::vector<uint8_t>& w) {
  const size_t size = static_cast<size_t>(ggml_type_traits(t).type_size);
  const float halves[] = {65504.0f, -65504.0f, 6.103515625e-05f, 5.9604645e-08f, 0.0f, 1.0f};
  const uint8_t exps[] = {0, 1, 2, 127, 128, 254};
  std::uniform_int_distribution<int> pick(0, 5);
  for (size_t off = 0; off + size <= w.size(); off += size) {
    uint8_t* blk = w.data() + off;
    if (t == GgmlType::MXFP4) {
      blk[0] = exps[pick(rng)];
    } else {
      set_scale(t, blk, halves[pick(rng)]);
    }
  }
}

std::vector<uint8_t> quantize_rows(const KernelTable& kt, GgmlType wtype, const std::vector<float>& x, int64_t n,
                                   int64_t n_rows) {
  const GgmlType at = vec_dot_type(wtype);
  const size_t row = ggml_row_size(at, n);
  std::vector<uint8_t> out(row * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) kt.quantize_act(at, x.data() + r * n, out.data() + r * row, n);
  return out;
}

double abs_dot(GgmlType wtype, const void* w, const void* act, int64_t n) {
  std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
  dequantize_row(wtype, w, fw.data(), n);
  dequantize_row(vec_dot_type(wtype), act, fa.data(), n);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(fw[i]) * fa[i]);
  return s;
}

}  // namespace ds::test
