// llama block (../shared/SPEC.md "llama"):
//   x = rms_norm(h) * attn_norm
//   q = Wq x (+bq), k = Wk x (+bk), v = Wv x (+bv)       (biases: qwen2)
//   q_h, k_h = rms_norm(q_h) * q_norm, rms_norm(k_h) * k_norm   (per head: qwen3)
//   q, k = rope(q, k)                                      (adjacent pairs; qwen2: halves)
//   cache[pos] = k, v; o = softmax(q k^T / sqrt(hd)) v     (GQA: head h uses kv head h / (H/KV))
//   attn = Wo o
//   ffn  = down(silu(gate x') * up x'),  x' = rms_norm(h + attn) * ffn_norm
#include "model/llama.h"

#include "model/ffn.h"

namespace ds {

namespace {

void add_bias(ForwardCtx& ctx, float* y, int64_t n_rows, int64_t n, const Vec& b) {
  if (!b) return;
  ctx.parallel_for(n_rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t i = 0; i < n; ++i) y[t * n + i] += b.data[i];
    }
  });
}

}  // namespace

size_t LlamaModel::k_row_bytes(GgmlType t) const {
  return ggml_row_size(t, hp_.n_head_kv * hp_.n_embd_head_k);
}

size_t LlamaModel::kv_row_bytes(GgmlType t) const {
  return k_row_bytes(t) + ggml_row_size(t, hp_.n_head_kv * hp_.n_embd_head_v);
}

size_t LlamaModel::scratch_bytes(int64_t T) const {
  const size_t t = static_cast<size_t>(T);
  const size_t E = static_cast<size_t>(hp_.n_embd), H = static_cast<size_t>(hp_.n_head);
  const size_t KV = static_cast<size_t>(hp_.n_head_kv);
  const size_t hk = static_cast<size_t>(hp_.n_embd_head_k), hv = static_cast<size_t>(hp_.n_embd_head_v);
  // attention: xn + two quantized forms, q, k, v, o and its quantized form.
  const size_t attn =
      t * 4 * (E + 2 * E + H * hk + KV * (hk + hv) + 2 * H * hv) + 16 * 64 + t * 256 + t * ForwardCtx::kAttnItemBytes;
  const size_t ffn = t * 4 * 3 * E + dense_ffn_scratch(T, hp_.n_embd, hp_.n_ff) + 16 * 64 + t * 128;
  return base_scratch_bytes(T) + std::max(attn, ffn);
}

// Writes each batch row's K and V into its sequence's cache at its position [KV_LAYOUT].
void LlamaModel::store_kv(int il, ForwardCtx& ctx, const float* k, const float* v) const {
  const int64_t nk = hp_.n_head_kv * hp_.n_embd_head_k, nv = hp_.n_head_kv * hp_.n_embd_head_v;
  const size_t kb = k_row_bytes(ctx.kv.type);
  ctx.parallel_for(ctx.batch.n_tok, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* row = ctx.kv_row(il, t);
      ctx.kt.store_kv(ctx.kv.type, k + t * nk, row, nk);
      ctx.kt.store_kv(ctx.kv.type, v + t * nv, row + kb, nv);
    }
  });
}

// qwen3: every (token, head) row of q and of k normalized on its own, in place, before
// RoPE; one parallel pass over the T*H q rows and T*KV k rows.
void LlamaModel::head_norms(ForwardCtx& ctx, const LayerWeights& lw, float* q, float* k) const {
  ProfScope ps(ctx.prof, Stage::kNormsRope);
  const int64_t hk = hp_.n_embd_head_k, nq = ctx.batch.n_tok * hp_.n_head, nk = ctx.batch.n_tok * hp_.n_head_kv;
  ctx.parallel_for(nq + nk, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = i < nq ? q + i * hk : k + (i - nq) * hk;
      ctx.kt.rms_norm(row, (i < nq ? lw.q_norm : lw.k_norm).data, row, hk, hp_.norm_eps);
    }
  });
}

void LlamaModel::attention(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const Batch& b = ctx.batch;
  const int64_t T = b.n_tok, E = hp_.n_embd;
  const int H = hp_.n_head, KV = hp_.n_head_kv;
  const int64_t hk = hp_.n_embd_head_k, hv = hp_.n_embd_head_v;
  Arena& ar = ctx.arena;

  float* xn = ar.alloc<float>(T * E);
  ctx.rms_norm_rows(x, E, lw.attn_norm, hp_.norm_eps, T, E, xn, E);
  ActRows a(ctx, xn, T, E, E);
  float* q = ar.alloc<float>(T * H * hk);
  float* k = ar.alloc<float>(T * KV * hk);
  float* v = ar.alloc<float>(T * KV * hv);
  matmul_many(ctx, a, {{&lw.wq, q, H * hk}, {&lw.wk, k, KV * hk}, {&lw.wv, v, KV * hv}});
  add_bias(ctx, q, T, H * hk, lw.bq);
  add_bias(ctx, k, T, KV * hk, lw.bk);
  add_bias(ctx, v, T, KV * hv, lw.bv);
  if (lw.q_norm) head_norms(ctx, lw, q, k);

  const RopeParams rp = hp_.rope_params(w_->rope_freqs.data);
  ctx.rope_rows(q, H, hk, H * hk, rp);
  ctx.rope_rows(k, KV, hk, KV * hk, rp);
  store_kv(il, ctx, k, v);

  // Attention per (sequence, query block, heads) over the sequence's cached positions.
  float* o = ar.alloc<float>(T * H * hv);
  const GgmlType kt = ctx.kv.type;
  const size_t layer_off = ctx.kv.offset(il, 0);
  ctx.for_each_attention_item(static_cast<int>(H), [&](int seq, int64_t q0, int64_t n, int h0, int h1) {
    const SeqSlice& sq = b.seqs[seq];
    const int64_t t0 = sq.t0 + q0;
    const KvView kview{.type = kt,
                       .blocks = sq.kv_blocks,
                       .block_size = ctx.kv.block_size,
                       .row_stride = ctx.kv.row_bytes_of(il),
                       .head_offset = ggml_row_size(kt, hk),
                       .elem_offset = layer_off};
    KvView vview = kview;
    vview.head_offset = ggml_row_size(kt, hv);
    vview.elem_offset = layer_off + k_row_bytes(kt);
    ctx.kt.flash_attn(AttnArgs{.n_head = H,
                               .n_head_kv = KV,
                               .d_k = static_cast<int>(hk),
                               .d_v = static_cast<int>(hv),
                               .scale = hp_.kq_scale(),
                               .n_q = n,
                               .q = q + t0 * H * hk,
                               .q_tok_stride = H * hk,
                               .q_head_stride = hk,
                               .q_pos = b.pos + t0,
                               .k = kview,
                               .v = vview,
                               .out = o + t0 * H * hv,
                               .out_tok_stride = H * hv,
                               .out_head_stride = hv,
                               .head_begin = h0,
                               .head_end = h1});
  });

  ActRows ao(ctx, o, T, H * hv, H * hv);
  matmul(ctx, lw.wo, ao, out, E);
}

void LlamaModel::ffn(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
  float* xn = ctx.arena.alloc<float>(T * E);
  ctx.rms_norm_rows(x, E, lw.ffn_norm, hp_.norm_eps, T, E, xn, E);
  ActRows a(ctx, xn, T, E, E);
  dense_ffn(ctx, a, lw.ffn_gate, lw.ffn_up, lw.ffn_down, out);
}

std::unique_ptr<Model> make_llama_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<LlamaModel>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
