// GEMV (1 activation row) and GEMM (64 rows) per weight block type, shape and ISA, on 1 and
// 2 threads (rows split evenly, as the engine does). Counters: GB/s of weight bytes read
// and GOPS (2 * n_in * n_out * n_tok per second). Activation quantization is not timed.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernel_test_data.h"

namespace {

using ds::GgmlType;

struct Problem {
  std::vector<uint8_t> w, act;
  std::vector<float> out;
};

const Problem& problem(const ds::KernelTable& kt, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok) {
  static std::vector<std::pair<std::string, Problem>> cache;
  const std::string key = std::string(ds::isa_name(kt.isa)) + ds::ggml_type_name(t) + std::to_string(n_in) + "x" +
                          std::to_string(n_out) + "x" + std::to_string(n_tok);
  for (auto& [k, p] : cache)
    if (k == key) return p;
  std::mt19937 rng(1);
  Problem p;
  p.w = ds::test::random_weights(rng, t, n_in, n_out);
  p.act = ds::test::quantize_rows(kt, t, ds::test::random_floats(rng, n_in * n_tok), n_in, n_tok);
  p.out.resize(static_cast<size_t>(n_out * n_tok));
  cache.emplace_back(key, std::move(p));
  return cache.back().second;
}

void bench_matmul(benchmark::State& state, ds::Isa isa, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok,
                  int n_threads) {
  const ds::KernelTable* kt = ds::kernel_table(isa);
  if (!kt) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const Problem& p = problem(*kt, t, n_in, n_out, n_tok);
  auto* out = const_cast<float*>(p.out.data());
  auto run = [&](int64_t r0, int64_t r1) {
    kt->matmul({.wtype = t, .w = p.w.data(), .w_row_stride = ds::ggml_row_size(t, n_in), .n_in = n_in,
                .row_begin = r0, .row_end = r1, .act = p.act.data(),
                .act_row_stride = ds::ggml_row_size(ds::vec_dot_type(t), n_in), .n_tok = n_tok, .out = out,
                .out_stride = n_out});
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
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(p.w.size()) * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * static_cast<double>(n_in * n_out * n_tok) * iters / 1e9, benchmark::Counter::kIsRate);
}

void register_all() {
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0,
                            GgmlType::Q4_0, GgmlType::F16,  GgmlType::BF16, GgmlType::F32,  GgmlType::Q2_K,
                            GgmlType::Q3_K, GgmlType::Q4_1, GgmlType::Q5_1};
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {1536, 8960}};
  for (ds::Isa isa : {ds::Isa::kAvx512, ds::Isa::kAvx2, ds::Isa::kRef})
    for (GgmlType t : types)
      for (auto [n_in, n_out] : shapes)
        for (int64_t n_tok : {1, 64})
          for (int n_threads : {1, 2}) {
            if (isa == ds::Isa::kRef && (n_tok > 1 || n_threads > 1)) continue;  // the reference is slow
            const std::string name = std::string(n_tok == 1 ? "GEMV/" : "GEMM/") + ds::isa_name(isa) + "/" +
                                     ds::ggml_type_name(t) + "/" + std::to_string(n_in) + "x" +
                                     std::to_string(n_out) + "/tok:" + std::to_string(n_tok) +
                                     "/threads:" + std::to_string(n_threads);
            benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, t, n_in, n_out, n_tok, n_threads)
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
