// Lightning-indexer scores (KernelTable::indexer_scores): the reference against the
// definition in double (SPEC-deepseek32-deepseek4.md 1.1) over the original, unpacked query,
// and every available ISA against the reference: F32 and BF16 keys in a paged cache with
// shuffled blocks and padded rows, head counts below, at and above one 64-head group (8, 20,
// 64, 72), key ranges that start mid-block and end on every tile tail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernel_test_data.h"
#include "kernels/quant/fp16.h"
#include "kernels/ref/ref.h"

namespace ds::test {
namespace {

constexpr int kBlockSize = 16;  // keys per cache block
// Two f32 computations of the same sum of n products differ by at most 2 n u times the sum of
// the magnitudes (u = 2^-24, the standard summation bound for each side); n = dim + n_head
// bounds the dot product and the heads' sum together.
double score_tol(int64_t dim, int n_head, double abs_sum) {
  return 2.0 * static_cast<double>(dim + n_head) * std::ldexp(1.0, -24) * abs_sum;
}

struct Case {
  GgmlType type;
  int n_head;
  int64_t dim;
  int64_t n_keys;
  int64_t k0;
};

struct Keys {
  size_t row_bytes;
  std::vector<std::vector<uint8_t>> pages;
  std::vector<const uint8_t*> blocks;
  size_t offset = 24;  // bytes before the key in a row (the latent row in the real cache)

  Keys(std::mt19937& rng, GgmlType t, int64_t n, int64_t dim) {
    row_bytes = offset + ggml_row_size(t, dim) + 40;
    pages.resize(static_cast<size_t>((n + kBlockSize - 1) / kBlockSize), std::vector<uint8_t>(row_bytes * kBlockSize));
    std::vector<size_t> order(pages.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) blocks.push_back(pages[i].data());
    for (int64_t j = 0; j < n; ++j) {
      const auto x = random_floats(rng, dim, -1.0f, 1.0f);
      ref::store_kv(t, x.data(), row(j) + offset, dim);
    }
  }
  uint8_t* row(int64_t j) { return const_cast<uint8_t*>(blocks[j / kBlockSize]) + (j % kBlockSize) * row_bytes; }
  KvView view(GgmlType t) const {
    return {
        .type = t, .blocks = blocks.data(), .block_size = kBlockSize, .row_stride = row_bytes, .elem_offset = offset};
  }
};

void check(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Keys keys(rng, c.type, c.k0 + c.n_keys, c.dim);
  const auto q = random_floats(rng, c.n_head * c.dim, -1.0f, 1.0f);
  const auto w = random_floats(rng, c.n_head, -0.5f, 0.5f);
  std::vector<uint8_t> packed(indexer_query_bytes(c.type, c.n_head, c.dim));
  indexer_pack_query(c.type, q.data(), w.data(), c.n_head, c.dim, packed.data());
  const IndexerScoreArgs base{.q = packed.data(),
                              .n_head = c.n_head,
                              .dim = c.dim,
                              .keys = keys.view(c.type),
                              .k0 = c.k0,
                              .k1 = c.k0 + c.n_keys,
                              .out = nullptr};

  std::vector<float> want(static_cast<size_t>(c.n_keys));
  IndexerScoreArgs a = base;
  a.out = want.data();
  ref::indexer_scores(a);

  // The definition in double, the query rounded as the keys' type takes it.
  std::vector<double> tol(want.size());
  std::vector<float> key(static_cast<size_t>(c.dim));
  for (int64_t j = 0; j < c.n_keys; ++j) {
    ref::load_kv(c.type, keys.row(c.k0 + j) + keys.offset, key.data(), c.dim);
    double s = 0.0, abs_sum = 0.0;
    for (int h = 0; h < c.n_head; ++h) {
      double dot = 0.0, abs_dot = 0.0;
      for (int64_t d = 0; d < c.dim; ++d) {
        float qv = q[h * c.dim + d];
        if (c.type == GgmlType::BF16) qv = bf16_to_f32(f32_to_bf16(qv));
        dot += static_cast<double>(qv) * key[d];
        abs_dot += std::fabs(static_cast<double>(qv) * key[d]);
      }
      s += std::max(dot, 0.0) * w[h];
      abs_sum += abs_dot * std::fabs(w[h]);
    }
    tol[j] = score_tol(c.dim, c.n_head, abs_sum);
    ASSERT_NEAR(want[j], s, tol[j]) << "ref vs definition, key " << j;
  }

  for (const KernelTable* kt : available_tables()) {
    std::vector<float> got(want.size(), NAN);
    a.out = got.data();
    kt->indexer_scores(a);
    int bad = 0;
    for (size_t j = 0; j < got.size() && bad < 5; ++j)
      if (!(std::fabs(got[j] - want[j]) <= tol[j])) {
        ADD_FAILURE() << table_name(*kt) << " " << ggml_type_name(c.type) << " heads " << c.n_head << " dim " << c.dim
                      << " keys [" << c.k0 << ", " << c.k0 + c.n_keys << "): key " << c.k0 + j << " got " << got[j]
                      << " want " << want[j] << " tol " << tol[j];
        ++bad;
      }
  }
}

TEST(IndexerScores, EveryIsaMatchesReference) {
  uint32_t seed = 1;
  for (GgmlType t : {GgmlType::F32, GgmlType::BF16})
    for (int n_head : {8, 20, 64, 72})
      for (int64_t dim : {int64_t{64}, int64_t{128}})
        for (int64_t n_keys : {int64_t{1}, int64_t{5}, int64_t{13}, int64_t{61}})
          for (int64_t k0 : {int64_t{0}, int64_t{7}}) check({t, n_head, dim, n_keys, k0}, seed++);
}

// The packed query's layout [INDEXER_QUERY_LAYOUT], element by element.
TEST(IndexerScores, PackedQueryLayout) {
  std::mt19937 rng(7);
  const int H = 20, hp = indexer_head_pad(H);
  const int64_t D = 6;
  ASSERT_EQ(hp, 32);
  const auto q = random_floats(rng, H * D), w = random_floats(rng, H);
  std::vector<uint8_t> f(indexer_query_bytes(GgmlType::F32, H, D)), b(indexer_query_bytes(GgmlType::BF16, H, D));
  indexer_pack_query(GgmlType::F32, q.data(), w.data(), H, D, f.data());
  indexer_pack_query(GgmlType::BF16, q.data(), w.data(), H, D, b.data());
  const float* fw = reinterpret_cast<const float*>(f.data());
  const uint16_t* bq = reinterpret_cast<const uint16_t*>(b.data() + hp * sizeof(float));
  for (int h = 0; h < hp; ++h) {
    EXPECT_EQ(fw[h], h < H ? w[h] : 0.0f);
    EXPECT_EQ(reinterpret_cast<const float*>(b.data())[h], h < H ? w[h] : 0.0f);
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_EQ(fw[hp + d * hp + h], h < H ? q[h * D + d] : 0.0f);
      EXPECT_EQ(bq[(d / 2 * hp + h) * 2 + d % 2], h < H ? f32_to_bf16(q[h * D + d]) : 0);
    }
  }
}

}  // namespace
}  // namespace ds::test
