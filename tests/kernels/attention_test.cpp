// Flash attention (GQA) and absorbed MLA, every available ISA, against naive attention:
// materialized scores, softmax and weighted sum in double over the same KV values (read
// back from the cache, so F16/BF16/Q8_0 caches are compared on equal terms). Contexts 1 to
// 4,096, one query and several (causal by position), paged blocks in shuffled order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernel_test_data.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

constexpr double kAttnRelTol = 1e-5;  // issue 4: within 1e-5 relative of naive attention
constexpr int kBlockSize = 16;        // KV page size (tokens), not a divisor of most contexts

// A paged KV cache of n_tok rows of `width` elements of type t, filled with random values.
struct PagedKv {
  GgmlType type;
  int64_t width;
  size_t row_bytes;
  std::vector<std::vector<uint8_t>> pages;
  std::vector<const uint8_t*> blocks;

  PagedKv(std::mt19937& rng, GgmlType t, int64_t n_tok, int64_t w) : type(t), width(w) {
    row_bytes = ggml_row_size(t, w) + 8;  // padded rows: row_stride != data width
    const int64_t n_pages = (n_tok + kBlockSize - 1) / kBlockSize;
    pages.resize(static_cast<size_t>(n_pages), std::vector<uint8_t>(row_bytes * kBlockSize));
    std::vector<size_t> order(pages.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) blocks.push_back(pages[i].data());
    for (int64_t j = 0; j < n_tok; ++j) {
      const auto x = random_floats(rng, w, -1.0f, 1.0f);
      ref::store_kv(t, x.data(), const_cast<uint8_t*>(row(j)), w);
    }
  }
  const uint8_t* row(int64_t j) const { return blocks[j / kBlockSize] + (j % kBlockSize) * row_bytes; }
  KvView view(size_t elem_offset, size_t head_offset) const {
    return {.type = type, .blocks = blocks.data(), .block_size = kBlockSize, .row_stride = row_bytes,
            .head_offset = head_offset, .elem_offset = elem_offset};
  }
  // Elements [off, off + n) of row j as doubles.
  std::vector<double> read(int64_t j, int64_t off, int64_t n) const {
    std::vector<float> f(static_cast<size_t>(width));
    ref::load_kv(type, row(j), f.data(), width);
    return {f.begin() + off, f.begin() + off + n};
  }
};

// softmax(scores) . values in double.
std::vector<double> naive_attend(const std::vector<double>& scores, const std::vector<std::vector<double>>& values) {
  const double m = *std::max_element(scores.begin(), scores.end());
  double den = 0.0;
  std::vector<double> out(values[0].size(), 0.0);
  for (size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scores[j] - m);
    den += p;
    for (size_t i = 0; i < out.size(); ++i) out[i] += p * values[j][i];
  }
  for (double& o : out) o /= den;
  return out;
}

double rel_err(const float* got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / den;
}

std::vector<int32_t> query_positions(int64_t ctx, int64_t n_q) {
  std::vector<int32_t> pos;
  for (int64_t i = std::max<int64_t>(0, ctx - n_q); i < ctx; ++i) pos.push_back(static_cast<int32_t>(i));
  return pos;
}

TEST(Attention, FlashAttnEqualsNaiveSoftmax) {
  const int n_head = 4, n_head_kv = 2, d_k = 64, d_v = 96;
  const int group = n_head / n_head_kv;
  std::mt19937 rng(21);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (int64_t ctx : {1, 2, 63, 64, 65, 333, 4096}) {
      if (ctx == 4096 && (t == GgmlType::BF16 || t == GgmlType::Q8_0)) continue;  // time; same code path as 333
      // Row layout: [K heads | V heads].
      const PagedKv kv(rng, t, ctx, n_head_kv * (d_k + d_v));
      const size_t k_bytes = ggml_row_size(t, n_head_kv * d_k);
      for (int64_t n_q : {1, 7}) {
        const auto pos = query_positions(ctx, n_q);
        const int64_t nq = static_cast<int64_t>(pos.size());
        const auto q = random_floats(rng, nq * n_head * d_k, -1.0f, 1.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d_k)) * 3.0f;  // sharp-ish softmax
        for (const KernelTable* kt : available_tables()) {
          std::vector<float> out(static_cast<size_t>(nq * n_head * d_v), NAN);
          const int h0 = n_q == 1 ? 1 : 0;  // also check a partial head range
          kt->flash_attn({.n_head = n_head, .n_head_kv = n_head_kv, .d_k = d_k, .d_v = d_v, .scale = scale,
                          .n_q = nq, .q = q.data(), .q_tok_stride = n_head * d_k, .q_head_stride = d_k,
                          .q_pos = pos.data(), .k = kv.view(0, ggml_row_size(t, d_k)),
                          .v = kv.view(k_bytes, ggml_row_size(t, d_v)), .out = out.data(),
                          .out_tok_stride = n_head * d_v, .out_head_stride = d_v, .head_begin = h0,
                          .head_end = n_head});
          for (int64_t it = 0; it < nq; ++it)
            for (int ih = 0; ih < n_head; ++ih) {
              const float* o = out.data() + (it * n_head + ih) * d_v;
              if (ih < h0) {
                EXPECT_TRUE(std::isnan(o[0])) << "head outside [head_begin, head_end) was written";
                continue;
              }
              const int kh = ih / group;
              std::vector<double> scores;
              std::vector<std::vector<double>> values;
              for (int64_t j = 0; j <= pos[static_cast<size_t>(it)]; ++j) {
                const auto k = kv.read(j, kh * d_k, d_k);
                double s = 0.0;
                for (int i = 0; i < d_k; ++i) s += q[static_cast<size_t>((it * n_head + ih) * d_k + i)] * k[i];
                scores.push_back(s * scale);
                values.push_back(kv.read(j, n_head_kv * d_k + kh * d_v, d_v));
              }
              const double err = rel_err(o, naive_attend(scores, values));
              ASSERT_LE(err, kAttnRelTol) << isa_name(kt->isa) << " " << ggml_type_name(t) << " ctx=" << ctx
                                          << " q=" << it << " head=" << ih;
            }
        }
      }
    }
}

TEST(Attention, MlaEqualsNaiveSoftmax) {
  const int n_head = 2, kv_lora = 512, n_rope = 64, width = kv_lora + n_rope;
  std::mt19937 rng(22);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (int64_t ctx : {1, 2, 65, 333, 4096}) {
      if (ctx == 4096 && (t == GgmlType::BF16 || t == GgmlType::Q8_0)) continue;  // time; same code path as 333
      const PagedKv kv(rng, t, ctx, width);
      for (int64_t n_q : {1, 5}) {
        const auto pos = query_positions(ctx, n_q);
        const int64_t nq = static_cast<int64_t>(pos.size());
        const int64_t qs = n_head * width;  // q row: per head [q_abs | q_pe]
        const auto q = random_floats(rng, nq * qs, -0.2f, 0.2f);
        const float scale = 0.3f;
        for (const KernelTable* kt : available_tables()) {
          std::vector<float> out(static_cast<size_t>(nq * n_head * kv_lora), NAN);
          kt->mla_attn({.n_head = n_head, .kv_lora = kv_lora, .n_rope = n_rope, .scale = scale, .n_q = nq,
                        .q_abs = q.data(), .q_pe = q.data() + kv_lora, .q_tok_stride = qs, .q_head_stride = width,
                        .q_pos = pos.data(), .kv = kv.view(0, 0), .out = out.data(),
                        .out_tok_stride = n_head * kv_lora, .out_head_stride = kv_lora, .head_begin = 0,
                        .head_end = n_head});
          for (int64_t it = 0; it < nq; ++it)
            for (int ih = 0; ih < n_head; ++ih) {
              const float* qh = q.data() + it * qs + ih * width;
              std::vector<double> scores;
              std::vector<std::vector<double>> values;
              for (int64_t j = 0; j <= pos[static_cast<size_t>(it)]; ++j) {
                auto row = kv.read(j, 0, width);
                double s = 0.0;
                for (int i = 0; i < width; ++i) s += qh[i] * row[static_cast<size_t>(i)];
                scores.push_back(s * scale);
                row.resize(kv_lora);
                values.push_back(std::move(row));
              }
              const double err = rel_err(out.data() + (it * n_head + ih) * kv_lora, naive_attend(scores, values));
              ASSERT_LE(err, kAttnRelTol) << isa_name(kt->isa) << " " << ggml_type_name(t) << " ctx=" << ctx
                                          << " q=" << it << " head=" << ih;
            }
        }
      }
    }
}

}  // namespace
}  // namespace ds::test
