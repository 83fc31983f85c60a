#include "fake_kv.h"

#include <gtest/gtest.h>

namespace ds::test {

FakeKv::FakeKv(int n_blocks, int block_size)
    : bs_(block_size), ref_(n_blocks, 0), content_(n_blocks, std::vector<int32_t>(block_size, -1)) {}

int FakeKv::blocks_free() const {
  int n = 0;
  for (int r : ref_) n += r == 0;
  return n;
}

Status FakeKv::seq_reserve(int32_t seq, int32_t n_tokens) {
  auto& t = tables_[seq];
  const int need = (n_tokens + bs_ - 1) / bs_ - static_cast<int>(t.size());
  if (need <= 0) return Status::ok();
  if (blocks_free() < need) return Status::error("fake kv: out of blocks");
  for (int id = 0; id < blocks_total() && static_cast<int>(t.size()) * bs_ < n_tokens; ++id) {
    if (ref_[id] == 0) {
      ref_[id] = 1;
      std::fill(content_[id].begin(), content_[id].end(), -1);
      t.push_back(id);
    }
  }
  return Status::ok();
}

void FakeKv::seq_release(int32_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (int32_t id : it->second) block_release(id);
  tables_.erase(it);
}

std::vector<int32_t> FakeKv::seq_blocks(int32_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? std::vector<int32_t>{} : it->second;
}

Status FakeKv::seq_adopt(int32_t seq, std::span<const int32_t> ids) {
  auto& t = tables_[seq];
  EXPECT_TRUE(t.empty()) << "seq_adopt on a sequence that holds blocks";
  for (int32_t id : ids) {
    EXPECT_GT(ref_.at(id), 0) << "adopting a free block " << id;
    ++ref_[id];
    t.push_back(id);
  }
  return Status::ok();
}

Status FakeKv::seq_copy_block(int32_t seq, int32_t src) {
  EXPECT_GT(ref_.at(src), 0) << "copying a free block " << src;
  for (int32_t id = 0; id < static_cast<int32_t>(ref_.size()); ++id) {
    if (ref_[id] != 0) continue;
    ref_[id] = 1;
    content_[id] = content_[src];
    tables_[seq].push_back(id);
    return Status::ok();
  }
  return Status::error("fake: no free block to copy into");
}

void FakeKv::block_release(int32_t id) {
  EXPECT_GT(ref_.at(id), 0) << "releasing a free block " << id;
  --ref_[id];
}

void FakeKv::write(int32_t seq, int32_t pos0, std::span<const int32_t> tokens) {
  const auto& t = tables_.at(seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int pos = pos0 + static_cast<int>(i);
    ASSERT_LT(pos / bs_, static_cast<int>(t.size())) << "write beyond the block table";
    const int32_t id = t[pos / bs_];
    ASSERT_EQ(ref_[id], 1) << "write into shared block " << id << " at pos " << pos;
    content_[id][pos % bs_] = tokens[i];
  }
}

std::vector<int32_t> FakeKv::read(int32_t seq, int32_t n) const {
  const auto& t = tables_.at(seq);
  std::vector<int32_t> out;
  for (int pos = 0; pos < n; ++pos) out.push_back(content_[t.at(pos / bs_)][pos % bs_]);
  return out;
}

int32_t fake_next_token(std::span<const int32_t> history, int n_vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>((h >> 17) % static_cast<uint64_t>(n_vocab));
}

}  // namespace ds::test
