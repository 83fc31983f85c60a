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

// Tokens per dense FFN pass: a longer step runs the FFN in chunks of this many rows, so the
// f32 gate/up rows (2 x 8960 x 4 B per token for the 1.5B shape) stay near the cache.
// Measured on the 1.5B shape, pp2000 in one step: FFN 2.56-2.78 -> 2.22-2.25 ms per token.
constexpr int64_t kFfnTokChunk = 256;

// out[t] = down(silu(gate xn[t]) * up xn[t]), given already-normalized rows `a`; each
// output row depends only on its own token, so the chunking changes no bit.
void dense_ffn(ForwardCtx& ctx, ActRows& a, const Mat& gate, const Mat& up, const Mat& down, float* out);
size_t dense_ffn_scratch(int64_t n_tok, int64_t n_embd, int64_t n_ff);

// Float rows x [n_rows][n] (stride n) as a matmul with w reads them: x itself when
// vec_dot_type(w) is F32, else the rows quantized into the arena; *stride receives the row bytes.
const uint8_t* act_for_matmul(ForwardCtx& ctx, const Mat& w, const float* x, int64_t n_rows, int64_t n, size_t* stride);

// MoE block il (SPEC.md deepseek2 step 5) on normalized rows xn [n_tok][n_embd].
void moe_ffn(ForwardCtx& ctx, const HParams& hp, const LayerWeights& lw, int il, const float* xn, float* out);
size_t moe_ffn_scratch(const HParams& hp, int64_t n_tok);

}  // namespace ds
