// Feed-forward sub-layers shared by the architectures (../shared/SPEC.md):
// dense FFN out = down(silu(gate x) * up x) on x = rms_norm(h), and the DeepSeek MoE
// (router, top-k selection, routed experts summed in slot order, then shared experts).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/forward.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace ds {

// out[t] = down(silu(gate xn[t]) * up xn[t]), given already-normalized rows `a`.
void dense_ffn(ForwardCtx& ctx, ActRows& a, const Mat& gate, const Mat& up, const Mat& down, float* out);
size_t dense_ffn_scratch(int64_t n_tok, int64_t n_embd, int64_t n_ff);

// MoE block il (SPEC.md deepseek2 step 5) on normalized rows xn [n_tok][n_embd].
void moe_ffn(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, const float* xn, float* out);
size_t moe_ffn_scratch(const HParams& hp, int64_t n_tok);

}  // namespace ds
