// Lightning-indexer scores, AVX2 + FMA (kernels.h IndexerScoreArgs): the AVX-512 kernel's
// register tile (kernels/avx512/indexer.cpp) at 8 heads per vector: groups of 16 heads
// (two vectors) times NK keys, each key element broadcast into the heads' query vectors, so
// a key is read from memory once and from L1 once per group of 16 heads. BF16 keys are
// widened to float (exact), elements 2i and 2i+1 as two FMAs.
// Each lane sums its dot product in element order (with FMAs); the heads' sum runs in vector
// order, so scores differ from the reference's at the float-rounding level.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx2/kernels_avx2.h"
#include "kernels/ref/ref.h"

namespace ds::avx2 {

namespace {

constexpr int NH = 2;  // vectors of 8 heads per group

struct KeyF32 {
  using Q = __m256;
  using K = __m256;
  static constexpr int NK = 6;  // 12 accumulators + 2 query vectors + 1 broadcast <= 16
  static int64_t steps(int64_t dim) { return dim; }
  static Q load_q(const uint8_t* q, int64_t i, int hp, int h) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(q) + i * hp + h);
  }
  static K load_k(const uint8_t* key, int64_t i) {
    return _mm256_broadcast_ss(reinterpret_cast<const float*>(key) + i);
  }
  static __m256 fma(__m256 acc, Q q, K k) { return _mm256_fmadd_ps(q, k, acc); }
};

struct KeyBF16 {
  struct Q {
    __m256 even, odd;
  };
  using K = Q;
  static constexpr int NK = 4;  // 8 accumulators + 4 query vectors + 2 broadcasts <= 16
  static int64_t steps(int64_t dim) { return dim / 2; }
  static Q widen(__m256i x) {
    return {_mm256_castsi256_ps(_mm256_slli_epi32(x, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))))};
  }
  static Q load_q(const uint8_t* q, int64_t i, int hp, int h) {
    return widen(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(q) + (i * hp + h) * 2)));
  }
  static K load_k(const uint8_t* key, int64_t i) {
    uint32_t pair;
    std::memcpy(&pair, key + 4 * i, sizeof(pair));
    return widen(_mm256_set1_epi32(static_cast<int>(pair)));
  }
  static __m256 fma(__m256 acc, Q q, K k) {
    return _mm256_fmadd_ps(q.odd, k.odd, _mm256_fmadd_ps(q.even, k.even, acc));
  }
};

inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// Walks the rows of a paged view from row j on, with one division per call, not per row.
struct RowCursor {
  const KvView& v;
  int64_t block;
  int in_block;
  RowCursor(const KvView& view, int64_t j)
      : v(view), block(j / view.block_size), in_block(static_cast<int>(j % view.block_size)) {}
  const uint8_t* row() const { return v.blocks[block] + static_cast<size_t>(in_block) * v.row_stride + v.elem_offset; }
  void next() {
    if (++in_block == v.block_size) {
      ++block;
      in_block = 0;
    }
  }
};

// Prefetches the n rows from c on (rows of a paged cache: no stream for the hardware to detect).
inline void prefetch_rows(RowCursor c, int n, size_t bytes) {
  for (int k = 0; k < n; ++k, c.next())
    for (size_t off = 0; off < bytes; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(c.row() + off), _MM_HINT_T0);
}

// out[k] += sum over the 16 heads from h of relu(q_h . key_{j+k}) * w_h, k < NK.
template <class P, int NK>
void score_tile(const IndexerScoreArgs& a, const float* w, const uint8_t* q, int hp, int h, const uint8_t* const* key,
                float* out) {
  __m256 acc[NH][NK];
#pragma GCC unroll 8
  for (int v = 0; v < NH; ++v)
#pragma GCC unroll 8
    for (int k = 0; k < NK; ++k) acc[v][k] = _mm256_setzero_ps();
  const int64_t n = P::steps(a.dim);
  for (int64_t i = 0; i < n; ++i) {
    typename P::Q qv[NH];
#pragma GCC unroll 8
    for (int v = 0; v < NH; ++v) qv[v] = P::load_q(q, i, hp, h + 8 * v);
#pragma GCC unroll 8
    for (int k = 0; k < NK; ++k) {
      const typename P::K kb = P::load_k(key[k], i);
#pragma GCC unroll 8
      for (int v = 0; v < NH; ++v) acc[v][k] = P::fma(acc[v][k], qv[v], kb);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m256 w0 = _mm256_loadu_ps(w + h), w1 = _mm256_loadu_ps(w + h + 8);
#pragma GCC unroll 8
  for (int k = 0; k < NK; ++k)
    out[k] +=
        hsum(_mm256_fmadd_ps(_mm256_max_ps(acc[1][k], zero), w1, _mm256_mul_ps(_mm256_max_ps(acc[0][k], zero), w0)));
}

template <class P>
void scores(const IndexerScoreArgs& a) {
  const int hp = indexer_head_pad(a.n_head);
  const float* w = static_cast<const float*>(a.q);
  const uint8_t* q = reinterpret_cast<const uint8_t*>(w + hp);
  std::fill(a.out, a.out + (a.k1 - a.k0), 0.0f);
  // Key tiles outside, head groups inside: a tile's keys stay in L1 across the groups.
  const size_t key_bytes = ggml_row_size(a.keys.type, a.dim);
  RowCursor c(a.keys, a.k0);
  const uint8_t* key[P::NK];
  int64_t j = a.k0;
  for (; j + P::NK <= a.k1; j += P::NK) {
    for (int k = 0; k < P::NK; ++k, c.next()) key[k] = c.row();
    if (j + 2 * P::NK <= a.k1) prefetch_rows(c, P::NK, key_bytes);  // the next tile's keys
    for (int h = 0; h < hp; h += 16) score_tile<P, P::NK>(a, w, q, hp, h, key, a.out + (j - a.k0));
  }
  for (; j < a.k1; ++j, c.next()) {
    key[0] = c.row();
    for (int h = 0; h < hp; h += 16) score_tile<P, 1>(a, w, q, hp, h, key, a.out + (j - a.k0));
  }
}

}  // namespace

void indexer_scores(const IndexerScoreArgs& a) {
  if (a.keys.type == GgmlType::BF16)
    scores<KeyBF16>(a);
  else
    scores<KeyF32>(a);
}

}  // namespace ds::avx2
