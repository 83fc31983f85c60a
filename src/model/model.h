// A loaded model: the mmapped GGUF file, its hyper-parameters, weight views and the
// architecture's forward code. The forward pass is split into the two sub-layers of each
// block (attention, FFN/MoE) so that tests can feed each one the reference's input
// (teacher forcing, ../shared/refdata/README.md) and the engine can chain them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ds/status.h"
#include "gguf/gguf_file.h"
#include "model/forward.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace ds {

class Model {
 public:
  // Opens `path` (all shards), reads the hyper-parameters and maps the weights.
  static Result<std::unique_ptr<Model>> load(const std::string& path);
  virtual ~Model() = default;

  const HParams& hp() const { return hp_; }
  const Weights& weights() const { return *w_; }
  // Packs the quantized matrices (Q2_K-Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: repack_supported)
  // into 16-row panels for the AVX-512 kernels (repack_weights); returns the bytes packed.
  Result<size_t> repack(ThreadPool& pool, NumaMode mode) { return repack_weights(*w_, hp_.n_expert, pool, mode); }
  const GgufFile& file() const { return *file_; }

  // Bytes of one token's KV row for one layer in cache type t [KV_LAYOUT]: the largest
  // layer's; kv_layer_row_bytes(il, t) is layer il's (all equal unless a model overrides it).
  virtual size_t kv_row_bytes(GgmlType t) const = 0;
  virtual size_t kv_layer_row_bytes(int il, GgmlType t) const {
    (void)il;
    return kv_row_bytes(t);
  }
  // One token's KV bytes over all layers: what a cache block holds per row.
  size_t kv_token_bytes(GgmlType t) const {
    size_t n = 0;
    for (int il = 0; il < hp_.n_layer; ++il) n += kv_layer_row_bytes(il, t);
    return n;
  }
  // KV cache bytes one decode step of one sequence reads at context length n_ctx (the
  // bandwidth roofline of ds-cli bench): every row of every layer, unless the attention is
  // sparse (deepseek32 overrides it).
  virtual double decode_kv_bytes(int64_t n_ctx, GgmlType t) const {
    return static_cast<double>(hp_.n_layer) * static_cast<double>(n_ctx) * static_cast<double>(kv_row_bytes(t));
  }
  // Scratch arena size for batches of up to max_tokens rows (upper bound).
  virtual size_t scratch_bytes(int64_t max_tokens) const = 0;

  // Attention sub-layer of block il: out = attention(rms_norm(x)) for every batch row
  // (x, out: [n_tok][n_embd]); writes the batch's K/V rows into the cache first.
  virtual void attention(int il, ForwardCtx& ctx, const float* x, float* out) const = 0;
  // FFN or MoE sub-layer of block il: out = ffn(rms_norm(x)). Traces "experts" for MoE.
  virtual void ffn(int il, ForwardCtx& ctx, const float* x, float* out) const = 0;

  // The whole step: embeddings, every block with its residual adds, final norm and the
  // output head for batch.out_rows. logits: [n_out][n_vocab]. deepseek4 replaces it (its
  // residual state is hp().n_hc streams wide and its sub-layers map that whole state).
  virtual void forward(ForwardCtx& ctx, float* logits) const;

 protected:
  Model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w)
      : file_(std::move(file)), hp_(std::move(hp)), w_(std::move(w)) {}
  // Scratch for the generic part of forward() (residual stream, logits rows).
  size_t base_scratch_bytes(int64_t max_tokens) const;

  std::unique_ptr<GgufFile> file_;
  HParams hp_;
  std::unique_ptr<Weights> w_;
};

// Per-architecture factories (llama.cpp, qwen2.cpp, deepseek2.cpp, deepseek.cpp, qwen3.cpp,
// deepseek4.cpp).
std::unique_ptr<Model> make_llama_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_qwen2_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_deepseek2_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_deepseek_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_qwen3_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_deepseek4_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);
std::unique_ptr<Model> make_deepseek32_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w);

}  // namespace ds
