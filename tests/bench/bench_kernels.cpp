// GEMV (1 activation row) and GEMM (64 rows) per weight block type, shape and ISA, on 1 and
// 2 threads (rows split evenly, as the engine does). Counters: GB/s of weight bytes read
// and GOPS (2 * n_in * n_out * n_tok per second). Activation quantization is not timed.
// ATTN/...: attention decode and prefill over a paged f16 cache, GQA also over bf16 (GFLOPS,
// and GB/s of cache rows); the /cold variants run a decode step over every layer's cache in turn.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernel_test_data.h"
#include "kernels/quant/repack.h"
#include "model/forward.h"

namespace {

using ds::GgmlType;

struct Problem {
  std::vector<uint8_t> w, act, packed;  // packed: w in 16-row panels (kernels/quant/repack.h)
  std::vector<float> out;
};

// copies > 1: that many different matrices back to back, so that a pass over them all
// streams from memory instead of the last-level cache ("cold" GEMV, as in decode).
const Problem& problem(const ds::KernelTable& kt, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok,
                       int copies = 1) {
  static std::vector<std::pair<std::string, Problem>> cache;
  // Cold GEMVs of 1-8 rows share one problem (activations for 8 rows): generating the
  // hundreds of MB of weights once per type instead of once per row count.
  const int64_t n_act = copies > 1 && n_tok <= 8 ? 8 : n_tok;
  const std::string key = std::string(ds::isa_name(kt.isa)) + ds::ggml_type_name(t) + std::to_string(n_in) + "x" +
                          std::to_string(n_out) + "x" + std::to_string(n_act) + "c" + std::to_string(copies);
  for (auto& [k, p] : cache)
    if (k == key) return p;
  if (copies > 1) {  // keep one cold problem alive at a time (each is hundreds of MB)
    // Dropped with its key: a later benchmark with the same key must rebuild it, not get
    // an empty problem (that crashed the run when the packed benchmarks reused cold keys).
    std::erase_if(cache, [](const auto& e) { return e.second.w.size() > (size_t{64} << 20); });
  }
  std::mt19937 rng(1);
  Problem p;
  p.w = ds::test::random_weights(rng, t, n_in, n_out * copies);
  p.act = ds::test::quantize_rows(kt, t, ds::test::random_floats(rng, n_in * n_act), n_in, n_act);
  p.out.resize(static_cast<size_t>(n_out * n_act));
  if (ds::repack_supported(t)) {
    p.packed.resize(p.w.size());
    const size_t wrow = ds::ggml_row_size(t, n_in);
    for (int c = 0; c < copies; ++c) {
      const size_t off = static_cast<size_t>(c) * static_cast<size_t>(n_out) * wrow;
      ds::repack_panels(t, n_in, wrow, p.w.data() + off, p.packed.data() + off, 0, n_out / ds::kPanelRows);
    }
  }
  cache.emplace_back(key, std::move(p));
  return cache.back().second;
}

void bench_matmul_on(benchmark::State& state, const ds::KernelTable* kt, GgmlType t, int64_t n_in, int64_t n_out,
                     int64_t n_tok, int n_threads, int copies, bool packed) {
  if (!kt) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const Problem& p = problem(*kt, t, n_in, n_out, n_tok, copies);
  auto* out = const_cast<float*>(p.out.data());
  const size_t mat_bytes = p.w.size() / static_cast<size_t>(copies);
  int copy = 0;
  auto run = [&](int64_t r0, int64_t r1) {
    const ds::MatmulArgs args{.wtype = t,
                              .w = p.w.data() + mat_bytes * static_cast<size_t>(copy),
                              .w_row_stride = ds::ggml_row_size(t, n_in),
                              .n_in = n_in,
                              .row_begin = r0,
                              .row_end = r1,
                              .act = p.act.data(),
                              .act_row_stride = ds::ggml_row_size(ds::vec_dot_type(t), n_in),
                              .n_tok = n_tok,
                              .out = out,
                              .out_stride = n_out,
                              .w_panels = packed ? p.packed.data() + mat_bytes * static_cast<size_t>(copy) : nullptr};
    kt->matmul(args);
  };
  for (auto _ : state) {
    if (n_threads == 1) {
      run(0, n_out);
    } else {
      std::vector<std::thread> th;
      for (int i = 0; i < n_threads; ++i) th.emplace_back(run, n_out * i / n_threads, n_out * (i + 1) / n_threads);
      for (auto& x : th) x.join();
    }
    benchmark::DoNotOptimize(out);
    copy = (copy + 1) % copies;
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(mat_bytes) * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * static_cast<double>(n_in * n_out * n_tok) * iters / 1e9, benchmark::Counter::kIsRate);
}

void bench_matmul(benchmark::State& state, ds::Isa isa, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok,
                  int n_threads, int copies) {
  bench_matmul_on(state, ds::kernel_table(isa), t, n_in, n_out, n_tok, n_threads, copies, false);
}

// Attention over a paged cache (F16, or kv_type) of 16-token pages: decode (n_q = 1 at position ctx - 1)
// or a prefill chunk (the last n_q positions of ctx), cut into calls as the models' work
// items are (ForwardCtx::for_each_attention_item): blocks of 16 queries, all heads per call,
// or the heads in `splits` calls (a one-sequence decode step on `splits` threads).
// With layers > 1 each iteration runs every layer's cache in turn, as a decode step does:
// the caches together outgrow the last-level cache, so each layer's comes from memory.
// Pages on transparent huge pages where the host allows them, as the engine's KV cache.
struct AttnLayer {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> pages;
  std::vector<const uint8_t*> blocks;
};

// Queries per call, as the engine's attention items.
constexpr int64_t kQueryBlock = ds::ForwardCtx::kAttnQueryBlock;

void bench_attention(benchmark::State& state, ds::Isa isa, bool mla, int64_t ctx, int64_t n_q, int layers, int splits,
                     GgmlType kv_type) {
  const ds::KernelTable* kt = ds::kernel_table(isa);
  if (!kt) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  // MLA: V2-Lite-like 16 heads over [c 512 | k_pe 64]; GQA: Qwen-1.5B-like 12 heads, 2 KV heads of 128.
  const int n_head = mla ? 16 : 12, width = mla ? 576 : 2 * 2 * 128, block = 16;
  const int d_q = mla ? 576 : 128, d_v = mla ? 512 : 128;
  std::mt19937 rng(5);
  const size_t row = static_cast<size_t>(width) * 2;
  const auto x = ds::test::random_floats(rng, width);
  std::vector<AttnLayer> cache(static_cast<size_t>(layers));
  for (AttnLayer& l : cache) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = (row * static_cast<size_t>((ctx + block - 1) / block * block) + kHuge - 1) / kHuge * kHuge;
    l.pages.reset(static_cast<uint8_t*>(std::aligned_alloc(kHuge, bytes)));
    (void)madvise(l.pages.get(), bytes, MADV_HUGEPAGE);
    for (int64_t j = 0; j < ctx; ++j) kt->store_kv(kv_type, x.data(), l.pages.get() + j * row, width);
    for (int64_t b = 0; b * block < ctx; ++b) l.blocks.push_back(l.pages.get() + b * block * row);
  }
  const auto q = ds::test::random_floats(rng, n_q * n_head * d_q);
  std::vector<float> out(static_cast<size_t>(n_q * n_head * d_v));
  std::vector<int32_t> pos;
  for (int64_t i = ctx - n_q; i < ctx; ++i) pos.push_back(static_cast<int32_t>(i));
  // Queries [q0, q0 + n), heads [hb, he), over one layer's cache.
  auto run = [&](const AttnLayer& l, int64_t q0, int64_t n, int hb, int he) {
    const ds::KvView kv{.type = kv_type,
                        .blocks = l.blocks.data(),
                        .block_size = block,
                        .row_stride = row,
                        .head_offset = mla ? 0u : 256u,
                        .elem_offset = 0};
    if (mla) {
      const float* qq = q.data() + q0 * n_head * 576;
      kt->mla_attn({.n_head = n_head,
                    .kv_lora = 512,
                    .n_rope = 64,
                    .scale = 0.07f,
                    .n_q = n,
                    .q_abs = qq,
                    .q_pe = qq + 512,
                    .q_tok_stride = n_head * 576,
                    .q_head_stride = 576,
                    .q_pos = pos.data() + q0,
                    .kv = kv,
                    .out = out.data() + q0 * n_head * 512,
                    .out_tok_stride = n_head * 512,
                    .out_head_stride = 512,
                    .head_begin = hb,
                    .head_end = he});
    } else {
      ds::KvView v = kv;
      v.elem_offset = 2 * 128 * 2;
      kt->flash_attn({.n_head = n_head,
                      .n_head_kv = 2,
                      .d_k = 128,
                      .d_v = 128,
                      .scale = 0.088f,
                      .n_q = n,
                      .q = q.data() + q0 * n_head * 128,
                      .q_tok_stride = n_head * 128,
                      .q_head_stride = 128,
                      .q_pos = pos.data() + q0,
                      .k = kv,
                      .v = v,
                      .out = out.data() + q0 * n_head * 128,
                      .out_tok_stride = n_head * 128,
                      .out_head_stride = 128,
                      .head_begin = hb,
                      .head_end = he});
    }
  };
  for (auto _ : state) {
    for (const AttnLayer& l : cache)
      for (int64_t q0 = 0; q0 < n_q; q0 += kQueryBlock)
        for (int g = 0; g < splits; ++g)
          run(l, q0, std::min<int64_t>(kQueryBlock, n_q - q0), n_head * g / splits, n_head * (g + 1) / splits);
    benchmark::DoNotOptimize(out.data());
  }
  double rows = 0.0;  // (query, KV row) pairs
  for (int32_t p : pos) rows += p + 1.0;
  const double flops = 2.0 * n_head * rows * (mla ? 576 + 512 : 256) * layers;
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GBps"] = benchmark::Counter(
      static_cast<double>(row) * static_cast<double>(ctx) * layers * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

void register_all() {
  for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2})
    for (bool mla : {true, false})
      for (int64_t ctx : {512, 4096, 16384}) {
        const std::string name =
            std::string("ATTN/") + ds::isa_name(isa) + (mla ? "/mla" : "/gqa") + "/f16/ctx:" + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), bench_attention, isa, mla, ctx, 1, 1, 1, GgmlType::F16)
            ->Unit(benchmark::kMicrosecond);
        // The heads in two calls, as a one-sequence decode step on 2 threads runs them.
        benchmark::RegisterBenchmark((name + "/split:2").c_str(), bench_attention, isa, mla, ctx, 1, 1, 2,
                                     GgmlType::F16)
            ->Unit(benchmark::kMicrosecond);
        // Decode steps over every layer's cache (28 layers of the 1.5B shape, 16 of MLA's
        // wider rows): each layer's cache comes from memory.
        if (ctx >= 4096)
          for (int splits : {1, 2})
            benchmark::RegisterBenchmark((name + "/cold" + (splits > 1 ? "/split:2" : "")).c_str(), bench_attention,
                                         isa, mla, ctx, 1, mla ? 16 : 28, splits, GgmlType::F16)
                ->Unit(benchmark::kMicrosecond);
      }
  // GQA and MLA over a BF16 cache (bf16 dot products where the table has them, attn_bf16_dot).
  for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2})
    for (bool mla : {true, false})
      for (int64_t ctx : {4096, 16384}) {
        const std::string name =
            std::string("ATTN/") + ds::isa_name(isa) + (mla ? "/mla" : "/gqa") + "/bf16/ctx:" + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), bench_attention, isa, mla, ctx, 1, 1, 1, GgmlType::BF16)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((name + "/cold").c_str(), bench_attention, isa, mla, ctx, 1, mla ? 16 : 28, 1,
                                     GgmlType::BF16)
            ->Unit(benchmark::kMicrosecond);
      }
  // Prefill: a 512-token chunk over its own causal context, and the second chunk of 1024.
  for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2})
    for (bool mla : {true, false})
      for (int64_t ctx : {512, 1024}) {
        const std::string name = std::string("ATTN/") + ds::isa_name(isa) + (mla ? "/mla" : "/gqa") +
                                 "/f16/prefill:512/ctx:" + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), bench_attention, isa, mla, ctx, 512, 1, 1, GgmlType::F16)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark((std::string("ATTN/") + ds::isa_name(isa) + (mla ? "/mla" : "/gqa") +
                                      "/bf16/prefill:512/ctx:" + std::to_string(ctx))
                                         .c_str(),
                                     bench_attention, isa, mla, ctx, 512, 1, 1, GgmlType::BF16)
            ->Unit(benchmark::kMillisecond);
      }
  const GgmlType types[] = {GgmlType::Q4_K,    GgmlType::Q5_K,   GgmlType::Q6_K,  GgmlType::Q8_0,    GgmlType::Q5_0,
                            GgmlType::Q4_0,    GgmlType::F16,    GgmlType::BF16,  GgmlType::F32,     GgmlType::Q2_K,
                            GgmlType::Q3_K,    GgmlType::Q4_1,   GgmlType::Q5_1,  GgmlType::IQ1_S,   GgmlType::IQ1_M,
                            GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                            GgmlType::IQ4_NL,  GgmlType::IQ4_XS, GgmlType::MXFP4};
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {1536, 8960}};
  for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2, ds::Isa::kRef})
    for (GgmlType t : types)
      for (auto [n_in, n_out] : shapes)
        for (int64_t n_tok : {1, 64})
          for (int n_threads : {1, 2}) {
            if (isa == ds::Isa::kRef && (n_tok > 1 || n_threads > 1)) continue;  // the reference is slow
            const std::string name = std::string(n_tok == 1 ? "GEMV/" : "GEMM/") + ds::isa_name(isa) + "/" +
                                     ds::ggml_type_name(t) + "/" + std::to_string(n_in) + "x" + std::to_string(n_out) +
                                     "/tok:" + std::to_string(n_tok) + "/threads:" + std::to_string(n_threads);
            benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, t, n_in, n_out, n_tok, n_threads, 1)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
          }
  // BF16 weights as CPUs without AVX512_BF16 (Ice Lake, Cascade Lake) multiply them: widened.
  for (auto [n_in, n_out] : shapes)
    for (int64_t n_tok : {1, 64})
      for (int n_threads : {1, 2}) {
        const std::string name = std::string(n_tok == 1 ? "GEMV/" : "GEMM/") + "avx512-no-bf16/BF16/" +
                                 std::to_string(n_in) + "x" + std::to_string(n_out) + "/tok:" + std::to_string(n_tok) +
                                 "/threads:" + std::to_string(n_threads);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& st) {
                                       bench_matmul_on(st, ds::kernel_table_without_bf16(), GgmlType::BF16, n_in, n_out,
                                                       n_tok, n_threads, 1, false);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
  // MoE expert products (V3-style bench model: gate/up 2048 -> 1408 Q4_K, down 1408 -> 2048
  // Q5_0 or Q8_0) on the ~48 tokens an expert sees in a 512-token step. CPU time, one thread:
  // steadier than wall time on a shared machine. COLD: 64 different matrices cycled
  // through (~100 MB), so the weights stream from memory as an expert's do in a step.
  // The i-quant expert products of the dynamic 1.58-bit (IQ1_S gate/up, IQ2_XXS down), IQ4_XS and
  // MXFP4 files on the same shape with experts of 1536 (a multiple of 256, as V3's 2048).
  for (auto [t, n_in, n_out] : {std::tuple{GgmlType::Q4_K, 2048, 1408}, std::tuple{GgmlType::Q5_0, 1408, 2048},
                                std::tuple{GgmlType::Q8_0, 1408, 2048}, std::tuple{GgmlType::IQ1_S, 2048, 1536},
                                std::tuple{GgmlType::IQ2_XXS, 1536, 2048}, std::tuple{GgmlType::IQ4_XS, 2048, 1536},
                                std::tuple{GgmlType::MXFP4, 2048, 1536}})
    for (int64_t n_tok : {48, 256})
      for (int copies : {1, 64}) {  // 64: a different expert's matrix each time, from memory
        const std::string name = std::string(copies > 1 ? "GEMM_MOE_COLD/avx512/" : "GEMM_MOE/avx512/") +
                                 ds::ggml_type_name(t) + "/" + std::to_string(n_in) + "x" + std::to_string(n_out) +
                                 "/tok:" + std::to_string(n_tok);
        benchmark::RegisterBenchmark(name.c_str(), bench_matmul, ds::Isa::kAvx512, t, n_in, n_out, n_tok, 1, copies)
            ->Unit(benchmark::kMicrosecond);
      }
  // Cold decode GEMV: 48 different 1536x8960 matrices (the dense model's FFN shape), about
  // 370-540 MB, cycled through so that the weights come from memory as in a decode step.
  // Small batches (batched decode: 2-8 sequences, MoE experts seeing 1-3 tokens) on 1 thread.
  for (GgmlType t : {GgmlType::Q4_K,    GgmlType::Q5_K,  GgmlType::Q6_K,    GgmlType::Q8_0,   GgmlType::Q4_0,
                     GgmlType::Q5_0,    GgmlType::Q2_K,  GgmlType::Q3_K,    GgmlType::Q4_1,   GgmlType::Q5_1,
                     GgmlType::IQ1_S,   GgmlType::IQ1_M, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                     GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ4_NL,  GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2})
      for (int n_threads : {1, 2}) {
        const std::string name = std::string("GEMV_COLD/") + ds::isa_name(isa) + "/" + ds::ggml_type_name(t) +
                                 "/1536x8960/tok:1/threads:" + std::to_string(n_threads);
        benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, t, 1536, 8960, 1, n_threads, 48)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    if (t == GgmlType::Q5_K) continue;  // its packed and batched paths are Q4_K's
    // The same on the packed panels (weights repacked at load, docs/repack.md).
    if (ds::repack_supported(t))
      for (int64_t n_tok : {1, 2, 4, 8}) {
        const std::string name = std::string("GEMV_COLD_PACKED/avx512/") + ds::ggml_type_name(t) +
                                 "/1536x8960/tok:" + std::to_string(n_tok) + "/threads:1";
        benchmark::RegisterBenchmark(name.c_str(),
                                     [t, n_tok](benchmark::State& st) {
                                       bench_matmul_on(st, ds::kernel_table(ds::Isa::kAvx512), t, 1536, 8960, n_tok, 1,
                                                       48, true);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        const std::string warm = std::string("GEMV_PACKED/avx512/") + ds::ggml_type_name(t) +
                                 "/1536x8960/tok:" + std::to_string(n_tok) + "/threads:1";
        benchmark::RegisterBenchmark(warm.c_str(),
                                     [t, n_tok](benchmark::State& st) {
                                       bench_matmul_on(st, ds::kernel_table(ds::Isa::kAvx512), t, 1536, 8960, n_tok, 1,
                                                       1, true);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        // 1536x512 (0.2-0.6 MB) stays in L2: the kernel's compute ceiling, which has to be
        // well above a thread's share of memory bandwidth for decode to stream at that share.
        const std::string l2 = std::string("GEMV_L2_PACKED/avx512/") + ds::ggml_type_name(t) +
                               "/1536x512/tok:" + std::to_string(n_tok) + "/threads:1";
        benchmark::RegisterBenchmark(l2.c_str(),
                                     [t, n_tok](benchmark::State& st) {
                                       bench_matmul_on(st, ds::kernel_table(ds::Isa::kAvx512), t, 1536, 512, n_tok, 1,
                                                       1, true);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    for (int64_t n_tok : {2, 3, 4, 8}) {
      const std::string name = std::string("GEMV_COLD/avx512/") + ds::ggml_type_name(t) +
                               "/1536x8960/tok:" + std::to_string(n_tok) + "/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), bench_matmul, ds::Isa::kAvx512, t, 1536, 8960, n_tok, 1, 48)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  for (GgmlType t : {GgmlType::F32, GgmlType::BF16, GgmlType::Q4_K})
    for (auto [n_in, n_out] : shapes) {
      const std::string name = std::string("GEMM/avx512/") + ds::ggml_type_name(t) + "/" + std::to_string(n_in) + "x" +
                               std::to_string(n_out) + "/tok:512/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), bench_matmul, ds::Isa::kAvx512, t, n_in, n_out, 512, 1, 1)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
