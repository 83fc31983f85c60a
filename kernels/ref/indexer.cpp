// Lightning-indexer scoring (kernels.h IndexerScoreArgs): the query packing every ISA reads
// [INDEXER_QUERY_LAYOUT] and the scalar reference of the scores. The reference follows the
// definition literally: per key, per head in order h = 0..n_head-1, the dot product summed
// in f32 in element order, ReLU, times w_h, accumulated in head order (the reference
// ecosystem's order, SPEC-deepseek32-deepseek4.md 1.1).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/quant/fp16.h"
#include "kernels/ref/ref.h"

namespace ds {

int indexer_head_pad(int n_head) {
  return (n_head + 15) / 16 * 16;
}

size_t indexer_query_bytes(GgmlType key_type, int n_head, int64_t dim) {
  const size_t hp = static_cast<size_t>(indexer_head_pad(n_head));
  const size_t elem = key_type == GgmlType::BF16 ? sizeof(uint16_t) : sizeof(float);
  // Rounded up to a cache line so that packed queries can sit back to back.
  return (hp * sizeof(float) + hp * static_cast<size_t>(dim) * elem + 63) / 64 * 64;
}

void indexer_pack_query(GgmlType key_type, const float* q, const float* w, int n_head, int64_t dim, void* out) {
  const int hp = indexer_head_pad(n_head);
  float* wo = static_cast<float*>(out);
  std::fill_n(wo, hp, 0.0f);
  std::copy_n(w, n_head, wo);
  if (key_type == GgmlType::BF16) {
    uint16_t* qo = reinterpret_cast<uint16_t*>(wo + hp);
    std::fill_n(qo, static_cast<size_t>(hp) * static_cast<size_t>(dim), uint16_t{0});
    for (int h = 0; h < n_head; ++h)
      for (int64_t d = 0; d < dim; ++d) qo[(d / 2 * hp + h) * 2 + d % 2] = f32_to_bf16(q[h * dim + d]);
  } else {
    float* qo = wo + hp;
    std::fill_n(qo, static_cast<size_t>(hp) * static_cast<size_t>(dim), 0.0f);
    for (int h = 0; h < n_head; ++h)
      for (int64_t d = 0; d < dim; ++d) qo[d * hp + h] = q[h * dim + d];
  }
}

namespace ref {

void indexer_scores(const IndexerScoreArgs& a) {
  const int hp = indexer_head_pad(a.n_head);
  const float* w = static_cast<const float*>(a.q);
  const bool bf16 = a.keys.type == GgmlType::BF16;
  const float* qf = w + hp;
  const uint16_t* qb = reinterpret_cast<const uint16_t*>(w + hp);
  std::vector<float> key(static_cast<size_t>(a.dim));
  for (int64_t j = a.k0; j < a.k1; ++j) {
    load_kv(a.keys.type, kv_row(a.keys, j), key.data(), a.dim);
    float s = 0.0f;
    for (int h = 0; h < a.n_head; ++h) {
      float dot = 0.0f;
      for (int64_t d = 0; d < a.dim; ++d) {
        const float qv = bf16 ? bf16_to_f32(qb[(d / 2 * hp + h) * 2 + d % 2]) : qf[d * hp + h];
        dot += qv * key[static_cast<size_t>(d)];
      }
      s += std::max(dot, 0.0f) * w[h];
    }
    a.out[j - a.k0] = s;
  }
}

}  // namespace ref
}  // namespace ds
