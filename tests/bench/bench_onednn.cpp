// oneDNN's F32/BF16 matmul (kernels/onednn_gemm.h, built with -DDS_WITH_ONEDNN=ON) next to the
// best kernel table on the same arguments, one thread (run with OMP_NUM_THREADS=1), GOPS =
// 2 * n_in * n_out * tokens per second:
//   GEMM/<impl>/<type>/<n_in>x<n_out>/tok:<n>   weight shapes of the dense and MoE models
//   ATTN_GEMM/<impl>/F32/mla/...                 the two products of one MLA head in a
//     512-token prefill chunk over ctx rows, as plain F32 GEMMs without softmax or masking:
//     QK: [512 x 576] x [576 x ctx], PV: [512 x ctx] x [ctx x 512]. Their time for 16 heads is
//     the floor of what oneDNN could take for ATTN/.../mla/f16/prefill:512 in bench_kernels.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernel_test_data.h"
#include "kernels/onednn_gemm.h"

namespace {

using ds::GgmlType;

void bench_gemm(benchmark::State& state, bool onednn, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok) {
  const ds::KernelTable* kt = ds::kernel_table(ds::best_isa());
  std::mt19937 rng(1);
  const auto w = ds::test::random_weights(rng, t, n_in, n_out);
  const auto act = ds::test::quantize_rows(*kt, t, ds::test::random_floats(rng, n_in * n_tok), n_in, n_tok);
  std::vector<float> out(static_cast<size_t>(n_out * n_tok));
  const ds::MatmulArgs args{.wtype = t,
                            .w = w.data(),
                            .w_row_stride = ds::ggml_row_size(t, n_in),
                            .n_in = n_in,
                            .row_begin = 0,
                            .row_end = n_out,
                            .act = act.data(),
                            .act_row_stride = ds::ggml_row_size(ds::vec_dot_type(t), n_in),
                            .n_tok = n_tok,
                            .out = out.data(),
                            .out_stride = n_out};
  for (auto _ : state) {
    if (!onednn) {
      kt->matmul(args);
    } else if (!ds::onednn_matmul(args)) {
      state.SkipWithError("oneDNN failed");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * static_cast<double>(n_in * n_out * n_tok) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void register_all() {
  for (bool onednn : {true, false}) {
    const std::string impl = onednn ? "onednn" : ds::isa_name(ds::best_isa());
    for (GgmlType t : {GgmlType::F32, GgmlType::BF16})
      for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{4096, 4096}, {1536, 8960}})
        for (int64_t n_tok : {1, 64, 512}) {
          const std::string name = "GEMM/" + impl + "/" + ds::ggml_type_name(t) + "/" + std::to_string(n_in) + "x" +
                                   std::to_string(n_out) + "/tok:" + std::to_string(n_tok);
          benchmark::RegisterBenchmark(name.c_str(), bench_gemm, onednn, t, n_in, n_out, n_tok)
              ->Unit(benchmark::kMicrosecond);
        }
    for (int64_t ctx : {512, 1024, 4096}) {
      const std::string tail = "/ctx:" + std::to_string(ctx);
      benchmark::RegisterBenchmark(("ATTN_GEMM/" + impl + "/F32/mla/QK/prefill:512" + tail).c_str(), bench_gemm, onednn,
                                   GgmlType::F32, 576, ctx, 512)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("ATTN_GEMM/" + impl + "/F32/mla/PV/prefill:512" + tail).c_str(), bench_gemm, onednn,
                                   GgmlType::F32, ctx, 512, 512)
          ->Unit(benchmark::kMicrosecond);
    }
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
