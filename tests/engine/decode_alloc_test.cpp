// No allocation in the decode step (scratch and step buffers are sized at load): counts
// operator new calls made by engine and model code during decode steps of two sequences.
// Kernels are called through a wrapping table that pauses counting, because the kernels'
// own allocation behaviour is tested with the kernels; here only the engine's is at stake.
// MoE routing is not wrapped: every ISA runs the one routing kernel, and it must not allocate.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "refdata.h"

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_counting{false};
thread_local int t_in_kernel = 0;
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed) && t_in_kernel == 0) ++g_allocs;
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
// The nothrow forms too (std::stable_sort's buffer uses them): left to the library they may
// come from a different allocator (a sanitizer's) than the delete above.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed) && t_in_kernel == 0) ++g_allocs;
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace ds::test {
namespace {

const KernelTable* g_inner = nullptr;

struct InKernel {
  InKernel() { ++t_in_kernel; }
  ~InKernel() { --t_in_kernel; }
};

KernelTable wrapped(const KernelTable& inner) {
  g_inner = &inner;
  KernelTable t = inner;
  t.quantize_act = [](GgmlType a, const float* x, void* y, int64_t n) {
    InKernel k;
    g_inner->quantize_act(a, x, y, n);
  };
  t.vec_dot = [](GgmlType w, int64_t n, const void* a, const void* b) {
    InKernel k;
    return g_inner->vec_dot(w, n, a, b);
  };
  t.matmul = [](const MatmulArgs& a) {
    InKernel k;
    g_inner->matmul(a);
  };
  t.rms_norm = [](const float* x, const float* w, float* y, int64_t n, float e) {
    InKernel k;
    g_inner->rms_norm(x, w, y, n, e);
  };
  t.rope = [](const RopeArgs& a, const RopeParams& p) {
    InKernel k;
    g_inner->rope(a, p);
  };
  t.silu_mul = [](const float* g, const float* u, float* y, int64_t n) {
    InKernel k;
    g_inner->silu_mul(g, u, y, n);
  };
  t.softmax = [](float* x, int64_t n, float s) {
    InKernel k;
    g_inner->softmax(x, n, s);
  };
  t.flash_attn = [](const AttnArgs& a) {
    InKernel k;
    g_inner->flash_attn(a);
  };
  t.mla_attn = [](const MlaArgs& a) {
    InKernel k;
    g_inner->mla_attn(a);
  };
  t.store_kv = [](GgmlType ty, const float* x, void* y, int64_t n) {
    InKernel k;
    g_inner->store_kv(ty, x, y, n);
  };
  return t;
}

class DecodeAlloc : public testing::TestWithParam<RefModel> {};

TEST_P(DecodeAlloc, DecodeStepsAllocateNothing) {
  const std::string& M = GetParam().name;
  const KernelTable table = wrapped(kern());
  auto r = make_runner(M, &table, GgmlType::F16, 2, 2);
  ASSERT_TRUE(r);
  const auto toks = ref_tokens(M);
  ASSERT_TRUE(r->kv().reserve(0, 40).is_ok());
  ASSERT_TRUE(r->kv().reserve(1, 40).is_ok());
  std::vector<float> logits(static_cast<size_t>(2 * 10 * r->model().hp().n_vocab));
  SeqChunk c[2] = {{.seq_id = 0, .tokens = std::span(toks.data(), 10), .pos0 = 0},
                   {.seq_id = 1, .tokens = std::span(toks.data() + 5, 10), .pos0 = 0}};
  ASSERT_TRUE(r->step(c, logits.data()).is_ok());
  // The counter sees allocations made here (and not inside kernels).
  g_allocs = 0;
  g_counting = true;
  delete new int(1);
  {
    InKernel k;
    delete new int(2);
  }
  g_counting = false;
  ASSERT_EQ(g_allocs.load(), 1);

  g_allocs = 0;
  g_counting = true;
  bool ok = true;
  for (int p = 10; p < 30; ++p) {
    c[0] = {.seq_id = 0, .tokens = std::span(toks.data() + p, 1), .pos0 = p};
    c[1] = {.seq_id = 1, .tokens = std::span(toks.data() + p + 5, 1), .pos0 = p};
    ok = ok && r->step(c, logits.data()).is_ok();
  }
  g_counting = false;
  EXPECT_TRUE(ok);
  EXPECT_EQ(g_allocs.load(), 0) << "allocations in 20 decode steps of " << M;
}

INSTANTIATE_TEST_SUITE_P(Refdata, DecodeAlloc, testing::ValuesIn(ref_models()),
                         [](const testing::TestParamInfo<RefModel>& i) {
                           std::string n = i.param.name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// deepseek4 is not in ref_models() (its sub-layers map a 4-stream state; its own tests are
// model_dsv4_block_test and engine_dsv4_e2e_test), so it gets its own instantiation.
INSTANTIATE_TEST_SUITE_P(Deepseek4, DecodeAlloc, testing::Values(RefModel{.name = "tiny-dsv4-MXFP4_MOE", .moe = true}),
                         [](const testing::TestParamInfo<RefModel>&) { return std::string("tiny_dsv4"); });

}  // namespace
}  // namespace ds::test
