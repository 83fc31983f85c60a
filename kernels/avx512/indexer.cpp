// Lightning-indexer scores, AVX-512 (kernels.h IndexerScoreArgs). A register tile holds the
// dot products of NK keys with up to 64 heads (16 heads per vector, the packed query's
// layout [INDEXER_QUERY_LAYOUT]): per key element, NH query vectors are loaded once and each
// of the NK keys' elements is broadcast into them, so a key is read once for all heads and no
// dot product is reduced across lanes; only the final sum_h relu(dot) * w_h is (once per
// key). F32 keys take FMAs; BF16 keys take vdpbf16ps (two elements per lane) on CPUs with
// AVX512_BF16, else both sides widened to float (exact) and two FMAs.
// Each lane sums its dot product in element order like the reference (with FMAs); the heads'
// sum runs in vector order, not in head order, so scores differ from the reference's at the
// float-rounding level (tests/kernels/indexer_test.cpp).
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cstring>

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/ref/ref.h"

namespace ds::avx512 {

namespace {

// F32 keys: one element per step.
struct KeyF32 {
  using Q = __m512;
  using K = __m512;
  static constexpr int nk(int nh) { return nh == 4 ? 6 : 8; }  // NH * NK + NH + 1 <= 32 registers
  static int64_t steps(int64_t dim) { return dim; }
  static Q load_q(const uint8_t* q, int64_t i, int hp, int h) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(q) + i * hp + h);
  }
  static K load_k(const uint8_t* key, int64_t i) { return _mm512_set1_ps(reinterpret_cast<const float*>(key)[i]); }
  static __m512 fma(__m512 acc, Q q, K k) { return _mm512_fmadd_ps(q, k, acc); }
};

// BF16 keys with AVX512_BF16: one pair of elements per step and lane. vdpbf16ps is written as
// inline assembly so this file builds without -mavx512bf16 (kernels/avx512/matmul.cpp).
struct KeyBF16 {
  using Q = __m512i;
  using K = __m512i;
  static constexpr int nk(int nh) { return nh == 4 ? 6 : 8; }
  static int64_t steps(int64_t dim) { return dim / 2; }
  static Q load_q(const uint8_t* q, int64_t i, int hp, int h) {
    return _mm512_loadu_si512(reinterpret_cast<const uint16_t*>(q) + (i * hp + h) * 2);
  }
  static K load_k(const uint8_t* key, int64_t i) {
    uint32_t pair;
    std::memcpy(&pair, key + 4 * i, sizeof(pair));
    return _mm512_set1_epi32(static_cast<int>(pair));
  }
  static __m512 fma(__m512 acc, Q q, K k) {
    asm("vdpbf16ps %[k], %[q], %[acc]" : [acc] "+v"(acc) : [q] "v"(q), [k] "v"(k));
    return acc;
  }
};

// BF16 keys without AVX512_BF16: both sides widened to float (a bf16 is the top half of a
// float, so exact), elements 2i and 2i+1 as two FMAs.
struct KeyBF16Widened {
  struct Q {
    __m512 even, odd;
  };
  using K = Q;
  static constexpr int nk(int nh) { return nh == 4 ? 4 : nh == 3 ? 5 : 8; }  // + 2 NH + 2 registers
  static int64_t steps(int64_t dim) { return dim / 2; }
  static Q widen(__m512i x) {
    return {_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
  }
  static Q load_q(const uint8_t* q, int64_t i, int hp, int h) { return widen(KeyBF16::load_q(q, i, hp, h)); }
  static K load_k(const uint8_t* key, int64_t i) { return widen(KeyBF16::load_k(key, i)); }
  static __m512 fma(__m512 acc, Q q, K k) {
    return _mm512_fmadd_ps(q.odd, k.odd, _mm512_fmadd_ps(q.even, k.even, acc));
  }
};

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

// out[k] += sum over the NH * 16 heads from h of relu(q_h . key_{j+k}) * w_h, k < NK.
template <class P, int NH, int NK>
void score_tile(const IndexerScoreArgs& a, const float* w, const uint8_t* q, int hp, int h, const uint8_t* const* key,
                float* out) {
  __m512 acc[NH][NK];
#pragma GCC unroll 8
  for (int v = 0; v < NH; ++v)
#pragma GCC unroll 8
    for (int k = 0; k < NK; ++k) acc[v][k] = _mm512_setzero_ps();
  const int64_t n = P::steps(a.dim);
  for (int64_t i = 0; i < n; ++i) {
    typename P::Q qv[NH];
#pragma GCC unroll 8
    for (int v = 0; v < NH; ++v) qv[v] = P::load_q(q, i, hp, h + 16 * v);
#pragma GCC unroll 8
    for (int k = 0; k < NK; ++k) {
      const typename P::K kb = P::load_k(key[k], i);
#pragma GCC unroll 8
      for (int v = 0; v < NH; ++v) acc[v][k] = P::fma(acc[v][k], qv[v], kb);
    }
  }
  __m512 wv[NH];
#pragma GCC unroll 8
  for (int v = 0; v < NH; ++v) wv[v] = _mm512_loadu_ps(w + h + 16 * v);
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int k = 0; k < NK; ++k) {
    __m512 s = _mm512_mul_ps(_mm512_max_ps(acc[0][k], zero), wv[0]);
#pragma GCC unroll 8
    for (int v = 1; v < NH; ++v) s = _mm512_fmadd_ps(_mm512_max_ps(acc[v][k], zero), wv[v], s);
    out[k] += _mm512_reduce_add_ps(s);
  }
}

template <class P, int NH>
void score_heads(const IndexerScoreArgs& a, const float* w, const uint8_t* q, int hp, int h, size_t key_bytes) {
  constexpr int NK = P::nk(NH);
  RowCursor c(a.keys, a.k0);
  const uint8_t* key[NK];
  int64_t j = a.k0;
  for (; j + NK <= a.k1; j += NK) {
    for (int k = 0; k < NK; ++k, c.next()) key[k] = c.row();
    if (j + 2 * NK <= a.k1) prefetch_rows(c, NK, key_bytes);  // the next tile's keys, while this one computes
    score_tile<P, NH, NK>(a, w, q, hp, h, key, a.out + (j - a.k0));
  }
  for (; j < a.k1; ++j, c.next()) {
    key[0] = c.row();
    score_tile<P, NH, 1>(a, w, q, hp, h, key, a.out + (j - a.k0));
  }
}

template <class P>
void scores(const IndexerScoreArgs& a) {
  const int hp = indexer_head_pad(a.n_head);
  const float* w = static_cast<const float*>(a.q);
  const uint8_t* q = reinterpret_cast<const uint8_t*>(w + hp);
  const size_t key_bytes = ggml_row_size(a.keys.type, a.dim);
  std::fill(a.out, a.out + (a.k1 - a.k0), 0.0f);
  // Groups of up to 64 heads (4 vectors); real indexers have exactly 64.
  for (int h = 0; h < hp; h += 64) {
    switch (std::min(4, (hp - h) / 16)) {
      case 1:
        score_heads<P, 1>(a, w, q, hp, h, key_bytes);
        break;
      case 2:
        score_heads<P, 2>(a, w, q, hp, h, key_bytes);
        break;
      case 3:
        score_heads<P, 3>(a, w, q, hp, h, key_bytes);
        break;
      default:
        score_heads<P, 4>(a, w, q, hp, h, key_bytes);
        break;
    }
  }
}

}  // namespace

void indexer_scores(const IndexerScoreArgs& a) {
  if (a.keys.type == GgmlType::BF16)
    scores<KeyBF16Widened>(a);
  else
    scores<KeyF32>(a);
}

void indexer_scores_bf16(const IndexerScoreArgs& a) {
  if (a.keys.type == GgmlType::BF16)
    scores<KeyBF16>(a);
  else
    scores<KeyF32>(a);
}

}  // namespace ds::avx512
