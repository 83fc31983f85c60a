// The attention kernels allocate nothing (STYLE.md habit 10: no allocation in the decode
// step): not on a thread's first call, not on later ones. Heap allocations are counted by
// replacing the global operator new for this test binary, only on the calling thread and
// only while a counting window is open.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <random>
#include <thread>

#include "kernel_test_data.h"
#include "kernels/ref/ref.h"

namespace {
thread_local bool g_counting = false;
thread_local int64_t g_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace ds::test {
namespace {

// Heap allocations made by f() on this thread.
template <class F>
int64_t allocations(F&& f) {
  g_allocs = 0;
  g_counting = true;
  f();
  g_counting = false;
  return g_allocs;
}

TEST(Attention, DecodeCallsAllocateNothing) {
  std::mt19937 rng(31);
  // One F16 row per token: [K of 2 KV heads of 128 | V of 2 KV heads of 128] (GQA), and
  // the MLA latent row [c 512 | k_pe 64]; 16-token pages.
  const int64_t ctx = 300, block = 16, width = 576;
  std::vector<uint8_t> pages(static_cast<size_t>((ctx + block) * width * 2));
  const auto x = random_floats(rng, width);
  std::vector<const uint8_t*> blocks;
  for (int64_t j = 0; j < ctx; ++j) ref::store_kv(GgmlType::F16, x.data(), pages.data() + j * width * 2, width);
  for (int64_t b = 0; b * block < ctx; ++b) blocks.push_back(pages.data() + b * block * width * 2);
  const KvView kv{.type = GgmlType::F16,
                  .blocks = blocks.data(),
                  .block_size = static_cast<int>(block),
                  .row_stride = static_cast<size_t>(width) * 2,
                  .head_offset = 256,
                  .elem_offset = 0};
  KvView v = kv;
  v.elem_offset = 512;
  const auto q = random_floats(rng, 16 * width);
  std::vector<float> out(16 * 512);
  const int32_t pos = static_cast<int32_t>(ctx - 1);
  for (const KernelTable* kt : available_tables()) {
    if (kt->isa == Isa::kRef) continue;  // the reference is the spec, not the decode path
    auto gqa = [&] {
      kt->flash_attn({.n_head = 12,
                      .n_head_kv = 2,
                      .d_k = 128,
                      .d_v = 128,
                      .scale = 0.09f,
                      .n_q = 1,
                      .q = q.data(),
                      .q_tok_stride = 12 * 128,
                      .q_head_stride = 128,
                      .q_pos = &pos,
                      .k = kv,
                      .v = v,
                      .out = out.data(),
                      .out_tok_stride = 12 * 128,
                      .out_head_stride = 128,
                      .head_begin = 0,
                      .head_end = 12});
    };
    auto mla = [&] {
      kt->mla_attn({.n_head = 16,
                    .kv_lora = 512,
                    .n_rope = 64,
                    .scale = 0.07f,
                    .n_q = 1,
                    .q_abs = q.data(),
                    .q_pe = q.data() + 512,
                    .q_tok_stride = 16 * width,
                    .q_head_stride = width,
                    .q_pos = &pos,
                    .kv = kv,
                    .out = out.data(),
                    .out_tok_stride = 16 * 512,
                    .out_head_stride = 512,
                    .head_begin = 0,
                    .head_end = 16});
    };
    // Each on a fresh thread (first use) and again on the same thread.
    std::thread th([&] {
      EXPECT_EQ(allocations(gqa), 0) << table_name(*kt) << " GQA first call";
      EXPECT_EQ(allocations(gqa), 0) << table_name(*kt) << " GQA second call";
      EXPECT_EQ(allocations(mla), 0) << table_name(*kt) << " MLA first call";
      EXPECT_EQ(allocations(mla), 0) << table_name(*kt) << " MLA second call";
    });
    th.join();
  }
}

}  // namespace
}  // namespace ds::test
