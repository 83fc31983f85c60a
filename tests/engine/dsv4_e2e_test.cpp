// deepseek4 end to end, tokens -> logits, against tiny-dsv4-MXFP4_MOE's reference logits
// (../shared/refdata/README.md, "V3.2, V4, ..."): the 63-token prompt in one batch, token
// by token and in chunks of 7 (chunks end inside compressed blocks, so compressed rows
// are completed from inputs an earlier step left in the cache), and the 190-token x3
// prompt whose ratio-128 rows appear from position 127; f16/bf16/q8_0 caches; two
// sequences in one step.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <nlohmann/json.hpp>
#include <ostream>

#include "refdata.h"
#include "test_util.h"

namespace ds::test {
namespace {

const std::string kModel = "tiny-dsv4-MXFP4_MOE";
// README bars for tiny-dsv4: NMSE and argmax over the 63 rows; x3: NMSE, share of rows.
constexpr double kNmse = 3e-3;
constexpr int kMinArgmax = 57;
constexpr double kNmseX3 = 5e-3;
constexpr double kArgmaxShareX3 = 0.85;

struct Case {
  const KernelTable* kt;
  int chunk;  // 0: one batch
  GgmlType kv_type;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << isa_name(c.kt->isa) << " chunk " << c.chunk << " kv " << ggml_type_name(c.kv_type);
}
std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(isa_name(info.param.kt->isa)) + "_chunk" + std::to_string(info.param.chunk) + "_" +
         ggml_type_name(info.param.kv_type);
}

std::unique_ptr<Runner> runner(const KernelTable* kt, GgmlType kv_type, int n_seqs, int max_tokens,
                               int block_size = 16) {
  auto m = Model::load(ref_path(kModel, ".gguf"));
  EXPECT_TRUE(m.is_ok()) << m.message();
  if (!m) return nullptr;
  RunnerOptions o;
  o.n_threads = 2;
  o.pin_threads = false;
  o.kv_type = kv_type;
  o.kv_block_size = block_size;
  o.n_kv_blocks = n_seqs * ((max_tokens + block_size - 1) / block_size) + 2;
  o.max_batch_tokens = 2 * max_tokens;
  o.max_seq_tokens = max_tokens;
  o.kernels = kt;
  o.repack = false;
  auto r = Runner::create(std::move(*m), o);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r ? std::move(*r) : nullptr;
}

std::vector<Case> cases(std::initializer_list<int> chunks, std::initializer_list<GgmlType> types) {
  std::vector<Case> out;
  for (const KernelTable* kt : available_kernels())
    for (GgmlType t : types)
      for (int chunk : chunks) out.push_back({kt, chunk, t});
  return out;
}

class Dsv4EndToEnd : public testing::TestWithParam<Case> {};

TEST_P(Dsv4EndToEnd, LogitsMatchReference) {
  const Case& c = GetParam();
  auto r = runner(c.kt, c.kv_type, 1, 64);
  ASSERT_TRUE(r);
  const auto tokens = ref_tokens(kModel);
  const auto ref = ref_logits(kModel);
  const int64_t V = ref_n_vocab(kModel), n = static_cast<int64_t>(tokens.size());
  ASSERT_EQ(ref.size(), static_cast<size_t>(n * V));
  const auto ours = eval_chunked(*r, tokens, c.chunk);
  const double e = nmse(ours.data(), ref.data(), ref.size());
  const int agree = argmax_agreement(ours.data(), ref.data(), n, V);
  std::printf("[%s %s chunk %d kv %s] logits nmse %.3g argmax %d/%lld\n", kModel.c_str(), isa_name(c.kt->isa), c.chunk,
              ggml_type_name(c.kv_type), e, agree, static_cast<long long>(n));
  EXPECT_LE(e, c.kv_type == GgmlType::F32 ? kNmse : kKvTypeNmse);
  if (c.kv_type == GgmlType::F32) {
    EXPECT_GE(agree, kMinArgmax);
  }
}
INSTANTIATE_TEST_SUITE_P(F32Kv, Dsv4EndToEnd, testing::ValuesIn(cases({0, 1, 7}, {GgmlType::F32})), case_name);
INSTANTIATE_TEST_SUITE_P(KvTypes, Dsv4EndToEnd,
                         testing::ValuesIn(cases({7}, {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})), case_name);

class Dsv4X3 : public testing::TestWithParam<Case> {};

TEST_P(Dsv4X3, LongPromptRowsMatchReference) {
  const Case& c = GetParam();
  const auto js = nlohmann::json::parse(read_file_text(ref_path(kModel, ".x3.json")));
  const auto tokens = js["tokens"].get<std::vector<int32_t>>();
  const auto rows = js["positions"].get<std::vector<int64_t>>();
  const int64_t V = js["n_vocab"].get<int64_t>(), n = static_cast<int64_t>(tokens.size());
  const auto ref = ref_logits(kModel + ".x3");
  ASSERT_EQ(ref.size(), rows.size() * static_cast<size_t>(V));
  auto r = runner(c.kt, c.kv_type, 1, static_cast<int>(n));
  ASSERT_TRUE(r);
  const auto all = eval_chunked(*r, tokens, c.chunk);
  std::vector<float> ours;
  for (int64_t p : rows) ours.insert(ours.end(), all.begin() + p * V, all.begin() + (p + 1) * V);
  const double e = nmse(ours.data(), ref.data(), ref.size());
  const int agree = argmax_agreement(ours.data(), ref.data(), static_cast<int64_t>(rows.size()), V);
  std::printf("[%s x3 %s chunk %d] logits nmse %.3g argmax %d/%zu\n", kModel.c_str(), isa_name(c.kt->isa), c.chunk, e,
              agree, rows.size());
  EXPECT_LE(e, kNmseX3);
  EXPECT_GE(static_cast<double>(agree), kArgmaxShareX3 * static_cast<double>(rows.size()));
}
INSTANTIATE_TEST_SUITE_P(F32Kv, Dsv4X3, testing::ValuesIn(cases({0, 1, 7}, {GgmlType::F32})), case_name);

// Two sequences in one step (different lengths, so their compressed blocks complete at
// different batch rows) give each the logits it gets alone.
TEST(Dsv4Batch, TwoSequencesInOneStepMatchAlone) {
  const KernelTable* kt = &kern();
  auto r = runner(kt, GgmlType::F32, 2, 64);
  ASSERT_TRUE(r);
  const auto tokens = ref_tokens(kModel);
  const int64_t V = r->model().hp().n_vocab, n = static_cast<int64_t>(tokens.size());
  const auto alone = eval_chunked(*r, tokens, 0);
  const int64_t n2 = 41;
  const std::vector<int32_t> t2(tokens.begin() + 5, tokens.begin() + 5 + n2);
  const auto alone2 = eval_chunked(*r, t2, 0, 1);
  ASSERT_TRUE(r->kv().reserve(0, static_cast<int32_t>(n)).is_ok());
  ASSERT_TRUE(r->kv().reserve(1, static_cast<int32_t>(n2)).is_ok());
  const SeqChunk ch[2] = {{.seq_id = 0, .tokens = tokens, .pos0 = 0, .all_logits = true},
                          {.seq_id = 1, .tokens = t2, .pos0 = 0, .all_logits = true}};
  std::vector<float> both(static_cast<size_t>((n + n2) * V));
  ASSERT_TRUE(r->step(ch, both.data()).is_ok());
  EXPECT_LE(nmse(both.data(), alone.data(), alone.size()), 1e-10);
  EXPECT_LE(nmse(both.data() + n * V, alone2.data(), alone2.size()), 1e-10);
}

// A prefix-cache hit: a second sequence adopts the first one's leading full KV blocks and
// continues from there. With 6-token blocks the shared prefix (42 tokens) ends inside a
// ratio-4 block and inside the first ratio-128 block, whose compressed rows the second
// sequence completes from the compressor inputs stored in the shared blocks; its logits
// must equal the first sequence's bit for bit.
// The cache holds each block's own row (SPEC 3.8 parts, 16-byte aligned): ratio 0 the raw
// kv; ratio 128 also the compressed row and its compressor inputs (v, s: D floats each);
// ratio 4 the inputs of two overlapping windows (4D floats) and the indexer's row and inputs
// (D_I + 4 D_I floats). A block of the pool is block_size tokens of the sum.
TEST(Dsv4Cache, EachBlockHoldsItsOwnRowSize) {
  auto m = Model::load(ref_path(kModel, ".gguf"));
  ASSERT_TRUE(m.is_ok()) << m.message();
  const HParams& hp = (*m)->hp();
  auto a16 = [](size_t n) { return (n + 15) / 16 * 16; };
  const size_t D = static_cast<size_t>(hp.n_embd_head_k), DI = static_cast<size_t>(hp.n_idx_dim);
  size_t want = 0, widest = 0;
  std::set<int> ratios;
  for (int il = 0; il < hp.n_layer; ++il) {
    const int ratio = hp.compress_ratio[static_cast<size_t>(il)];
    ratios.insert(ratio);
    size_t row = a16(2 * D);  // raw, f16
    if (ratio == 128) row += a16(2 * D) + 2 * D * 4;
    if (ratio == 4) row += a16(2 * D) + 4 * D * 4 + DI * 4 + 4 * DI * 4;
    row = a16(row);
    EXPECT_EQ((*m)->kv_layer_row_bytes(il, GgmlType::F16), row) << "block " << il << " ratio " << ratio;
    want += row;
    widest = std::max(widest, row);
  }
  EXPECT_EQ(ratios, (std::set<int>{0, 4, 128}));  // the file exercises every row kind
  EXPECT_EQ((*m)->kv_token_bytes(GgmlType::F16), want);
  EXPECT_LT(want, widest * static_cast<size_t>(hp.n_layer));
  auto r = runner(available_kernels()[0], GgmlType::F16, 1, 64);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kv().block_bytes(), want * 16);
}

TEST(Dsv4PrefixSharing, AdoptedBlocksRestoreCompressedState) {
  const KernelTable* kt = &kern();
  const auto js = nlohmann::json::parse(read_file_text(ref_path(kModel, ".x3.json")));
  const auto tokens = js["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int bs = 6, n_shared_blocks = 7;
  const int64_t p0 = bs * n_shared_blocks;
  auto r = runner(kt, GgmlType::F32, 2, static_cast<int>(n), bs);
  ASSERT_TRUE(r);
  const int64_t V = r->model().hp().n_vocab;
  ASSERT_TRUE(r->kv().reserve(0, static_cast<int32_t>(n)).is_ok());
  std::vector<float> a(static_cast<size_t>(n * V));
  const SeqChunk ca{.seq_id = 0, .tokens = tokens, .pos0 = 0, .all_logits = true};
  ASSERT_TRUE(r->step(std::span<const SeqChunk>(&ca, 1), a.data()).is_ok());

  const std::vector<int32_t> blocks = r->kv().blocks(0);
  ASSERT_TRUE(r->kv().adopt(1, std::span<const int32_t>(blocks.data(), n_shared_blocks)).is_ok());
  ASSERT_TRUE(r->kv().reserve(1, static_cast<int32_t>(n)).is_ok());
  const std::vector<int32_t> rest(tokens.begin() + p0, tokens.end());
  std::vector<float> b(static_cast<size_t>((n - p0) * V));
  for (int64_t p = 0; p < n - p0; p += 7) {  // in chunks, ending mid-block again
    const int64_t m = std::min<int64_t>(7, n - p0 - p);
    const SeqChunk cb{.seq_id = 1,
                      .tokens = std::span<const int32_t>(rest.data() + p, static_cast<size_t>(m)),
                      .pos0 = static_cast<int32_t>(p0 + p),
                      .all_logits = true};
    ASSERT_TRUE(r->step(std::span<const SeqChunk>(&cb, 1), b.data() + p * V).is_ok());
  }
  const double e = nmse(b.data(), a.data() + p0 * V, b.size());
  std::printf("[%s prefix %lld of %lld shared] nmse vs unshared %.3g\n", kModel.c_str(), static_cast<long long>(p0),
              static_cast<long long>(n), e);
  EXPECT_LE(e, 1e-10);
}

}  // namespace
}  // namespace ds::test
