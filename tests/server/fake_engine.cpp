#include "fake_engine.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace ds::test {

FakeEngine::FakeEngine(FakeEngineOptions o)
    : o_(o), ref_(o.n_blocks, 0), content_(o.n_blocks, std::vector<int32_t>(o.block_size, -1)) {
  info_.arch = "fake";
  info_.name = "fake-model";
  info_.n_vocab = kFakeVocab;
  info_.n_ctx_train = o.n_ctx;
  info_.bos = kFakeBos;
  info_.eos = kFakeEos;
}

const Tokenizer& FakeEngine::tokenizer() const {
  std::abort();
}

int FakeEngine::kv_blocks_free() const {
  std::lock_guard lk(mu_);
  return static_cast<int>(std::count(ref_.begin(), ref_.end(), 0));
}

Status FakeEngine::seq_reserve(int32_t seq, int32_t n_tokens) {
  std::lock_guard lk(mu_);
  auto& t = tables_[seq];
  const int need = (n_tokens + o_.block_size - 1) / o_.block_size - static_cast<int>(t.size());
  if (need <= 0) return Status::ok();
  if (std::count(ref_.begin(), ref_.end(), 0) < need) return Status::error("fake: no free KV blocks");
  for (int id = 0; id < o_.n_blocks && static_cast<int>(t.size()) * o_.block_size < n_tokens; ++id) {
    if (ref_[id] == 0) ref_[id] = 1, t.push_back(id);
  }
  return Status::ok();
}

void FakeEngine::seq_release(int32_t seq) {
  std::lock_guard lk(mu_);
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (int32_t id : it->second) --ref_[id];
  tables_.erase(it);
}

std::vector<int32_t> FakeEngine::seq_blocks(int32_t seq) const {
  std::lock_guard lk(mu_);
  auto it = tables_.find(seq);
  return it == tables_.end() ? std::vector<int32_t>{} : it->second;
}

Status FakeEngine::seq_adopt(int32_t seq, std::span<const int32_t> ids) {
  std::lock_guard lk(mu_);
  auto& t = tables_[seq];
  if (!t.empty()) return Status::error("fake: seq_adopt on a sequence with blocks");
  for (int32_t id : ids) ++ref_[id], t.push_back(id);
  return Status::ok();
}

Status FakeEngine::seq_copy_block(int32_t seq, int32_t src) {
  std::lock_guard lk(mu_);
  if (ref_[src] <= 0) return Status::error("fake: seq_copy_block from a free block");
  for (int id = 0; id < o_.n_blocks; ++id) {
    if (ref_[id] != 0) continue;
    ref_[id] = 1;
    content_[id] = content_[src];
    tables_[seq].push_back(id);
    return Status::ok();
  }
  return Status::error("fake: no free KV blocks");
}

void FakeEngine::block_retain(int32_t id) {
  std::lock_guard lk(mu_);
  ++ref_[id];
}

void FakeEngine::block_release(int32_t id) {
  std::lock_guard lk(mu_);
  --ref_[id];
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

void FakeEngine::model_logits(std::span<const int32_t> history, int eos_percent, float* row) {
  uint64_t h = 7;
  for (int32_t t : history) h = mix(h, static_cast<uint32_t>(t));
  for (int i = 0; i < kFakeVocab; ++i) row[i] = static_cast<float>(mix(h, i) % 1000) / 400.0f;
  int32_t best;
  const int r = static_cast<int>((h >> 20) % 100);
  if (!history.empty() && history.back() == 0xC3)
    best = 0xA9;
  else if (r < eos_percent)
    best = kFakeEos;
  else if (r < 8)
    best = 0xC3;
  else if (r < 20)
    best = ' ';
  else
    best = 'a' + static_cast<int>((h >> 40) % 26);
  // The UTF-8 lead byte must be followed by its continuation: nothing else is close.
  row[best] += history.empty() || history.back() != 0xC3 ? 4.0f : 100.0f;
  if (history.empty() || history.back() != 0xC3) {
    for (int i = 0x80; i < 0xC0; ++i) row[i] = -100.0f;  // no stray continuation bytes
    for (int i = 0xC0; i < 0x100; ++i)
      if (i != best) row[i] = -100.0f;
  } else {
    for (int i = 0; i < kFakeVocab; ++i)
      if (i != best) row[i] = -100.0f;
  }
}

void FakeEngine::script_logits(std::span<const int32_t> history, const std::string& script, float* row) {
  static const std::string kMarker = "<|assistant|>";
  size_t start = 0;  // first position after the last marker
  for (size_t i = kMarker.size(); i <= history.size(); ++i) {
    bool match = true;
    for (size_t k = 0; k < kMarker.size() && match; ++k) {
      match = history[i - kMarker.size() + k] == static_cast<unsigned char>(kMarker[k]);
    }
    if (match) start = i;
  }
  const size_t at = history.size() - start;
  for (int i = 0; i < kFakeVocab; ++i) row[i] = -100.0f;
  row[at < script.size() ? static_cast<unsigned char>(script[at]) : kFakeEos] = 100.0f;
}

std::vector<int32_t> FakeEngine::greedy(std::vector<int32_t> hist, int n, int eos_percent) {
  std::vector<int32_t> out;
  std::vector<float> row(kFakeVocab);
  for (int i = 0; i < n; ++i) {
    model_logits(hist, eos_percent, row.data());
    const int32_t t = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    if (t == kFakeEos) break;
    out.push_back(t);
    hist.push_back(t);
  }
  return out;
}

Status FakeEngine::step(std::span<const SeqChunk> chunks, float* logits) {
  if (o_.step_delay.count() > 0) std::this_thread::sleep_for(o_.step_delay);
  if (fail_next_step.exchange(false)) return Status::error("fake: step failed");
  std::lock_guard lk(mu_);
  for (size_t ic = 0; ic < chunks.size(); ++ic) {
    const SeqChunk& c = chunks[ic];
    const auto& t = tables_.at(c.seq_id);
    const int end = c.pos0 + static_cast<int>(c.tokens.size());
    if ((end + o_.block_size - 1) / o_.block_size > static_cast<int>(t.size())) {
      return Status::error("fake: chunk beyond the block table");
    }
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const int pos = c.pos0 + static_cast<int>(i);
      const int32_t id = t[pos / o_.block_size];
      if (ref_[id] != 1) return Status::error("fake: write into a shared block");
      content_[id][pos % o_.block_size] = c.tokens[i];
    }
    std::vector<int32_t> hist;
    for (int pos = 0; pos < end; ++pos) hist.push_back(content_[t[pos / o_.block_size]][pos % o_.block_size]);
    if (o_.script.empty()) {
      model_logits(hist, o_.eos_percent, logits + ic * kFakeVocab);
    } else {
      script_logits(hist, o_.script, logits + ic * kFakeVocab);
    }
    tokens_computed += static_cast<int64_t>(c.tokens.size());
  }
  return Status::ok();
}

}  // namespace ds::test
