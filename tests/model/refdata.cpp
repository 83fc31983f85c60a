#include "refdata.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kernels/quant/fp16.h"
#include "test_util.h"

namespace ds::test {

const std::vector<RefModel>& ref_models() {
  static const std::vector<RefModel> models = {
      {.name = "tiny-llama-Q4_K_M", .dense = true},
      {.name = "tiny-qwen2-Q5_K_S", .dense = true},
      {.name = "tiny-dsv2-Q4_K_M", .moe = true},
      {.name = "tiny-dsv2-legacy-Q4_K_M", .moe = true, .legacy = true},
      {.name = "tiny-dsv3-Q4_K_M", .moe = true},
      {.name = "tiny-ds1-Q4_K_M", .moe = true},
      {.name = "tiny-qwen3-Q4_K_M", .dense = true},
      // tiny-dsv3 with all ten i-quant / MXFP4 types (refdata README, "i-quant and MXFP4 file").
      {.name = "tiny-dsv3-IQ-MIX", .moe = true, .kv_types = false},
      {.name = "tiny-dsv32-Q4_K_M", .moe = true, .indexer = true},
  };
  return models;
}

std::string ref_path(const std::string& model, const std::string& suffix) {
  return shared_path("refdata/" + model + suffix);
}

static nlohmann::json ref_json(const std::string& model) {
  return nlohmann::json::parse(read_file_text(ref_path(model, ".json")));
}

std::vector<int32_t> ref_tokens(const std::string& model) {
  return ref_json(model)["tokens"].get<std::vector<int32_t>>();
}

int64_t ref_n_vocab(const std::string& model) {
  return ref_json(model)["n_vocab"].get<int64_t>();
}

std::vector<float> ref_logits(const std::string& model) {
  const auto bytes = read_file_bytes(ref_path(model, ".logits.f16"));
  std::vector<float> out(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = fp16_to_f32(h);
  }
  return out;
}

std::vector<float> ref_layer(const std::string& model, const std::string& file) {
  const auto bytes = read_file_bytes(ref_path(model, ".layers/" + file));
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<int32_t> ref_topk(const std::string& model, int il) {
  const auto bytes = read_file_bytes(ref_path(model, ".layers/blk" + std::to_string(il) + ".topk.i32"));
  std::vector<int32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<int32_t> ref_experts(const std::string& model, int il) {
  const auto bytes = read_file_bytes(ref_path(model, ".layers/blk" + std::to_string(il) + ".experts.i32"));
  std::vector<int32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

double nmse(const float* ours, const float* ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(ours[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0);
}

int argmax_agreement(const float* ours, const float* ref, int64_t n_rows, int64_t n_cols) {
  int agree = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* a = ours + r * n_cols;
    const float* b = ref + r * n_cols;
    int64_t ia = 0, ib = 0;
    for (int64_t c = 1; c < n_cols; ++c) {
      if (a[c] > a[ia]) ia = c;
      if (b[c] > b[ib]) ib = c;
    }
    agree += ia == ib;
  }
  return agree;
}

std::unique_ptr<Runner> make_runner(const std::string& model, const KernelTable* kt, GgmlType kv_type, int n_seqs,
                                    int n_threads, int max_batch_tokens, bool repack) {
  auto m = Model::load(ref_path(model, ".gguf"));
  EXPECT_TRUE(m.is_ok()) << m.message();
  if (!m) return nullptr;
  RunnerOptions o;
  o.n_threads = n_threads;
  o.pin_threads = false;
  o.kv_type = kv_type;
  o.kv_block_size = 16;
  o.n_kv_blocks = 4 * n_seqs + 4;
  o.max_batch_tokens = max_batch_tokens;
  o.max_seq_tokens = 64;
  o.kernels = kt;
  o.repack = repack;
  auto r = Runner::create(std::move(*m), o);
  EXPECT_TRUE(r.is_ok()) << r.message();
  if (!r) return nullptr;
  return std::move(*r);
}

std::vector<float> eval_chunked(Runner& r, const std::vector<int32_t>& tokens, int chunk, int32_t seq,
                                const TraceFn* trace) {
  const int64_t V = r.model().hp().n_vocab, n = static_cast<int64_t>(tokens.size());
  std::vector<float> logits(static_cast<size_t>(n * V));
  EXPECT_TRUE(r.kv().reserve(seq, static_cast<int32_t>(n)).is_ok());
  const int64_t step = chunk > 0 ? chunk : n;
  for (int64_t p = 0; p < n; p += step) {
    const int64_t m = std::min(step, n - p);
    const SeqChunk ch{.seq_id = seq,
                      .tokens = std::span<const int32_t>(tokens.data() + p, static_cast<size_t>(m)),
                      .pos0 = static_cast<int32_t>(p),
                      .all_logits = true};
    Status st = r.step(std::span<const SeqChunk>(&ch, 1), logits.data() + p * V, trace);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  r.kv().release(seq);
  return logits;
}

std::vector<const KernelTable*> available_kernels() {
  std::vector<const KernelTable*> out;
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (const KernelTable* t = kernel_table(isa)) out.push_back(t);
  }
  return out;
}

}  // namespace ds::test
