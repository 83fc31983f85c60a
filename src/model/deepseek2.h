// The deepseek2 model class (deepseek2.cpp), exposed so that architectures built on its MLA
// attention and MoE routing (deepseek32.cpp) reuse its pieces instead of copying them:
// attention() is mla_project -> mla_absorb -> (an attention over the latent cache) ->
// mla_output, and a subclass replaces the middle step.
#pragma once
#include <memory>
#include <vector>

#include "model/model.h"

namespace ds {

class Deepseek2Model : public Model {
 public:
  Deepseek2Model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w)
      : Model(std::move(file), std::move(hp), std::move(w)) {}

  size_t kv_row_bytes(GgmlType t) const override { return latent_row_bytes(t); }
  size_t scratch_bytes(int64_t T) const override;
  void attention(int il, ForwardCtx& ctx, const float* x, float* out) const override;
  void ffn(int il, ForwardCtx& ctx, const float* x, float* out) const override;

 protected:
  // Bytes of one token's latent [c | k_pe] in cache type t; it starts every KV row.
  size_t latent_row_bytes(GgmlType t) const { return ggml_row_size(t, hp_.kv_lora + hp_.n_rot); }
  // Floats of arena one batch token of the MLA attention uses (scratch_bytes).
  size_t mla_scratch_per_token() const;

  // Steps 1-2 for every batch row, a = rms_norm(x) * attn_norm given as ActRows: returns q
  // [T][H][nope | pe] with RoPE applied; the latent rows [c | k_pe] are in the cache; *qr
  // receives the normalized q latent [T][q_lora] (null without q compression).
  float* mla_project(int il, ForwardCtx& ctx, ActRows& a, float** qr) const;
  // qcat[t][h] = [k_b_h^T q_nope_h (kv_lora) | q_pe_h (rope)].
  float* mla_absorb(int il, ForwardCtx& ctx, const float* q) const;
  // Dense causal attention of every query over its sequence's latent cache: o [T][H][kv_lora].
  void mla(int il, ForwardCtx& ctx, const float* qcat, float* o) const;
  // One mla_attn call: queries [t0, t0 + n_q) of qcat and heads [h0, h1) over the cache rows of
  // kv, query i at position q_pos[i]; writes their rows of o [T][H][kv_lora].
  void mla_call(ForwardCtx& ctx, const float* qcat, float* o, int64_t t0, int64_t n_q, const int32_t* q_pos,
                const KvView& kv, int h0, int h1) const;
  // out = attn_output(concat_h v_b_h o_h).
  void mla_output(int il, ForwardCtx& ctx, const float* o, float* out) const;

 private:
  // Per-head products y_h = W_h x_h over all batch rows: token t's x_h (n_in wide) at
  // x[(t * H + h) * x_head], its y_h at y[t * y_tok + h * y_head].
  void per_head(ForwardCtx& ctx, const std::vector<Mat>& w, const float* x, int64_t x_head, float* y, int64_t y_tok,
                int64_t y_head) const;
};

}  // namespace ds
