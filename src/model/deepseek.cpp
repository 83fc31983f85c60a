// deepseek (DeepSeek-MoE 16B, the V1 MoE; ../shared/SPEC-deepseek32-deepseek4.md section 4):
//   attention = the llama block (llama.cpp): MHA, adjacent-pair RoPE over the whole head,
//               scale 1/sqrt(hd); the cache holds K|V per token and layer, as for llama
//   ffn       = dense FFN in the leading blocks, else the deepseek2 MoE (ffn.cpp):
//               softmax scores, top-k, weights * expert_weights_scale (never normalized,
//               no bias, no groups: HParams fixes them at load), routed experts summed in
//               slot order, then the shared experts
// Reuse is the design: the only code of its own is the choice between the two FFNs.
#include <algorithm>

#include "model/ffn.h"
#include "model/llama.h"

namespace ds {

namespace {

class DeepseekModel : public LlamaModel {
 public:
  using LlamaModel::LlamaModel;

  size_t scratch_bytes(int64_t T) const override {
    const size_t moe = static_cast<size_t>(T) * 4 * static_cast<size_t>(hp_.n_embd) + moe_ffn_scratch(hp_, T) + 16 * 64;
    return std::max(LlamaModel::scratch_bytes(T), base_scratch_bytes(T) + moe);
  }

  void ffn(int il, ForwardCtx& ctx, const float* x, float* out) const override {
    if (!hp_.is_moe_layer(il)) return LlamaModel::ffn(il, ctx, x, out);
    const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
    const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
    float* xn = ctx.arena.alloc<float>(T * E);
    ctx.rms_norm_rows(x, E, lw.ffn_norm, hp_.norm_eps, T, E, xn, E);
    moe_ffn(ctx, hp_, lw, il, xn, out);
  }
};

}  // namespace

std::unique_ptr<Model> make_deepseek_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<DeepseekModel>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
