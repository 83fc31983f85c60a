// BlockPool bookkeeping: all-or-nothing allocation, reference counts, exhaustion as a
// Status, and blocks that are distinct, writable memory of the promised size.
#include "runtime/block_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace ds {
namespace {

std::unique_ptr<BlockPool> make_pool(int n_blocks, int block_size = 16, size_t bpt = 100, const char* numa = "none") {
  auto pool = BlockPool::create({.n_blocks = n_blocks, .block_size = block_size, .bytes_per_token = bpt, .numa = numa});
  EXPECT_TRUE(pool.is_ok()) << pool.message();
  return std::move(pool).value();
}

TEST(BlockPool, ShapeAndFreshState) {
  auto pool = make_pool(10, 16, 100);
  EXPECT_EQ(pool->n_blocks(), 10);
  EXPECT_EQ(pool->n_free(), 10);
  EXPECT_EQ(pool->block_size(), 16);
  EXPECT_EQ(pool->block_bytes(), 1600u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pool->ref_count(i), 0);
}

TEST(BlockPool, BlocksAreDistinctWritableMemory) {
  auto pool = make_pool(8, 4, 33);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool->alloc(8, &ids).is_ok());
  std::set<int32_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), 8u);
  for (int32_t id : ids) std::memset(pool->block_data(id), id + 1, pool->block_bytes());
  for (int32_t id : ids) {
    const uint8_t* d = pool->block_data(id);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 64, 0u);
    for (size_t i = 0; i < pool->block_bytes(); ++i) ASSERT_EQ(d[i], id + 1) << "block " << id << " byte " << i;
  }
}

TEST(BlockPool, AllocIsAllOrNothing) {
  auto pool = make_pool(5);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool->alloc(3, &a).is_ok());
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(pool->n_free(), 2);
  std::vector<int32_t> b;
  Status s = pool->alloc(3, &b);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("KV cache full"), std::string::npos) << s.message();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool->n_free(), 2);
  ASSERT_TRUE(pool->alloc(2, &b).is_ok());
  EXPECT_EQ(pool->n_free(), 0);
  std::vector<int32_t> c;
  EXPECT_FALSE(pool->alloc(1, &c).is_ok());
  EXPECT_TRUE(pool->alloc(0, &c).is_ok());
  EXPECT_TRUE(c.empty());
}

TEST(BlockPool, RefCountsShareAndFree) {
  auto pool = make_pool(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool->alloc(2, &ids).is_ok());
  const int32_t shared = ids[0];
  EXPECT_EQ(pool->ref_count(shared), 1);
  pool->retain(shared);
  pool->retain(shared);
  EXPECT_EQ(pool->ref_count(shared), 3);
  pool->release(shared);
  pool->release(shared);
  EXPECT_EQ(pool->ref_count(shared), 1);
  EXPECT_EQ(pool->n_free(), 2);
  pool->release(shared);
  EXPECT_EQ(pool->ref_count(shared), 0);
  EXPECT_EQ(pool->n_free(), 3);
  // The freed block is handed out again.
  std::vector<int32_t> again;
  ASSERT_TRUE(pool->alloc(3, &again).is_ok());
  EXPECT_NE(std::find(again.begin(), again.end(), shared), again.end());
  EXPECT_EQ(pool->n_free(), 0);
}

TEST(BlockPool, ExhaustAndRefillManyTimes) {
  auto pool = make_pool(64, 16, 8);
  for (int round = 0; round < 100; ++round) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(pool->alloc(64, &ids).is_ok());
    EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), 64u);
    std::vector<int32_t> none;
    ASSERT_FALSE(pool->alloc(1, &none).is_ok());
    for (int32_t id : ids) pool->release(id);
    ASSERT_EQ(pool->n_free(), 64);
  }
}

TEST(BlockPool, BadOptionsAreErrors) {
  EXPECT_FALSE(BlockPool::create({.n_blocks = 0, .block_size = 16, .bytes_per_token = 8}).is_ok());
  EXPECT_FALSE(BlockPool::create({.n_blocks = 4, .block_size = 0, .bytes_per_token = 8}).is_ok());
  EXPECT_FALSE(BlockPool::create({.n_blocks = 4, .block_size = 16, .bytes_per_token = 0}).is_ok());
  auto bad = BlockPool::create({.n_blocks = 4, .block_size = 16, .bytes_per_token = 8, .numa = "spread"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("spread"), std::string::npos) << bad.message();
}

TEST(BlockPool, EveryNumaMode) {
  for (const char* mode : {"none", "distribute", "isolate"}) {
    auto pool = make_pool(256, 16, 1024, mode);  // 4 MiB: large enough for huge pages
    std::vector<int32_t> ids;
    ASSERT_TRUE(pool->alloc(256, &ids).is_ok()) << mode;
    for (int32_t id : ids) std::memset(pool->block_data(id), 0x5a, pool->block_bytes());
    EXPECT_EQ(pool->block_data(255)[pool->block_bytes() - 1], 0x5a) << mode;
  }
}

}  // namespace
}  // namespace ds
