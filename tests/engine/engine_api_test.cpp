// The Engine contract (include/ds/engine.h) on a reference model: sizing, KV block
// accounting (reserve is all-or-nothing, running out is a Status error), sharing through
// seq_adopt, step() input validation, and that logits through the Engine equal the
// Runner's for the same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "ds/engine.h"
#include "ds/tokenizer.h"
#include "refdata.h"
#include "test_util.h"

namespace ds::test {
namespace {

constexpr const char* kModel = "tiny-llama-Q4_K_M";

EngineOptions opts(int n_ctx, int n_parallel, const char* kv_type, int64_t kv_bytes = 0, int max_batch = 512) {
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.n_parallel = n_parallel;
  o.kv_type = kv_type;
  o.kv_bytes = kv_bytes;
  o.kv_block_size = 16;
  o.max_batch_tokens = max_batch;
  return o;
}

std::unique_ptr<Engine> make_engine(EngineOptions o) {
  o.model_path = ref_path(kModel, ".gguf");
  o.n_threads = 2;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return e ? std::move(*e) : nullptr;
}

// One step of `toks` at pos0 for sequence seq; the logits of its last token.
std::vector<float> step_logits(Engine& e, int32_t seq, std::span<const int32_t> toks, int32_t pos0) {
  std::vector<float> logits(static_cast<size_t>(e.info().n_vocab));
  const SeqChunk c{.seq_id = seq, .tokens = toks, .pos0 = pos0};
  const Status st = e.step(std::span(&c, 1), logits.data());
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

// Sequence 1 computes tokens 0..31 (two full blocks of 16) and then decodes token 32: its logits.
std::vector<float> owner_decode(Engine& e, const std::vector<int32_t>& tokens) {
  EXPECT_TRUE(e.seq_reserve(1, 33).is_ok());
  (void)step_logits(e, 1, std::span(tokens.data(), 32), 0);
  return step_logits(e, 1, std::span(tokens.data() + 32, 1), 32);
}

TEST(EngineApi, InfoAndSizing) {
  auto e = make_engine(opts(64, 3, "f32"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->info().arch, "llama");
  EXPECT_EQ(e->info().n_vocab, 32256);
  EXPECT_EQ(e->info().n_layer, 4);
  EXPECT_EQ(e->info().n_embd, 256);
  EXPECT_EQ(e->info().bos, 32013);
  EXPECT_GT(e->info().n_params, 0);
  EXPECT_EQ(e->n_ctx(), 64);
  EXPECT_EQ(e->kv_block_size(), 16);
  EXPECT_EQ(e->kv_blocks_total(), 12);  // ceil(64/16) * 3
  EXPECT_EQ(e->kv_blocks_free(), 12);
  EXPECT_EQ(e->tokenizer().n_vocab(), 32256);
}

TEST(EngineApi, KvBytesBudget) {
  // llama tiny: 4 layers x (K 128 + V 128) f32 = 4096 bytes per token, 64 KiB per block of 16.
  auto e = make_engine(opts(4096, 4, "f32", 5 * 65536 + 100));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kv_blocks_total(), 5);
}

TEST(EngineApi, BadOptionsAreErrors) {
  EngineOptions o = opts(64, 1, "q4_0");
  o.model_path = ref_path(kModel, ".gguf");
  auto e = Engine::create(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("q4_0"), std::string::npos) << e.message();
  o.kv_type = "f16";
  o.model_path = ref_path(kModel, ".missing.gguf");
  EXPECT_FALSE(Engine::create(o).is_ok());
}

TEST(EngineApi, ReserveIsAllOrNothingAndRunningOutIsAnError) {
  auto e = make_engine(opts(64, 2, "f16"));
  ASSERT_TRUE(e);
  ASSERT_EQ(e->kv_blocks_total(), 8);
  ASSERT_TRUE(e->seq_reserve(1, 40).is_ok());  // 3 blocks
  EXPECT_EQ(e->kv_blocks_free(), 5);
  ASSERT_TRUE(e->seq_reserve(1, 20).is_ok());  // never shrinks
  EXPECT_EQ(e->seq_blocks(1).size(), 3u);
  ASSERT_TRUE(e->seq_reserve(2, 64).is_ok());  // 4 blocks
  EXPECT_EQ(e->kv_blocks_free(), 1);
  Status st = e->seq_reserve(3, 33);  // needs 3, 1 free
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("KV cache full"), std::string::npos) << st.message();
  EXPECT_EQ(e->kv_blocks_free(), 1);  // nothing taken
  EXPECT_TRUE(e->seq_blocks(3).empty());
  EXPECT_FALSE(e->seq_reserve(4, 65).is_ok());  // beyond n_ctx
  e->seq_release(2);
  EXPECT_EQ(e->kv_blocks_free(), 5);
  EXPECT_TRUE(e->seq_reserve(3, 33).is_ok());
}

TEST(EngineApi, AdoptSharesBlocks) {
  auto e = make_engine(opts(64, 2, "f32"));
  ASSERT_TRUE(e);
  const auto tokens = ref_tokens(kModel);
  const std::vector<float> a = owner_decode(*e, tokens);
  // Sequence 2 adopts the two full blocks and decodes the same token: same logits.
  const auto blocks = e->seq_blocks(1);
  const int free_before = e->kv_blocks_free();
  ASSERT_TRUE(e->seq_adopt(2, std::span(blocks.data(), 2)).is_ok());
  EXPECT_EQ(e->kv_blocks_free(), free_before);
  ASSERT_TRUE(e->seq_reserve(2, 33).is_ok());
  const std::vector<float> b = step_logits(*e, 2, std::span(tokens.data() + 32, 1), 32);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  EXPECT_FALSE(e->seq_adopt(2, std::span(blocks.data(), 1)).is_ok());  // already holds blocks
  e->seq_release(1);
  EXPECT_EQ(e->kv_blocks_free(), free_before);  // seq 1 frees its own third block; the shared two stay
  e->seq_release(2);
  EXPECT_EQ(e->kv_blocks_free(), e->kv_blocks_total());
}

// deepseek32 keeps each token's indexer key in its KV row: the budget buys blocks of
// 16 tokens x 4 blocks x (latent 288 f32 + indexer key 64 f32) = 90112 bytes, and a
// sequence that adopts another's full blocks scores their indexer keys (position 32 selects
// 16 of 33 keys) exactly as the owner does.
TEST(EngineApi, SparseAttentionSizingAndAdoptedIndexerKeys) {
  EngineOptions o = opts(64, 2, "f32", 5 * 90112 + 100);
  o.model_path = ref_path("tiny-dsv32-Q4_K_M", ".gguf");
  o.n_threads = 2;
  auto created = Engine::create(o);
  ASSERT_TRUE(created.is_ok()) << created.message();
  Engine* e = created->get();
  EXPECT_EQ(e->info().arch, "deepseek32");
  EXPECT_EQ(e->kv_blocks_total(), 5);
  const auto tokens = ref_tokens("tiny-dsv32-Q4_K_M");
  const std::vector<float> a = owner_decode(*e, tokens);
  const auto blocks = e->seq_blocks(1);
  ASSERT_TRUE(e->seq_adopt(2, std::span(blocks.data(), 2)).is_ok());
  ASSERT_TRUE(e->seq_reserve(2, 33).is_ok());
  const std::vector<float> b = step_logits(*e, 2, std::span(tokens.data() + 32, 1), 32);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  e->seq_release(1);
  e->seq_release(2);
  EXPECT_EQ(e->kv_blocks_free(), e->kv_blocks_total());
}

// Prefix reuse inside a block: a sequence that shares block 0 of another and takes a copy of
// its block 1 (whose first 15 rows it needs) computes only token 31; its logits and greedy
// text equal those of a sequence that computed tokens 0..30 itself, and the source block is
// left as it was.
TEST(EngineApi, CopiedBlockReusesItsRowsExactly) {
  for (const char* kv : {"f16", "q8_0"}) {
    auto e = make_engine(opts(64, 4, kv));
    ASSERT_TRUE(e);
    const auto tokens = ref_tokens(kModel);
    ASSERT_GE(tokens.size(), 33u);
    const size_t V = static_cast<size_t>(e->info().n_vocab);
    auto run = [&](int32_t seq, std::span<const int32_t> toks, int32_t pos0, std::vector<float>* logits) {
      SeqChunk c{.seq_id = seq, .tokens = toks, .pos0 = pos0};
      logits->resize(V);
      EXPECT_TRUE(e->step(std::span(&c, 1), logits->data()).is_ok());
    };
    auto greedy = [&](int32_t seq, int32_t tok, std::vector<float>* first) {
      std::vector<int32_t> out;
      std::vector<float> l;
      for (int i = 0; i < 8; ++i) {
        run(seq, std::span(&tok, 1), 31 + i, &l);
        if (i == 0) *first = l;
        tok = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        out.push_back(tok);
      }
      return out;
    };
    std::vector<float> l_src, l_shared, l_again, l_ref, l_copy;
    // The source: 32 tokens in one chunk fill blocks 0 and 1.
    ASSERT_TRUE(e->seq_reserve(0, 33).is_ok());
    run(0, std::span(tokens.data(), 32), 0, &l_src);
    const auto src = e->seq_blocks(0);
    // What the source's next step gives, read through a sequence sharing both blocks.
    ASSERT_TRUE(e->seq_adopt(3, std::span(src.data(), 2)).is_ok());
    ASSERT_TRUE(e->seq_reserve(3, 33).is_ok());
    run(3, std::span(tokens.data() + 32, 1), 32, &l_shared);
    // Without any reuse: tokens 0..30 computed, then 31 and seven more decoded.
    ASSERT_TRUE(e->seq_reserve(1, 40).is_ok());
    run(1, std::span(tokens.data(), 31), 0, &l_ref);
    const std::vector<int32_t> ref = greedy(1, tokens[31], &l_ref);
    // With reuse: block 0 shared, block 1 copied, only token 31 computed.
    ASSERT_TRUE(e->seq_adopt(2, std::span(src.data(), 1)).is_ok());
    const int free_before = e->kv_blocks_free();
    ASSERT_TRUE(e->seq_copy_block(2, src[1]).is_ok()) << kv;
    EXPECT_EQ(e->kv_blocks_free(), free_before - 1);
    const auto blocks2 = e->seq_blocks(2);
    ASSERT_EQ(blocks2.size(), 2u);
    EXPECT_EQ(blocks2[0], src[0]);
    EXPECT_NE(blocks2[1], src[1]);
    ASSERT_TRUE(e->seq_reserve(2, 40).is_ok());
    const std::vector<int32_t> got = greedy(2, tokens[31], &l_copy);
    EXPECT_EQ(got, ref) << kv;
    EXPECT_EQ(std::memcmp(l_copy.data(), l_ref.data(), V * sizeof(float)), 0) << kv;
    // The copy's writes (positions 31..38) did not touch the source's block 1.
    run(0, std::span(tokens.data() + 32, 1), 32, &l_again);
    EXPECT_EQ(std::memcmp(l_again.data(), l_shared.data(), V * sizeof(float)), 0) << kv;
    for (int32_t s = 0; s < 4; ++s) e->seq_release(s);
    EXPECT_EQ(e->kv_blocks_free(), e->kv_blocks_total());
    EXPECT_FALSE(e->seq_copy_block(5, src[1]).is_ok());  // a free block cannot be copied
    EXPECT_TRUE(e->seq_blocks(5).empty());
  }
}

TEST(EngineApi, StepValidatesItsInput) {
  auto e = make_engine(opts(64, 2, "f16", 0, 16));
  ASSERT_TRUE(e);
  std::vector<float> logits(static_cast<size_t>(e->info().n_vocab) * 16);
  const std::vector<int32_t> toks(20, 100);
  SeqChunk c{.seq_id = 5, .tokens = std::span(toks.data(), 4), .pos0 = 0};
  EXPECT_FALSE(e->step(std::span(&c, 1), logits.data()).is_ok());  // no blocks reserved
  ASSERT_TRUE(e->seq_reserve(5, 20).is_ok());
  c.tokens = std::span(toks.data(), 17);
  EXPECT_FALSE(e->step(std::span(&c, 1), logits.data()).is_ok());  // more than max_batch_tokens
  const std::vector<int32_t> bad = {1, 40000};
  c.tokens = bad;
  EXPECT_FALSE(e->step(std::span(&c, 1), logits.data()).is_ok());  // id outside the vocabulary
  c.tokens = std::span(toks.data(), 4);
  c.pos0 = 30;
  EXPECT_FALSE(e->step(std::span(&c, 1), logits.data()).is_ok());  // beyond the reserved blocks
  c.pos0 = 0;
  const SeqChunk twice[2] = {c, c};
  EXPECT_FALSE(e->step(std::span(twice, 2), logits.data()).is_ok());  // one sequence twice
  EXPECT_TRUE(e->step(std::span(&c, 1), logits.data()).is_ok());
}

TEST(EngineApi, EngineLogitsMatchReference) {
  auto e = make_engine(opts(64, 1, "f32", 0, 64));
  ASSERT_TRUE(e);
  const auto tokens = ref_tokens(kModel);
  const auto ref = ref_logits(kModel);
  const int64_t V = e->info().n_vocab, n = static_cast<int64_t>(tokens.size());
  ASSERT_TRUE(e->seq_reserve(0, static_cast<int32_t>(n)).is_ok());
  std::vector<float> ours(static_cast<size_t>(n * V));
  const SeqChunk c{.seq_id = 0, .tokens = tokens, .pos0 = 0, .all_logits = true};
  ASSERT_TRUE(e->step(std::span(&c, 1), ours.data()).is_ok());
  EXPECT_LE(nmse(ours.data(), ref.data(), ref.size()), kEndToEndNmse);
  EXPECT_GE(argmax_agreement(ours.data(), ref.data(), n, V), kMinArgmaxAgree);
  // The tokenizer reproduces the reference's prompt ids.
  const std::string prompt = read_file_text(shared_path("refdata/prompt.txt"));
  auto ids = e->tokenizer().encode(prompt, true);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, tokens);
}

TEST(EngineApi, ProfilingAttributesStepTime) {
  auto e = make_engine(opts(64, 1, "f32", 0, 64));
  ASSERT_TRUE(e);
  const auto tokens = ref_tokens(kModel);
  ASSERT_TRUE(e->seq_reserve(0, 64).is_ok());
  std::vector<float> logits(static_cast<size_t>(e->info().n_vocab));
  SeqChunk c{.seq_id = 0, .tokens = std::span(tokens.data(), 8), .pos0 = 0};
  ASSERT_TRUE(e->step(std::span(&c, 1), logits.data()).is_ok());
  for (const auto& [stage, s] : e->profile()) EXPECT_EQ(s, 0.0) << stage << " counted while profiling was off";

  e->set_profiling(true);
  c = {.seq_id = 0, .tokens = std::span(tokens.data() + 8, 8), .pos0 = 8};
  ASSERT_TRUE(e->step(std::span(&c, 1), logits.data()).is_ok());
  const auto prof = e->profile();
  ASSERT_EQ(prof.size(), std::size(kProfileStages));
  std::map<std::string, double> by;
  for (size_t i = 0; i < prof.size(); ++i) {
    EXPECT_EQ(prof[i].first, kProfileStages[i]);
    by[prof[i].first] = prof[i].second;
  }
  EXPECT_GT(by["attention"], 0.0);
  EXPECT_GT(by["ffn_dense"], 0.0);
  EXPECT_GT(by["output_head"], 0.0);
  EXPECT_GT(by["quantize_act"], 0.0);
  EXPECT_GT(by["norms+rope"], 0.0);
  EXPECT_EQ(by["ffn_experts"], 0.0);  // llama has no MoE
  // Two threads: thread 0 waits for the other at the end of some parallel region (at the
  // least the time to see it finish); that wait is moved out of the other stages.
  EXPECT_GT(by["sync"], 0.0);
  for (const auto& [stage, s] : prof) EXPECT_GE(s, 0.0) << stage;
  e->profile_reset();
  for (const auto& [stage, s] : e->profile()) EXPECT_EQ(s, 0.0) << stage;
}

TEST(EngineApi, OneThreadProfilesNoSync) {
  EngineOptions o = opts(64, 1, "f32", 0, 64);
  o.model_path = ref_path(kModel, ".gguf");
  o.n_threads = 1;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.is_ok()) << e.message();
  const auto tokens = ref_tokens(kModel);
  ASSERT_TRUE((*e)->seq_reserve(0, 64).is_ok());
  std::vector<float> logits(static_cast<size_t>((*e)->info().n_vocab));
  (*e)->set_profiling(true);
  const SeqChunk c{.seq_id = 0, .tokens = std::span(tokens.data(), 8), .pos0 = 0};
  ASSERT_TRUE((*e)->step(std::span(&c, 1), logits.data()).is_ok());
  double total = 0.0;
  for (const auto& [stage, s] : (*e)->profile()) {
    if (stage == "sync") {
      EXPECT_EQ(s, 0.0);
    }
    total += s;
  }
  EXPECT_GT(total, 0.0);
}

TEST(RunnerScratch, FullBatchFitsTheScratchOfEveryModel) {
  // A step of max_batch_tokens rows (4 sequences, every row's logits) stays inside the
  // arena sized at load; an overflow would abort the process.
  for (const RefModel& m : ref_models()) {
    auto r = make_runner(m.name, &kern(), GgmlType::F32, 4, 2, 200);
    ASSERT_TRUE(r);
    const auto toks = ref_tokens(m.name);
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < 4; ++s) {
      ASSERT_TRUE(r->kv().reserve(s, 50).is_ok());
      chunks.push_back({.seq_id = s, .tokens = std::span(toks.data() + s, 50), .pos0 = 0, .all_logits = true});
    }
    std::vector<float> logits(static_cast<size_t>(200 * r->model().hp().n_vocab));
    ASSERT_TRUE(r->step(chunks, logits.data()).is_ok());
    EXPECT_LE(r->scratch_high_water(), r->scratch_capacity());
    EXPECT_GT(r->scratch_high_water(), r->scratch_capacity() / 8) << m.name << ": scratch estimate far too large";
    std::printf("[%s] scratch %zu of %zu bytes\n", m.name.c_str(), r->scratch_high_water(), r->scratch_capacity());

    // And a runner sized for single-token steps (fixed per-allocation overheads dominate).
    auto r1 = make_runner(m.name, &kern(), GgmlType::F32, 1, 2, 1);
    ASSERT_TRUE(r1);
    ASSERT_TRUE(r1->kv().reserve(0, 4).is_ok());
    for (int p = 0; p < 4; ++p) {
      const SeqChunk c{.seq_id = 0, .tokens = std::span(toks.data() + p, 1), .pos0 = p};
      ASSERT_TRUE(r1->step(std::span(&c, 1), logits.data()).is_ok());
    }
    EXPECT_LE(r1->scratch_high_water(), r1->scratch_capacity());
    std::printf("[%s] one-token scratch %zu of %zu bytes\n", m.name.c_str(), r1->scratch_high_water(),
                r1->scratch_capacity());
  }
}

}  // namespace
}  // namespace ds::test
