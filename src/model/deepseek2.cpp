// deepseek2 block (../shared/SPEC.md "deepseek2", steps 1-6), absorbed MLA attention:
//   x      = rms_norm(h) * attn_norm
//   q      = q_b(rms_norm(q_a x) * q_a_norm)  or  attn_q x;     per head q = [q_nope | q_pe]
//   kv     = kv_a_mqa x;  c = rms_norm(kv[:kv_lora]) * kv_a_norm;  k_pe = kv[kv_lora:]
//   q_pe, k_pe = rope(q_pe, k_pe)                               (adjacent pairs, YaRN when set)
//   cache[pos] = [c | k_pe]                                     (the whole KV cache of the layer)
//   q_abs_h = k_b_h^T q_nope_h                                  (kv_lora wide)
//   o_h     = softmax((q_abs_h . c + q_pe_h . k_pe) * kq_scale) . c
//   attn    = attn_output(concat_h v_b_h o_h)
//   ffn     = dense FFN in the leading blocks, else MoE (ffn.cpp)
// Quantization points follow the reference (SPEC.md): x once for q/q_a and kv_a_mqa; each
// head's q_nope for k_b (32-blocks when k_b is Q5_0/Q8_0); each head's o for v_b.
// The legacy attn_kv_b layout arrives here already split into k_b/v_b (weights.cpp).
#include "model/deepseek2.h"

#include <algorithm>

#include "model/ffn.h"

namespace ds {

size_t Deepseek2Model::mla_scratch_per_token() const {
  const size_t E = static_cast<size_t>(hp_.n_embd), H = static_cast<size_t>(hp_.n_head);
  const size_t kvl = static_cast<size_t>(hp_.kv_lora), rope = static_cast<size_t>(hp_.n_rot);
  const size_t qw = static_cast<size_t>(hp_.n_nope) + rope, ql = static_cast<size_t>(hp_.q_lora);
  const size_t nv = static_cast<size_t>(hp_.n_v);
  // Quantized forms counted at 4 bytes per element.
  return 3 * E + 2 * ql + H * qw + (kvl + rope) + H * qw + H * (kvl + rope) + 2 * H * kvl + 2 * H * nv;
}

size_t Deepseek2Model::scratch_bytes(int64_t T) const {
  const size_t t = static_cast<size_t>(T), E = static_cast<size_t>(hp_.n_embd), H = static_cast<size_t>(hp_.n_head);
  const size_t attn = t * 4 * mla_scratch_per_token() + t * (H * 2 + 8) * 64 + 2 * H * (sizeof(MatJob) + 12) +
                      t * ForwardCtx::kAttnItemBytes + 34 * 64;
  const size_t dense = t * 4 * 3 * E + dense_ffn_scratch(T, hp_.n_embd, hp_.n_ff) + 16 * 64;
  const size_t moe = t * 4 * E + moe_ffn_scratch(hp_, T) + 16 * 64;
  return base_scratch_bytes(T) + std::max({attn, dense, moe});
}

void Deepseek2Model::ffn(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
  float* xn = ctx.arena.alloc<float>(T * E);
  ctx.rms_norm_rows(x, E, lw.ffn_norm, hp_.norm_eps, T, E, xn, E);
  if (hp_.is_moe_layer(il)) {
    moe_ffn(ctx, hp_, lw, il, xn, out);
  } else {
    ActRows a(ctx, xn, T, E, E);
    dense_ffn(ctx, a, lw.ffn_gate, lw.ffn_up, lw.ffn_down, out);
  }
}

void Deepseek2Model::per_head(ForwardCtx& ctx, const std::vector<Mat>& w, const float* x, int64_t x_head, float* y,
                              int64_t y_tok, int64_t y_head) const {
  const int64_t T = ctx.batch.n_tok, H = hp_.n_head, n_in = w[0].n_in;
  const GgmlType at = vec_dot_type(w[0].type);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t head_bytes = static_cast<size_t>(x_head) * sizeof(float);
  if (at != GgmlType::F32) {
    // Quantize every (token, head) row once: rows [T][H] of n_in elements.
    ProfScope ps(ctx.prof, Stage::kQuantizeAct);
    head_bytes = ggml_row_size(at, n_in);
    uint8_t* q = ctx.arena.alloc_bytes(head_bytes * static_cast<size_t>(T * H));
    ctx.parallel_for(T * H, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        ctx.kt.quantize_act(at, x + i * x_head, q + static_cast<size_t>(i) * head_bytes, n_in);
    });
    act = q;
  }
  MatJob* jobs = ctx.arena.alloc<MatJob>(H);
  for (int64_t h = 0; h < H; ++h) {
    jobs[h] = MatJob{w[static_cast<size_t>(h)],
                     act + static_cast<size_t>(h) * head_bytes,
                     head_bytes * static_cast<size_t>(H),
                     T,
                     y + h * y_head,
                     y_tok};
  }
  ctx.matmul_jobs(jobs, static_cast<int>(H));
}

// Absorbed attention of every (sequence, query, head) over the sequence's latent cache,
// in the work items of ForwardCtx::for_each_attention_item.
void Deepseek2Model::mla(int il, ForwardCtx& ctx, const float* qcat, float* o) const {
  const Batch& b = ctx.batch;
  const size_t layer_off = ctx.kv.offset(il, 0);
  ctx.for_each_attention_item(hp_.n_head, [&](int seq, int64_t q0, int64_t n, int h0, int h1) {
    const SeqSlice& sq = b.seqs[seq];
    const int64_t t0 = sq.t0 + q0;
    const KvView paged{.type = ctx.kv.type,
                       .blocks = sq.kv_blocks,
                       .block_size = ctx.kv.block_size,
                       .row_stride = ctx.kv.row_bytes_of(il),
                       .head_offset = 0,
                       .elem_offset = layer_off};
    mla_call(ctx, qcat, o, t0, n, b.pos + t0, paged, h0, h1);
  });
}

void Deepseek2Model::mla_call(ForwardCtx& ctx, const float* qcat, float* o, int64_t t0, int64_t n_q,
                              const int32_t* q_pos, const KvView& kv, int h0, int h1) const {
  const int H = hp_.n_head;
  const int64_t kvl = hp_.kv_lora, rope = hp_.n_rot, qs = kvl + rope;
  ctx.kt.mla_attn(MlaArgs{.n_head = H,
                          .kv_lora = static_cast<int>(kvl),
                          .n_rope = static_cast<int>(rope),
                          .scale = hp_.kq_scale(),
                          .n_q = n_q,
                          .q_abs = qcat + t0 * H * qs,
                          .q_pe = qcat + t0 * H * qs + kvl,
                          .q_tok_stride = H * qs,
                          .q_head_stride = qs,
                          .q_pos = q_pos,
                          .kv = kv,
                          .out = o + t0 * H * kvl,
                          .out_tok_stride = H * kvl,
                          .out_head_stride = kvl,
                          .head_begin = h0,
                          .head_end = h1});
}

float* Deepseek2Model::mla_project(int il, ForwardCtx& ctx, ActRows& a, float** qr) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, H = hp_.n_head;
  const int64_t nope = hp_.n_nope, rope = hp_.n_rot, qw = nope + rope, kvl = hp_.kv_lora;
  const float eps = hp_.norm_eps;
  Arena& ar = ctx.arena;
  // kv = [c | k_pe] in the same pass as q (or q_a); c normalized in place.
  float* q = ar.alloc<float>(T * H * qw);
  float* kv = ar.alloc<float>(T * (kvl + rope));
  *qr = nullptr;
  if (lw.wq_a) {
    const int64_t ql = hp_.q_lora;
    float* qa = ar.alloc<float>(T * ql);
    matmul_many(ctx, a, {{&lw.wq_a, qa, ql}, {&lw.wkv_a, kv, kvl + rope}});
    ctx.rms_norm_rows(qa, ql, lw.q_a_norm, eps, T, ql, qa, ql);
    ActRows aq(ctx, qa, T, ql, ql);
    matmul(ctx, lw.wq_b, aq, q, H * qw);
    *qr = qa;
  } else {
    matmul_many(ctx, a, {{&lw.wq_b, q, H * qw}, {&lw.wkv_a, kv, kvl + rope}});
  }
  ctx.rms_norm_rows(kv, kvl + rope, lw.kv_a_norm, eps, T, kvl, kv, kvl + rope);

  // RoPE on q_pe (every head) and the shared k_pe; then the latent row goes to the cache.
  const RopeParams rp = hp_.rope_params(nullptr);
  ctx.rope_rows(q + nope, static_cast<int>(H), qw, H * qw, rp);
  ctx.rope_rows(kv + kvl, 1, kvl + rope, kvl + rope, rp);
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      ctx.kt.store_kv(ctx.kv.type, kv + t * (kvl + rope), ctx.kv_row(il, t), kvl + rope);
  });
  return q;
}

float* Deepseek2Model::mla_absorb(int il, ForwardCtx& ctx, const float* q) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, H = hp_.n_head;
  const int64_t nope = hp_.n_nope, rope = hp_.n_rot, qw = nope + rope, kvl = hp_.kv_lora, qs = kvl + rope;
  float* qcat = ctx.arena.alloc<float>(T * H * qs);
  per_head(ctx, lw.k_b, q, qw, qcat, H * qs, qs);
  ctx.parallel_for(T * H, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::copy_n(q + i * qw + nope, rope, qcat + i * qs + kvl);
  });
  return qcat;
}

void Deepseek2Model::mla_output(int il, ForwardCtx& ctx, const float* o, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, H = hp_.n_head, nv = hp_.n_v;
  float* ov = ctx.arena.alloc<float>(T * H * nv);
  per_head(ctx, lw.v_b, o, hp_.kv_lora, ov, H * nv, nv);
  ActRows ao(ctx, ov, T, H * nv, H * nv);
  matmul(ctx, lw.wo, ao, out, hp_.n_embd);
}

void Deepseek2Model::attention(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
  float* xn = ctx.arena.alloc<float>(T * E);
  ctx.rms_norm_rows(x, E, lw.attn_norm, hp_.norm_eps, T, E, xn, E);
  ActRows a(ctx, xn, T, E, E);
  float* qr = nullptr;
  const float* q = mla_project(il, ctx, a, &qr);
  const float* qcat = mla_absorb(il, ctx, q);
  float* o = ctx.arena.alloc<float>(T * hp_.n_head * hp_.kv_lora);
  mla(il, ctx, qcat, o);
  mla_output(il, ctx, o, out);
}

std::unique_ptr<Model> make_deepseek2_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<Deepseek2Model>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
