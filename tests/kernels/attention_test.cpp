// Flash attention (GQA) and absorbed MLA, every available ISA, against naive attention:
// materialized scores, softmax and weighted sum in double over the same KV values (read
// back from the cache, so F16/BF16/Q8_0 caches are compared on equal terms). Contexts 1 to
// 4,096, one query and several (causal by position), paged blocks in shuffled order.
// Prefill chunks (several queries share each converted KV tile): chunks of 3 to 37
// queries, scattered and repeated positions, row tails, and bitwise independence of a
// query's output from the other queries and heads of its call [BATCH_INVARIANT]; attention
// sinks over picked (scattered) rows.
// Tables with attn_bf16_dot round q and the softmax weights to bf16 over a BF16 cache (GQA
// and MLA): there the naive side rounds q too, and the weights' rounding is allowed its bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "kernel_test_data.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

// The product's bar for attention: within 1e-5 relative of naive attention in double, the
// per-sub-layer bar of ../shared/refdata/README.md.
constexpr double kAttnRelTol = 1e-5;
constexpr int kBlockSize = 16;  // KV page size (tokens), not a divisor of most contexts

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
    return {.type = type,
            .blocks = blocks.data(),
            .block_size = kBlockSize,
            .row_stride = row_bytes,
            .head_offset = head_offset,
            .elem_offset = elem_offset};
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

// Whether this table's flash attention over a cache of type t rounds q and the softmax
// weights to bf16 (KernelTable::attn_bf16_dot).
// GQA and MLA alike (MLA's d_k is kv_lora + n_rope).
bool rounds_to_bf16(const KernelTable& kt, GgmlType t, int d_k) {
  return kt.attn_bf16_dot && t == GgmlType::BF16 && d_k % 2 == 0;
}

// x rounded to bf16, nearest even (finite x), written here rather than taken from the code
// under test.
double bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// The naive side of a table that rounds to bf16 (rounds_to_bf16): q was rounded before the
// scores; the softmax weights are rounded as the kernel rounds them, relative to the
// running maximum of its tiles of bf16_tile_rows(d_v) rows, the denominator summing them
// unrounded.
// The kernel's scores and exponentials are f32, so a weight within kNearMidpoint
// (relative) of a bf16 rounding midpoint may round the other way there: `slack` sums what
// each such weight could move the output (one bf16 unit of it times its |v|), and nothing
// else is allowed beyond the usual relative tolerance.
// Rows per tile of the kernel's bf16 path (pairs_tile_rows): 128, fewer where half of them
// times d_v (rounded up to 16 floats) outgrow 16 K floats: MLA's 512-wide V, 64 rows.
int bf16_tile_rows(size_t d_v) {
  const size_t ld = (d_v + 15) / 16 * 16;
  return static_cast<int>(std::min<size_t>(128, 2 * (16384 / ld) / 8 * 8));
}
constexpr double kNearMidpoint = 1e-5;
struct Bf16Naive {
  std::vector<double> out;
  double slack = 0.0;
};
Bf16Naive naive_attend_bf16(const std::vector<double>& scores, const std::vector<std::vector<double>>& values) {
  const size_t n = scores.size(), d = values[0].size();
  const size_t tile = static_cast<size_t>(bf16_tile_rows(d));
  const double m_final = *std::max_element(scores.begin(), scores.end());
  double den = 0.0;
  for (double sc : scores) den += std::exp(sc - m_final);
  Bf16Naive r;
  r.out.assign(d, 0.0);
  double m = -INFINITY;
  for (size_t t0 = 0; t0 < n; t0 += tile) {
    const size_t t1 = std::min(n, t0 + tile);
    for (size_t j = t0; j < t1; ++j) m = std::max(m, scores[j]);
    const double to_final = std::exp(m - m_final);
    for (size_t j = t0; j < t1; ++j) {
      const double e = std::exp(scores[j] - m);
      const double w = bf16_round(static_cast<float>(e));
      const double unit = std::ldexp(1.0, std::ilogb(e) - 7);     // bf16 spacing at e
      const double mid = std::floor(e / unit) * unit + unit / 2;  // the midpoint e lies nearest
      double vmax = 0.0;
      for (size_t i = 0; i < d; ++i) {
        r.out[i] += w * to_final * values[j][i] / den;
        vmax = std::max(vmax, std::fabs(values[j][i]));
      }
      if (std::fabs(e - mid) <= kNearMidpoint * e) r.slack += unit * to_final * vmax / den;
    }
  }
  return r;
}

// rel_err with `slack` of the largest difference allowed first.
double attn_err(const float* got, const std::vector<double>& want, double slack) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return std::max(0.0, num - slack) / den;
}

// naive_attend, or naive_attend_bf16 when the table rounds to bf16.
Bf16Naive naive_for(const std::vector<double>& scores, const std::vector<std::vector<double>>& values, bool b16) {
  if (b16) return naive_attend_bf16(scores, values);
  return {naive_attend(scores, values), 0.0};
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
          kt->flash_attn({.n_head = n_head,
                          .n_head_kv = n_head_kv,
                          .d_k = d_k,
                          .d_v = d_v,
                          .scale = scale,
                          .n_q = nq,
                          .q = q.data(),
                          .q_tok_stride = n_head * d_k,
                          .q_head_stride = d_k,
                          .q_pos = pos.data(),
                          .k = kv.view(0, ggml_row_size(t, d_k)),
                          .v = kv.view(k_bytes, ggml_row_size(t, d_v)),
                          .out = out.data(),
                          .out_tok_stride = n_head * d_v,
                          .out_head_stride = d_v,
                          .head_begin = h0,
                          .head_end = n_head});
          for (int64_t it = 0; it < nq; ++it)
            for (int ih = 0; ih < n_head; ++ih) {
              const float* o = out.data() + (it * n_head + ih) * d_v;
              if (ih < h0) {
                EXPECT_TRUE(std::isnan(o[0])) << "head outside [head_begin, head_end) was written";
                continue;
              }
              const int kh = ih / group;
              const bool b16 = rounds_to_bf16(*kt, t, d_k);
              std::vector<double> scores;
              std::vector<std::vector<double>> values;
              for (int64_t j = 0; j <= pos[static_cast<size_t>(it)]; ++j) {
                const auto k = kv.read(j, kh * d_k, d_k);
                double s = 0.0;
                for (int i = 0; i < d_k; ++i) {
                  const float qi = q[static_cast<size_t>((it * n_head + ih) * d_k + i)];
                  s += (b16 ? bf16_round(qi) : qi) * k[i];
                }
                scores.push_back(s * scale);
                values.push_back(kv.read(j, n_head_kv * d_k + kh * d_v, d_v));
              }
              const Bf16Naive want = naive_for(scores, values, b16);
              const double err = attn_err(o, want.out, want.slack);
              ASSERT_LE(err, kAttnRelTol)
                  << table_name(*kt) << " " << ggml_type_name(t) << " ctx=" << ctx << " q=" << it << " head=" << ih;
            }
        }
      }
    }
}

// Attention sinks (DeepSeek-V4): one KV head for all query heads with key = value = the
// row, read through a picked view (block size 1, a row pointer per candidate) at scattered
// rows, and per head a sink logit that enters the denominator only:
// out = sum_j e^(s_j - m) v_j / (sum_j e^(s_j - m) + e^(sink - m)). Sinks far above the
// scores (the output shrinks toward 0), far below (no effect) and in between; candidate
// counts within one tile and across several.
TEST(Attention, FlashAttnSinksEqualNaiveSoftmaxWithSink) {
  const int n_head = 6, d = 512;
  std::mt19937 rng(23);
  const float sinks[n_head] = {-30.0f, -1.0f, 0.0f, 0.5f, 2.0f, 12.0f};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (int n_c : {1, 5, 16, 17, 150}) {
      const PagedKv kv(rng, t, 2 * n_c + 3, d);
      std::vector<const uint8_t*> picked;
      std::vector<int64_t> ids;
      for (int c = 0; c < n_c; ++c) {  // every other row, backwards: not a contiguous run
        ids.push_back(2 * (n_c - 1 - c) + 1);
        picked.push_back(kv.row(ids.back()));
      }
      const KvView view{.type = t, .blocks = picked.data(), .block_size = 1, .row_stride = 0};
      const int32_t last = n_c - 1;
      const auto q = random_floats(rng, n_head * d, -0.1f, 0.1f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      for (const KernelTable* kt : available_tables()) {
        if (rounds_to_bf16(*kt, t, d)) continue;  // the bf16-rounding naive side has no sink form
        std::vector<float> out(static_cast<size_t>(n_head * d), NAN);
        kt->flash_attn({.n_head = n_head,
                        .n_head_kv = 1,
                        .d_k = d,
                        .d_v = d,
                        .scale = scale,
                        .n_q = 1,
                        .q = q.data(),
                        .q_tok_stride = n_head * d,
                        .q_head_stride = d,
                        .q_pos = &last,
                        .k = view,
                        .v = view,
                        .out = out.data(),
                        .out_tok_stride = n_head * d,
                        .out_head_stride = d,
                        .head_begin = 0,
                        .head_end = n_head,
                        .sinks = sinks});
        for (int h = 0; h < n_head; ++h) {
          std::vector<double> scores;
          std::vector<std::vector<double>> values;
          for (int64_t j : ids) {
            values.push_back(kv.read(j, 0, d));
            double s = 0.0;
            for (int i = 0; i < d; ++i) s += static_cast<double>(q[static_cast<size_t>(h * d + i)]) * values.back()[i];
            scores.push_back(s * scale);
          }
          const double m = std::max(*std::max_element(scores.begin(), scores.end()), static_cast<double>(sinks[h]));
          double den = std::exp(sinks[h] - m);
          std::vector<double> want(static_cast<size_t>(d), 0.0);
          for (size_t j = 0; j < scores.size(); ++j) {
            const double p = std::exp(scores[j] - m);
            den += p;
            for (int i = 0; i < d; ++i) want[static_cast<size_t>(i)] += p * values[j][static_cast<size_t>(i)];
          }
          for (double& w : want) w /= den;
          const float* o = out.data() + h * d;
          ASSERT_LE(attn_err(o, want, 0.0), kAttnRelTol)
              << table_name(*kt) << " " << ggml_type_name(t) << " candidates=" << n_c << " sink=" << sinks[h];
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
          kt->mla_attn({.n_head = n_head,
                        .kv_lora = kv_lora,
                        .n_rope = n_rope,
                        .scale = scale,
                        .n_q = nq,
                        .q_abs = q.data(),
                        .q_pe = q.data() + kv_lora,
                        .q_tok_stride = qs,
                        .q_head_stride = width,
                        .q_pos = pos.data(),
                        .kv = kv.view(0, 0),
                        .out = out.data(),
                        .out_tok_stride = n_head * kv_lora,
                        .out_head_stride = kv_lora,
                        .head_begin = 0,
                        .head_end = n_head});
          for (int64_t it = 0; it < nq; ++it)
            for (int ih = 0; ih < n_head; ++ih) {
              const float* qh = q.data() + it * qs + ih * width;
              const bool b16 = rounds_to_bf16(*kt, t, width);
              std::vector<double> scores;
              std::vector<std::vector<double>> values;
              for (int64_t j = 0; j <= pos[static_cast<size_t>(it)]; ++j) {
                auto row = kv.read(j, 0, width);
                double s = 0.0;
                for (int i = 0; i < width; ++i) s += (b16 ? bf16_round(qh[i]) : qh[i]) * row[static_cast<size_t>(i)];
                scores.push_back(s * scale);
                row.resize(kv_lora);
                values.push_back(std::move(row));
              }
              const Bf16Naive want = naive_for(scores, values, b16);
              const double err = attn_err(out.data() + (it * n_head + ih) * kv_lora, want.out, want.slack);
              ASSERT_LE(err, kAttnRelTol)
                  << table_name(*kt) << " " << ggml_type_name(t) << " ctx=" << ctx << " q=" << it << " head=" << ih;
            }
        }
      }
    }
}

// ---- Prefill chunks: several queries per call ----

// The cache as doubles, [ctx][width]: the naive side reads each row once.
std::vector<double> cache_doubles(const PagedKv& kv, int64_t ctx) {
  std::vector<double> d;
  d.reserve(static_cast<size_t>(ctx * kv.width));
  for (int64_t j = 0; j < ctx; ++j) {
    const auto r = kv.read(j, 0, kv.width);
    d.insert(d.end(), r.begin(), r.end());
  }
  return d;
}

// One attention problem with n_q queries at positions pos, callable on any query range
// [first, first + n) and head range [hb, he), for flash (GQA) or MLA.
struct Problem {
  bool mla = false;
  int n_head = 0, n_head_kv = 1, d_k = 0, d_v = 0;  // MLA: d_k = kv_lora + n_rope, d_v = kv_lora
  float scale = 0.0f;
  GgmlType type = GgmlType::F32;
  std::unique_ptr<PagedKv> kv;
  std::vector<int32_t> pos;
  std::vector<float> q;  // [n_q][n_head][d_k]

  Problem(std::mt19937& rng, bool is_mla, GgmlType t, int nh, int nkv, int dk, int dv, int64_t ctx,
          std::vector<int32_t> positions)
      : mla(is_mla), n_head(nh), n_head_kv(nkv), d_k(dk), d_v(dv), type(t), pos(std::move(positions)) {
    scale = mla ? 0.3f : 3.0f / std::sqrt(static_cast<float>(dk));
    const int64_t width = mla ? dk : nkv * (dk + dv);
    kv = std::make_unique<PagedKv>(rng, t, ctx, width);
    q = random_floats(rng, n_q() * nh * dk, mla ? -0.2f : -1.0f, mla ? 0.2f : 1.0f);
  }
  int64_t n_q() const { return static_cast<int64_t>(pos.size()); }
  int64_t out_size() const { return n_q() * n_head * d_v; }

  void run(const KernelTable& kt, int64_t first, int64_t n, int hb, int he, float* out) const {
    const float* qf = q.data() + first * n_head * d_k;
    float* of = out + first * n_head * d_v;
    if (mla) {
      const int kvl = d_v;
      kt.mla_attn({.n_head = n_head,
                   .kv_lora = kvl,
                   .n_rope = d_k - kvl,
                   .scale = scale,
                   .n_q = n,
                   .q_abs = qf,
                   .q_pe = qf + kvl,
                   .q_tok_stride = n_head * d_k,
                   .q_head_stride = d_k,
                   .q_pos = pos.data() + first,
                   .kv = kv->view(0, 0),
                   .out = of,
                   .out_tok_stride = n_head * d_v,
                   .out_head_stride = d_v,
                   .head_begin = hb,
                   .head_end = he});
    } else {
      kt.flash_attn({.n_head = n_head,
                     .n_head_kv = n_head_kv,
                     .d_k = d_k,
                     .d_v = d_v,
                     .scale = scale,
                     .n_q = n,
                     .q = qf,
                     .q_tok_stride = n_head * d_k,
                     .q_head_stride = d_k,
                     .q_pos = pos.data() + first,
                     .k = kv->view(0, ggml_row_size(type, d_k)),
                     .v = kv->view(ggml_row_size(type, n_head_kv * d_k), ggml_row_size(type, d_v)),
                     .out = of,
                     .out_tok_stride = n_head * d_v,
                     .out_head_stride = d_v,
                     .head_begin = hb,
                     .head_end = he});
    }
  }

  // Naive attention of query it, head ih over the cache as doubles (naive_for: b16 when the
  // table rounds to bf16).
  using Naive = Bf16Naive;
  Naive naive(const std::vector<double>& cache, int64_t it, int ih, bool b16) const {
    const int64_t width = kv->width;
    const int kh = mla ? 0 : ih / (n_head / n_head_kv);
    const int64_t k_off = mla ? 0 : kh * d_k, v_off = mla ? 0 : n_head_kv * d_k + kh * d_v;
    const float* qh = q.data() + (it * n_head + ih) * d_k;
    std::vector<double> scores;
    std::vector<std::vector<double>> values;
    for (int64_t j = 0; j <= pos[static_cast<size_t>(it)]; ++j) {
      const double* row = cache.data() + j * width;
      double s = 0.0;
      for (int i = 0; i < d_k; ++i) s += (b16 ? bf16_round(qh[i]) : qh[i]) * row[k_off + i];
      scores.push_back(s * scale);
      values.emplace_back(row + v_off, row + v_off + d_v);
    }
    return naive_for(scores, values, b16);
  }
  bool rounds(const KernelTable& kt) const { return rounds_to_bf16(kt, type, d_k); }
  // attn_err of out (query it, head ih) against naive() as kt computes it.
  double err(const KernelTable& kt, const std::vector<double>& cache, const float* out, int64_t it, int ih) const {
    const Naive n = naive(cache, it, ih, rounds(kt));
    return attn_err(out, n.out, n.slack);
  }
};

// The last n positions of a context of ctx tokens (a prefill chunk).
std::vector<int32_t> chunk_positions(int64_t ctx, int64_t n) {
  return query_positions(ctx, n);
}

// Checks every query and head of p against naive attention, one call per ISA over all
// queries and heads.
void expect_naive(const Problem& p, int64_t ctx) {
  const auto cache = cache_doubles(*p.kv, ctx);
  std::vector<Problem::Naive> want[2];  // [q rounded to bf16], computed when a table needs it
  for (const KernelTable* kt : available_tables()) {
    const bool b16 = p.rounds(*kt);
    if (want[b16].empty())
      for (int64_t it = 0; it < p.n_q(); ++it)
        for (int ih = 0; ih < p.n_head; ++ih) want[b16].push_back(p.naive(cache, it, ih, b16));
    std::vector<float> out(static_cast<size_t>(p.out_size()), NAN);
    p.run(*kt, 0, p.n_q(), 0, p.n_head, out.data());
    for (int64_t it = 0; it < p.n_q(); ++it)
      for (int ih = 0; ih < p.n_head; ++ih) {
        const size_t i = static_cast<size_t>(it * p.n_head + ih);
        const Problem::Naive& w = want[b16][i];
        const double err = attn_err(out.data() + i * static_cast<size_t>(p.d_v), w.out, w.slack);
        ASSERT_LE(err, kAttnRelTol) << table_name(*kt) << (p.mla ? " mla " : " flash ") << ggml_type_name(p.type)
                                    << " ctx=" << ctx << " n_q=" << p.n_q() << " q=" << it
                                    << " pos=" << p.pos[static_cast<size_t>(it)] << " head=" << ih;
      }
  }
}

TEST(Attention, PrefillChunksEqualNaiveSoftmax) {
  std::mt19937 rng(23);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    // Q8_0 rows are whole 32-element blocks; the others also take row tails (72, 40, 136 + 24).
    const bool q8 = t == GgmlType::Q8_0;
    const int fk = q8 ? 64 : 72, fv = q8 ? 96 : 40, lora = q8 ? 512 : 136, rope = q8 ? 64 : 24;
    for (int64_t ctx : {1, 15, 16, 17, 100, 4096}) {
      if (ctx == 4096 && (t == GgmlType::BF16 || t == GgmlType::Q8_0)) continue;  // time; same path as 100
      for (int64_t n_q : {int64_t{3}, int64_t{17}, std::min<int64_t>(ctx, 37)}) {
        if (n_q > ctx) continue;
        const auto pos = chunk_positions(ctx, n_q);
        expect_naive(Problem(rng, false, t, 6, 2, fk, fv, ctx, pos), ctx);
        expect_naive(Problem(rng, true, t, 3, 1, lora + rope, lora, ctx, pos), ctx);
      }
    }
  }
}

TEST(Attention, ScatteredQueryPositionsEqualNaiveSoftmax) {
  // Positions out of order, repeated, and far apart: each query keeps its own causal limit.
  std::mt19937 rng(24);
  const std::vector<int32_t> pos = {299, 0, 15, 16, 17, 150, 150, 31, 32, 33, 64, 7, 298, 120, 1, 63, 47, 200, 5};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    expect_naive(Problem(rng, false, t, 4, 2, 64, 96, 300, pos), 300);
    expect_naive(Problem(rng, true, t, 2, 1, 576, 512, 300, pos), 300);
  }
}

// Decode steps (one query; GQA: a KV head's 1-8 query heads per job, MLA: 1-16 heads) take
// the path that reads K and V straight from the cache (attention_decode.h, attend_direct):
// every member count, every float cache type, contexts within one tile, across tiles and at
// a tile's edge (MLA: 16 rows; GQA: 64 rows, scored in chunks of 32), against naive
// attention; and bit for bit the output of the same query inside a prefill chunk (the tile
// path) [BATCH_INVARIANT].
TEST(Attention, DecodeEqualsNaiveSoftmaxAndPrefillBitwise) {
  std::mt19937 rng(26);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (bool mla : {false, true})
      for (int group = 1; group <= (mla ? 16 : 8); ++group)
        for (int64_t ctx : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130}) {
          // MLA: a narrow latent (128 + rope 64) for time, and V2/V3's 512 + 64 at 8 and 16 heads.
          const int lora = mla && group % 8 == 0 ? 512 : 128;
          const auto pos = chunk_positions(ctx, std::min<int64_t>(ctx, 20));
          const Problem p = mla ? Problem(rng, true, t, group, 1, lora + 64, lora, ctx, pos)
                                : Problem(rng, false, t, 2 * group, 2, 128, 128, ctx, pos);
          const auto cache = cache_doubles(*p.kv, ctx);
          const size_t n = static_cast<size_t>(p.out_size());
          for (const KernelTable* kt : available_tables()) {
            const std::string what = std::string(table_name(*kt)) + (mla ? " mla " : " gqa ") + ggml_type_name(t) +
                                     " heads=" + std::to_string(p.n_head) + " ctx=" + std::to_string(ctx);
            std::vector<float> chunk(n, NAN), steps(n, NAN);
            p.run(*kt, 0, p.n_q(), 0, p.n_head, chunk.data());
            for (int64_t it = 0; it < p.n_q(); ++it) p.run(*kt, it, 1, 0, p.n_head, steps.data());
            for (int64_t it = 0; it < p.n_q(); ++it)
              for (int ih = 0; ih < p.n_head; ++ih) {
                const size_t i = static_cast<size_t>(it * p.n_head + ih);
                ASSERT_LE(p.err(*kt, cache, steps.data() + i * static_cast<size_t>(p.d_v), it, ih), kAttnRelTol)
                    << what << " q=" << it << " head=" << ih;
              }
            EXPECT_EQ(0, std::memcmp(chunk.data(), steps.data(), n * 4)) << what;
          }
        }
  // A long context: 256 paged blocks, the 1.5B shape's heads and V2/V3's latent.
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    expect_naive(Problem(rng, false, t, 12, 2, 128, 128, 4096, {4095}), 4096);
    expect_naive(Problem(rng, true, t, 16, 1, 576, 512, 4096, {4095}), 4096);
  }
}

// [BATCH_INVARIANT] A query's output, bit for bit, does not depend on which other queries
// or heads share its call: all queries and heads at once, one query and one head per call
// (a decode step), chunks of 5 queries, and one head over all queries (the model's split).
TEST(Attention, QueryOutputIndependentOfCallComposition) {
  std::mt19937 rng(25);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (bool mla : {false, true}) {
      const int64_t ctx = 300;
      const Problem p = mla ? Problem(rng, true, t, 4, 1, 576, 512, ctx, chunk_positions(ctx, 41))
                            : Problem(rng, false, t, 12, 2, 128, 128, ctx, chunk_positions(ctx, 41));
      const size_t n = static_cast<size_t>(p.out_size());
      for (const KernelTable* kt : available_tables()) {
        std::vector<float> all(n, NAN), solo(n, NAN), chunks(n, NAN), per_head(n, NAN);
        p.run(*kt, 0, p.n_q(), 0, p.n_head, all.data());
        for (int64_t it = 0; it < p.n_q(); ++it)
          for (int ih = 0; ih < p.n_head; ++ih) p.run(*kt, it, 1, ih, ih + 1, solo.data());
        for (int64_t q0 = 0; q0 < p.n_q(); q0 += 5)
          p.run(*kt, q0, std::min<int64_t>(5, p.n_q() - q0), 0, p.n_head, chunks.data());
        for (int ih = 0; ih < p.n_head; ++ih) p.run(*kt, 0, p.n_q(), ih, ih + 1, per_head.data());
        const std::string what = std::string(table_name(*kt)) + (mla ? " mla " : " flash ") + ggml_type_name(t);
        EXPECT_EQ(0, std::memcmp(all.data(), solo.data(), n * 4)) << what << ": one query and head per call";
        EXPECT_EQ(0, std::memcmp(all.data(), chunks.data(), n * 4)) << what << ": chunks of 5 queries";
        EXPECT_EQ(0, std::memcmp(all.data(), per_head.data(), n * 4)) << what << ": one head per call";
      }
    }
}

}  // namespace
}  // namespace ds::test
