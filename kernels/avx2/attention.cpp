// AVX2 flash attention (GQA) and absorbed MLA. Both run one core, attend(): a group of
// query heads that share one KV head (GQA: n_head / n_head_kv heads; MLA: all heads share
// the single latent row) walks the context in tiles of kTile rows. Each tile's K (and V)
// rows are converted to float once for the whole group, scores for all heads of the group
// come from one pass over the tile, and an online softmax (running max, denominator and
// rescaled accumulator per head) folds the tile in. The full score row is never built.
// Same algorithm as kernels/avx512/attention.cpp with 8 lanes.
// MLA is the case "K row = [c | k_pe], q = [q_abs | q_pe], V = c": no separate V load.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/avx2/kernels_avx2.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/avx2/dot_blocks.h"
#include "kernels/ref/ref.h"

namespace ds::avx2 {
namespace {

constexpr int kTile = 64;             // most rows per tile
constexpr size_t kTileBytes = 16384;  // converted K (and V) tile kept within L1

// Rows per tile for K rows of kw floats: a multiple of 8 in [8, kTile] within kTileBytes
// (MLA's 576-wide rows: 8; GQA heads of 128: 32). Measured: 64-row MLA tiles streamed
// from L2 for every head ran 4x slower.
int tile_rows(int kw) {
  const int rows = static_cast<int>(kTileBytes / (sizeof(float) * static_cast<size_t>(kw))) / 8 * 8;
  return std::clamp(rows, 8, kTile);
}
constexpr int kMaxGroup = 16;  // heads per pass: their accumulators stay in L1/L2

struct AttnJob {
  int n_h = 0;
  const float* qa[kMaxGroup];  // d_a wide
  const float* qb[kMaxGroup];  // d_b wide (MLA's q_pe), unused when d_b == 0
  float* out[kMaxGroup];       // d_v wide
  int d_a = 0, d_b = 0, d_v = 0;
  float scale = 1.0f;
  int64_t n_kv = 0;
  const KvView* k = nullptr;  // K rows: d_a + d_b elements at byte k_off of each row
  size_t k_off = 0;
  const KvView* v = nullptr;  // V rows at byte v_off; nullptr: V = first d_v of the K row
  size_t v_off = 0;
};

// Converts n elements of one KV row to float (the reference conversion for tails).
void load_row(GgmlType t, const uint8_t* src, float* dst, int n) {
  int i = 0;
  switch (t) {
    case GgmlType::F32:
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(reinterpret_cast<const float*>(src) + i));
      break;
    case GgmlType::F16:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
      break;
    case GgmlType::BF16:
      for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      break;
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (; i + 32 <= n; i += 32) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i / 32].d));
        for (int k = 0; k < 4; ++k) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i / 32].qs + 8 * k));
          _mm256_storeu_ps(dst + i + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      break;
    }
    default: return;
  }
  if (i < n) {
    const size_t esz = t == GgmlType::F32 ? 4 : 2;
    ref::load_kv(t, src + esz * static_cast<size_t>(i), dst + i, n - i);  // F32/F16/BF16 tails only
  }
}

// acc[0..8 NV) = acc * corr + sum_j p[j] * v[j][0..8 NV), accumulators in registers.
template <int NV>
void accumulate_chunk(float* acc, __m256 corr, const float* p, const float* v, int ld, int nt) {
  __m256 r[NV];
  for (int k = 0; k < NV; ++k) r[k] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * k), corr);
  for (int j = 0; j < nt; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* vj = v + static_cast<size_t>(j) * ld;
    for (int k = 0; k < NV; ++k) r[k] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * k), r[k]);
  }
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(acc + 8 * k, r[k]);
}

// acc[0..d) = acc * corr + sum_j p[j] * v[j][0..d): 64-wide register chunks, then 8-wide
// steps, the last one masked.
void accumulate_v(float* acc, float corr, const float* p, const float* v, int ld, int nt, int d) {
  const __m256 vc = _mm256_set1_ps(corr);
  int c0 = 0;
  for (; c0 + 64 <= d; c0 += 64) accumulate_chunk<8>(acc + c0, vc, p, v + c0, ld, nt);
  for (; c0 + 8 <= d; c0 += 8) accumulate_chunk<1>(acc + c0, vc, p, v + c0, ld, nt);
  if (c0 < d) {
    __m256 r = _mm256_mul_ps(load_masked(acc, c0, d), vc);
    for (int j = 0; j < nt; ++j)
      r = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), load_masked(v + static_cast<size_t>(j) * ld, c0, d), r);
    store_masked(acc, c0, d, r);
  }
}

// acc[h] += q[h][0..n) * k[0..n) lane-wise for NH heads: each K load serves NH heads.
template <int NH>
void dot_heads(const float* const* q, const float* k, int n, __m256* acc) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 kv = _mm256_loadu_ps(k + i);
    for (int h = 0; h < NH; ++h) acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i), kv, acc[h]);
  }
  if (i < n) {
    const __m256 kv = load_masked(k, i, n);
    for (int h = 0; h < NH; ++h) acc[h] = _mm256_fmadd_ps(load_masked(q[h], i, n), kv, acc[h]);
  }
}

// p[h][j] = (qa_h . k_j + qb_h . k_j[d_a..]) * scale for heads [h0, h0 + NH), rows j < nt.
template <int NH>
void scores(const AttnJob& job, int h0, const float* kt, int kw, int nt, float (*p)[kTile]) {
  for (int j = 0; j < nt; ++j) {
    const float* kr = kt + static_cast<size_t>(j) * kw;
    __m256 acc[NH];
    for (int h = 0; h < NH; ++h) acc[h] = _mm256_setzero_ps();
    dot_heads<NH>(job.qa + h0, kr, job.d_a, acc);
    if (job.d_b) dot_heads<NH>(job.qb + h0, kr + job.d_a, job.d_b, acc);
    for (int h = 0; h < NH; ++h) p[h0 + h][j] = hsum256(acc[h]) * job.scale;
  }
}

struct Scratch {
  std::vector<float> k, v, acc;
};

void attend(const AttnJob& job) {
  thread_local Scratch s;
  const int kw = job.d_a + job.d_b;
  s.k.resize(static_cast<size_t>(kTile) * kw);
  s.acc.assign(static_cast<size_t>(job.n_h) * job.d_v, 0.0f);
  if (job.v) s.v.resize(static_cast<size_t>(kTile) * job.d_v);
  float m[kMaxGroup], l[kMaxGroup], p[kMaxGroup][kTile];
  std::fill(m, m + job.n_h, -INFINITY);
  std::fill(l, l + job.n_h, 0.0f);
  const int tile = tile_rows(kw);
  for (int64_t j0 = 0; j0 < job.n_kv; j0 += tile) {
    const int nt = static_cast<int>(std::min<int64_t>(tile, job.n_kv - j0));
    for (int j = 0; j < nt; ++j)
      load_row(job.k->type, ref::kv_row(*job.k, j0 + j) + job.k_off, s.k.data() + static_cast<size_t>(j) * kw, kw);
    if (job.v)
      for (int j = 0; j < nt; ++j)
        load_row(job.v->type, ref::kv_row(*job.v, j0 + j) + job.v_off, s.v.data() + static_cast<size_t>(j) * job.d_v,
                 job.d_v);
    const float* vt = job.v ? s.v.data() : s.k.data();
    const int vld = job.v ? job.d_v : kw;
    // Scores for 4 heads per pass over each K row, then one head at a time.
    int h = 0;
    for (; h + 4 <= job.n_h; h += 4) scores<4>(job, h, s.k.data(), kw, nt, p);
    for (; h < job.n_h; ++h) scores<1>(job, h, s.k.data(), kw, nt, p);
    for (int h = 0; h < job.n_h; ++h) {
      float tile_max = -INFINITY;
      for (int j = 0; j < nt; ++j) tile_max = std::max(tile_max, p[h][j]);
      const float m_new = std::max(m[h], tile_max);
      const float corr = std::exp(m[h] - m_new);  // 0 on the first tile
      m[h] = m_new;
      __m256 sum = _mm256_setzero_ps();
      for (int j = 0; j < nt; j += 8) {
        const __m256 mk = _mm256_castsi256_ps(tail_mask(j, nt));
        const __m256 e = _mm256_and_ps(mk, exp_ps(_mm256_sub_ps(load_masked(p[h], j, nt), _mm256_set1_ps(m_new))));
        store_masked(p[h], j, nt, e);
        sum = _mm256_add_ps(sum, e);
      }
      l[h] = l[h] * corr + hsum256(sum);
      accumulate_v(s.acc.data() + static_cast<size_t>(h) * job.d_v, corr, p[h], vt, vld, nt, job.d_v);
    }
  }
  for (int h = 0; h < job.n_h; ++h) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[h]);
    const float* acc = s.acc.data() + static_cast<size_t>(h) * job.d_v;
    for (int i = 0; i < job.d_v; i += 8) store_masked(job.out[h], i, job.d_v, _mm256_mul_ps(load_masked(acc, i, job.d_v), inv));
  }
}

}  // namespace

void flash_attn(const AttnArgs& a) {
  const int group = a.n_head / a.n_head_kv;
  for (int64_t it = 0; it < a.n_q; ++it)
    for (int h0 = a.head_begin; h0 < a.head_end;) {
      // Heads [h0, h1) share KV head h0 / group.
      const int kvh = h0 / group;
      const int h1 = std::min({a.head_end, (kvh + 1) * group, h0 + kMaxGroup});
      AttnJob job;
      job.n_h = h1 - h0;
      for (int h = h0; h < h1; ++h) {
        job.qa[h - h0] = a.q + it * a.q_tok_stride + h * a.q_head_stride;
        job.out[h - h0] = a.out + it * a.out_tok_stride + h * a.out_head_stride;
      }
      job.d_a = a.d_k;
      job.d_v = a.d_v;
      job.scale = a.scale;
      job.n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
      job.k = &a.k;
      job.k_off = static_cast<size_t>(kvh) * a.k.head_offset;
      job.v = &a.v;
      job.v_off = static_cast<size_t>(kvh) * a.v.head_offset;
      attend(job);
      h0 = h1;
    }
}

void mla_attn(const MlaArgs& a) {
  for (int64_t it = 0; it < a.n_q; ++it)
    for (int h0 = a.head_begin; h0 < a.head_end; h0 += kMaxGroup) {
      const int h1 = std::min(a.head_end, h0 + kMaxGroup);
      AttnJob job;
      job.n_h = h1 - h0;
      for (int h = h0; h < h1; ++h) {
        job.qa[h - h0] = a.q_abs + it * a.q_tok_stride + h * a.q_head_stride;
        job.qb[h - h0] = a.q_pe + it * a.q_tok_stride + h * a.q_head_stride;
        job.out[h - h0] = a.out + it * a.out_tok_stride + h * a.out_head_stride;
      }
      job.d_a = a.kv_lora;
      job.d_b = a.n_rope;
      job.d_v = a.kv_lora;
      job.scale = a.scale;
      job.n_kv = static_cast<int64_t>(a.q_pos[it]) + 1;
      job.k = &a.kv;
      attend(job);
    }
}

}  // namespace ds::avx2
