// [BATCH_INVARIANT] A sequence's logits are bit-identical whether it runs alone or batched
// with other sequences: decode batches of 1, 2, 7 and 16 sequences, and steps mixing
// prefill chunks with decode tokens. Each sequence i runs a different token stream (the
// refdata prompt rotated by 3i) so that rows differ. One step longer than a dense FFN
// pass (kFfnTokChunk) checks that the FFN's token chunks change no bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <cstring>

#include "model/ffn.h"
#include "refdata.h"

namespace ds::test {
namespace {

constexpr int kPrefill = 12;
constexpr int kDecode = 6;
constexpr int kLen = kPrefill + kDecode;
constexpr int kMaxSeqs = 16;

std::vector<int32_t> seq_tokens(const std::vector<int32_t>& base, int i) {
  std::vector<int32_t> t(kLen);
  for (int j = 0; j < kLen; ++j) t[static_cast<size_t>(j)] = base[static_cast<size_t>((j + 3 * i) % base.size())];
  return t;
}

// Logits [kLen][V] of sequence i evaluated alone: prefill in one chunk, then decode steps.
std::vector<float> solo(Runner& r, const std::vector<int32_t>& toks) {
  const int64_t V = r.model().hp().n_vocab;
  std::vector<float> out(static_cast<size_t>(kLen * V));
  EXPECT_TRUE(r.kv().reserve(100, kLen).is_ok());
  SeqChunk ch{.seq_id = 100, .tokens = std::span(toks.data(), kPrefill), .pos0 = 0, .all_logits = true};
  EXPECT_TRUE(r.step(std::span(&ch, 1), out.data()).is_ok());
  for (int p = kPrefill; p < kLen; ++p) {
    ch = SeqChunk{.seq_id = 100, .tokens = std::span(toks.data() + p, 1), .pos0 = p, .all_logits = false};
    EXPECT_TRUE(r.step(std::span(&ch, 1), out.data() + p * V).is_ok());
  }
  r.kv().release(100);
  return out;
}

// Bitwise equality; on a mismatch, the first differing element is reported.
testing::AssertionResult same_bits(const float* a, const float* b, int64_t n) {
  if (std::memcmp(a, b, static_cast<size_t>(n) * 4) == 0) return testing::AssertionSuccess();
  int64_t i = 0;
  while (std::memcmp(a + i, b + i, 4) == 0) ++i;
  return testing::AssertionFailure() << "first difference at element " << i << ": " << a[i] << " vs " << b[i]
                                     << " (batched vs alone)";
}

struct Case {
  RefModel model;
  const KernelTable* kt;
};
// Readable test parameters in gtest's messages.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model.name << " " << isa_name(c.kt->isa);
}

class BatchInvariance : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    r_ = make_runner(GetParam().model.name, GetParam().kt, GgmlType::F16, kMaxSeqs + 1, 2, kMaxSeqs * kLen + 8);
    ASSERT_TRUE(r_);
    V_ = r_->model().hp().n_vocab;
    const auto base = ref_tokens(GetParam().model.name);
    for (int i = 0; i < kMaxSeqs; ++i) {
      toks_.push_back(seq_tokens(base, i));
      ref_.push_back(solo(*r_, toks_.back()));
    }
  }
  std::unique_ptr<Runner> r_;
  int64_t V_ = 0;
  std::vector<std::vector<int32_t>> toks_;
  std::vector<std::vector<float>> ref_;
};

TEST_P(BatchInvariance, DecodeBatchesOf1_2_7_16) {
  for (int B : {1, 2, 7, 16}) {
    for (int i = 0; i < B; ++i) ASSERT_TRUE(r_->kv().reserve(i, kLen).is_ok());
    // Prefill every sequence in one step (B chunks), then decode all B together.
    std::vector<SeqChunk> chunks;
    for (int i = 0; i < B; ++i) {
      chunks.push_back({.seq_id = i, .tokens = std::span(toks_[i].data(), kPrefill), .pos0 = 0, .all_logits = true});
    }
    std::vector<float> logits(static_cast<size_t>(B * kPrefill * V_));
    ASSERT_TRUE(r_->step(chunks, logits.data()).is_ok());
    for (int i = 0; i < B; ++i) {
      EXPECT_TRUE(same_bits(logits.data() + i * kPrefill * V_, ref_[i].data(), kPrefill * V_))
          << "B=" << B << " seq " << i << " prefill rows differ from the solo run";
    }
    for (int p = kPrefill; p < kLen; ++p) {
      chunks.clear();
      for (int i = 0; i < B; ++i)
        chunks.push_back({.seq_id = i, .tokens = std::span(toks_[i].data() + p, 1), .pos0 = p});
      ASSERT_TRUE(r_->step(chunks, logits.data()).is_ok());
      for (int i = 0; i < B; ++i) {
        EXPECT_TRUE(same_bits(logits.data() + i * V_, ref_[i].data() + p * V_, V_))
            << "B=" << B << " seq " << i << " decode position " << p << " differs from the solo run";
      }
    }
    for (int i = 0; i < B; ++i) r_->kv().release(i);
  }
}

TEST_P(BatchInvariance, MixedPrefillAndDecode) {
  // seq 0 prefilled alone; then one step: seq 0 decodes, seq 1 prefills in full, seq 2 prefills
  // its first 5 tokens; then seq 2 finishes its prefill (7 tokens) next to two decodes.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r_->kv().reserve(i, kLen).is_ok());
  std::vector<float> logits(static_cast<size_t>(kLen * 3 * V_));
  SeqChunk c0{.seq_id = 0, .tokens = std::span(toks_[0].data(), kPrefill), .pos0 = 0, .all_logits = true};
  ASSERT_TRUE(r_->step(std::span(&c0, 1), logits.data()).is_ok());
  EXPECT_TRUE(same_bits(logits.data(), ref_[0].data(), kPrefill * V_));

  std::vector<SeqChunk> chunks = {
      {.seq_id = 0, .tokens = std::span(toks_[0].data() + kPrefill, 1), .pos0 = kPrefill},
      {.seq_id = 1, .tokens = std::span(toks_[1].data(), kPrefill), .pos0 = 0, .all_logits = true},
      {.seq_id = 2, .tokens = std::span(toks_[2].data(), 5), .pos0 = 0, .all_logits = true},
  };
  ASSERT_TRUE(r_->step(chunks, logits.data()).is_ok());
  EXPECT_TRUE(same_bits(logits.data(), ref_[0].data() + kPrefill * V_, V_)) << "decode row of seq 0";
  EXPECT_TRUE(same_bits(logits.data() + V_, ref_[1].data(), kPrefill * V_)) << "prefill rows of seq 1";
  EXPECT_TRUE(same_bits(logits.data() + (1 + kPrefill) * V_, ref_[2].data(), 5 * V_)) << "first chunk of seq 2";

  chunks = {
      {.seq_id = 1, .tokens = std::span(toks_[1].data() + kPrefill, 1), .pos0 = kPrefill},
      {.seq_id = 2, .tokens = std::span(toks_[2].data() + 5, kPrefill - 5), .pos0 = 5, .all_logits = true},
      {.seq_id = 0, .tokens = std::span(toks_[0].data() + kPrefill + 1, 1), .pos0 = kPrefill + 1},
  };
  ASSERT_TRUE(r_->step(chunks, logits.data()).is_ok());
  EXPECT_TRUE(same_bits(logits.data(), ref_[1].data() + kPrefill * V_, V_)) << "decode row of seq 1";
  EXPECT_TRUE(same_bits(logits.data() + V_, ref_[2].data() + 5 * V_, (kPrefill - 5) * V_)) << "second chunk of seq 2";
  EXPECT_TRUE(same_bits(logits.data() + (1 + kPrefill - 5) * V_, ref_[0].data() + (kPrefill + 1) * V_, V_))
      << "decode row of seq 0";
  for (int i = 0; i < 3; ++i) r_->kv().release(i);
}

TEST_P(BatchInvariance, StepLongerThanAnFfnChunk) {
  // Every sequence's whole stream in one step: 16 x 18 = 288 rows, so the dense FFN runs in
  // two chunks and sequence 14's rows straddle the boundary.
  static_assert(kMaxSeqs * kLen > kFfnTokChunk && kMaxSeqs * kLen < 2 * kFfnTokChunk);
  std::vector<SeqChunk> chunks;
  for (int i = 0; i < kMaxSeqs; ++i) {
    ASSERT_TRUE(r_->kv().reserve(i, kLen).is_ok());
    chunks.push_back({.seq_id = i, .tokens = std::span(toks_[i].data(), kLen), .pos0 = 0, .all_logits = true});
  }
  std::vector<float> logits(static_cast<size_t>(kMaxSeqs * kLen * V_));
  ASSERT_TRUE(r_->step(chunks, logits.data()).is_ok());
  for (int i = 0; i < kMaxSeqs; ++i) {
    EXPECT_TRUE(same_bits(logits.data() + i * kLen * V_, ref_[i].data(), kLen * V_))
        << "seq " << i << " rows of the 288-token step differ from the solo run";
    r_->kv().release(i);
  }
}

// The fast build checks a dense, an MoE and the sparse-attention model on the best ISA
// (tiny-dsv32: positions 16-17 select 16 of their keys, so decode batches run the
// indexer's selection and the sparse MLA for many sequences at once); the slow build
// (DS_INVARIANCE_FULL) every model under every ISA.
std::vector<Case> cases() {
  std::vector<Case> out;
#ifdef DS_INVARIANCE_FULL
  for (const RefModel& m : ref_models())
    for (const KernelTable* kt : available_kernels()) out.push_back({m, kt});
#else
  for (const RefModel& m : ref_models())
    if (m.name == "tiny-llama-Q4_K_M" || m.name == "tiny-dsv3-Q4_K_M" || m.indexer) out.push_back({m, &kern()});
#endif
  return out;
}
std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model.name + "_" + isa_name(info.param.kt->isa);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}
INSTANTIATE_TEST_SUITE_P(Refdata, BatchInvariance, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace ds::test
