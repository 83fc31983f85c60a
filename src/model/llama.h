// The llama-family block (llama, qwen2, qwen3): GQA attention with RoPE over a paged K/V
// cache and a SiLU-gated FFN. qwen2 differs only by q/k/v biases and NEOX RoPE, qwen3 by
// per-head q/k norms and NEOX RoPE, all carried by their weights and hyper-parameters
// (qwen2.cpp, qwen3.cpp). deepseek (deepseek.cpp) derives from it for the MoE blocks.
#pragma once
#include <memory>

#include "model/model.h"

namespace ds {

class LlamaModel : public Model {
 public:
  LlamaModel(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w)
      : Model(std::move(file), std::move(hp), std::move(w)) {}

  size_t kv_row_bytes(GgmlType t) const override;
  size_t scratch_bytes(int64_t max_tokens) const override;
  void attention(int il, ForwardCtx& ctx, const float* x, float* out) const override;
  void ffn(int il, ForwardCtx& ctx, const float* x, float* out) const override;

 private:
  size_t k_row_bytes(GgmlType t) const;
  void store_kv(int il, ForwardCtx& ctx, const float* k, const float* v) const;
  void head_norms(ForwardCtx& ctx, const LayerWeights& lw, float* q, float* k) const;
};

}  // namespace ds
