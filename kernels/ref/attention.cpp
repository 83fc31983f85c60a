// Reference attention: flash attention (GQA/MHA) and DeepSeek's absorbed MLA over a paged
// KV cache. Both walk the context in tiles of kTile positions with an online softmax
// (running max m, running denominator l, rescaled accumulator), never materializing the
// full score row; query t sees KV positions [0, q_pos[t]] (causal). KV rows of type F16,
// BF16 or Q8_0 are converted to float before use; scores are dot products in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/quant/fp16.h"
#include "kernels/quant/act_quant.h"
#include "kernels/ref/ref.h"

namespace ds::ref {
namespace {

constexpr int kTile = 64;

// Online softmax state for one (query, head): out = sum_j p_j v_j / sum_j p_j.
struct OnlineSoftmax {
  float m = -INFINITY;
  float l = 0.0f;
  std::vector<float> acc;

  explicit OnlineSoftmax(int d) : acc(static_cast<size_t>(d), 0.0f) {}
  // Starts a tile whose largest score is tile_max: rescale what was accumulated so far.
  void begin_tile(float tile_max) {
    const float m_new = std::max(m, tile_max);
    const float corr = std::exp(m - m_new);  // 0 for the first tile (m = -inf)
    l *= corr;
    for (float& a : acc) a *= corr;
    m = m_new;
  }
  void add(float score, const float* v) {
    const float p = std::exp(score - m);
    l += p;
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += p * v[i];
  }
  void finish(float* out) const {
    const float inv = 1.0f / l;
    for (size_t i = 0; i < acc.size(); ++i) out[i] = acc[i] * inv;
  }
};

float dot_f(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return static_cast<float>(s);
}

}  // namespace

void load_kv(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case GgmlType::BF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(b[i / 32].d) * static_cast<float>(b[i / 32].qs[i % 32]);
      return;
    }
    default:
      return;
  }
}

void store_kv(GgmlType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case GgmlType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16: {
      auto* h = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(x[i]);
      return;
    }
    case GgmlType::BF16: {
      auto* h = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
      return;
    }
    case GgmlType::Q8_0:
      quantize_row_q8_0(x, static_cast<BlockQ8_0*>(y), n);
      return;
    default:
      return;
  }
}

void flash_attn(const AttnArgs& a) {
  const int group = a.n_head / a.n_head_kv;
  std::vector<float> kbuf(static_cast<size_t>(a.d_k)), vbuf(static_cast<size_t>(a.d_v));
  float s[kTile];
  for (int64_t it = 0; it < a.n_q; ++it) {
    const int64_t n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
    for (int ih = a.head_begin; ih < a.head_end; ++ih) {
      const float* q = a.q + it * a.q_tok_stride + ih * a.q_head_stride;
      const size_t kv_head = static_cast<size_t>(ih / group);
      OnlineSoftmax os(a.d_v);
      if (a.sinks) {  // a sink: a logit with no value, in the denominator only
        os.m = a.sinks[ih];
        os.l = 1.0f;
      }
      for (int64_t j0 = 0; j0 < n_kv; j0 += kTile) {
        const int nt = static_cast<int>(std::min<int64_t>(kTile, n_kv - j0));
        float tile_max = -INFINITY;
        for (int j = 0; j < nt; ++j) {
          load_kv(a.k.type, kv_row(a.k, j0 + j) + kv_head * a.k.head_offset, kbuf.data(), a.d_k);
          s[j] = dot_f(q, kbuf.data(), a.d_k) * a.scale;
          tile_max = std::max(tile_max, s[j]);
        }
        os.begin_tile(tile_max);
        for (int j = 0; j < nt; ++j) {
          load_kv(a.v.type, kv_row(a.v, j0 + j) + kv_head * a.v.head_offset, vbuf.data(), a.d_v);
          os.add(s[j], vbuf.data());
        }
      }
      os.finish(a.out + it * a.out_tok_stride + ih * a.out_head_stride);
    }
  }
}

void mla_attn(const MlaArgs& a) {
  const int width = a.kv_lora + a.n_rope;
  std::vector<float> row(static_cast<size_t>(width));
  float s[kTile];
  for (int64_t it = 0; it < a.n_q; ++it) {
    const int64_t n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
    for (int ih = a.head_begin; ih < a.head_end; ++ih) {
      const float* q_abs = a.q_abs + it * a.q_tok_stride + ih * a.q_head_stride;
      const float* q_pe = a.q_pe + it * a.q_tok_stride + ih * a.q_head_stride;
      OnlineSoftmax os(a.kv_lora);
      for (int64_t j0 = 0; j0 < n_kv; j0 += kTile) {
        const int nt = static_cast<int>(std::min<int64_t>(kTile, n_kv - j0));
        float tile_max = -INFINITY;
        for (int j = 0; j < nt; ++j) {
          load_kv(a.kv.type, kv_row(a.kv, j0 + j), row.data(), width);
          s[j] = (dot_f(q_abs, row.data(), a.kv_lora) + dot_f(q_pe, row.data() + a.kv_lora, a.n_rope)) * a.scale;
          tile_max = std::max(tile_max, s[j]);
        }
        os.begin_tile(tile_max);
        for (int j = 0; j < nt; ++j) {
          load_kv(a.kv.type, kv_row(a.kv, j0 + j), row.data(), a.kv_lora);
          os.add(s[j], row.data());
        }
      }
      os.finish(a.out + it * a.out_tok_stride + ih * a.out_head_stride);
    }
  }
}

}  // namespace ds::ref
