// deepseek4 (DeepSeek-V4, V4-Flash) block (../shared/SPEC-deepseek32-deepseek4.md 3.3-3.8):
//   state X [hc = 4 streams][E] per token; each sub-layer: y = pre-mix(X) (hc_pre),
//   o = sublayer(rms_norm(y) * norm), X' = post-mix(X, o) (hc_post). Attention of block il
//   (ratio r = compress_ratios[il]):
//     qr = rms_norm(q_a a) * q_a_norm;  q = q_b qr, each head rms-normed;   RoPE(q, t)
//     kv = rms_norm(attn_kv a) * kv_a_norm;  RoPE(kv, t)          (K = V, one head)
//     keys: raw kv of the last n_swa positions; r = 128: every complete compressed row;
//           r = 4: the compressed rows the CSA indexer selects (top-k)
//     o_h = softmax_with_sink(q_h . k / sqrt(D)) . k;  inverse RoPE(o_h, t)
//     attn = out_b concat_g(out_a_g concat(o_h, h in g))      (grouped output LoRA)
//   FFN: the V4 MoE (deepseek4_ffn.cpp). Head: hc_head, rms_norm * output_norm, output.
// The Model interface's sub-layers map the whole state: attention() and ffn() take X and
// return X' (post-mix included); "attn_out"/"ffn_out" trace the sub-layer output o.
//
// Cache [DSV4_CACHE]: deepseek4.h RowLayout. Each token's row holds its raw kv and its
// compressor inputs; compressed rows are built as soon as the position completing their
// block arrives (so chunks ending mid-block just leave inputs in the cache for the next
// chunk) and stored in that position's row. Attention is sparse: each query reads at most
// n_swa raw rows plus the selected (r = 4) or complete (r = 128) compressed rows, with an
// online softmax per head (no score matrix).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/deepseek4.h"
#include "model/model.h"

namespace ds {

namespace {

using dsv4::RowLayout;

constexpr int kMaxRun = 64;  // indexer rows scored per matmul (scratch bound)

class Deepseek4Model : public Model {
 public:
  Deepseek4Model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w)
      : Model(std::move(file), std::move(hp), std::move(w)) {}

  size_t kv_row_bytes(GgmlType t) const override {
    size_t m = 0;
    for (int il = 0; il < hp_.n_layer; ++il) m = std::max(m, kv_layer_row_bytes(il, t));
    return m;
  }
  // Each block's own row (KvLayout::layer_rows): ratio 0 the raw kv only, ratio 128 also its
  // compressed row and inputs, ratio 4 also the indexer's.
  size_t kv_layer_row_bytes(int il, GgmlType t) const override { return dsv4::row_layout(hp_, il, t).end; }

  // What a decode step at context n_ctx reads per block: the n_swa raw rows of the window;
  // ratio 128 every complete compressed row; ratio 4 every indexer row (scored) and at most
  // top_k compressed rows; and the compressor inputs its pooling reads, averaged per token
  // (ratio 4: 8 positions every 4 tokens, 128: 128 every 128; the indexer's likewise).
  double decode_kv_bytes(int64_t n_ctx, GgmlType t) const override {
    const double D = static_cast<double>(ggml_row_size(t, hp_.n_embd_head_k));
    const double DI = static_cast<double>(hp_.n_idx_dim) * sizeof(float);
    const double state_row = 2.0 * static_cast<double>(hp_.n_embd_head_k) * sizeof(float);  // v and s, per c
    double bytes = 0;
    for (int il = 0; il < hp_.n_layer; ++il) {
      const int r = ratio(il);
      bytes += static_cast<double>(std::min<int64_t>(n_ctx, hp_.n_swa)) * D;
      if (r == 0) continue;
      const double n_comp = static_cast<double>(n_ctx / r);
      const double c = static_cast<double>(dsv4::comp_mult(r));
      bytes += c * c * state_row;  // c*r positions of c-wide inputs every r tokens
      if (r == 4) {
        bytes += n_comp * DI + std::min(n_comp, static_cast<double>(hp_.idx_top_k)) * D;
        bytes += 2.0 * 4.0 * DI;  // 8 positions of the indexer's 2-wide v and s every 4 tokens
      } else {
        bytes += n_comp * D;
      }
    }
    return bytes;
  }

  size_t scratch_bytes(int64_t T) const override;
  void attention(int il, ForwardCtx& ctx, const float* x, float* out) const override;
  void ffn(int il, ForwardCtx& ctx, const float* x, float* out) const override;
  void forward(ForwardCtx& ctx, float* logits) const override;

 private:
  struct Proj;  // the attention projections of a batch
  void project(int il, ForwardCtx& ctx, const float* a, Proj* p) const;
  void write_rows(int il, ForwardCtx& ctx, const Proj& p) const;
  void build_compressed(int il, ForwardCtx& ctx) const;
  void select_rows(int il, ForwardCtx& ctx, const Proj& p, int32_t* sel, int32_t* n_sel) const;
  void attend(int il, ForwardCtx& ctx, const Proj& p, const int32_t* sel, const int32_t* n_sel, float* o) const;
  void output_lora(int il, ForwardCtx& ctx, float* o, float* out) const;

  int ratio(int il) const { return hp_.compress_ratio[static_cast<size_t>(il)]; }
  // Row of position p of sequence sq in block il [KV_LAYOUT].
  static const uint8_t* row_at(const ForwardCtx& ctx, const SeqSlice& sq, int il, int64_t p) {
    return sq.kv_blocks[p / ctx.kv.block_size] + ctx.kv.offset(il, static_cast<int>(p % ctx.kv.block_size));
  }
};

struct Deepseek4Model::Proj {
  float* q = nullptr;    // [T][H][D] normed, roped
  float* kv = nullptr;   // [T][D] normed, roped
  float* cv = nullptr;   // [T][c*D] compressor v (ratio != 0)
  float* cs = nullptr;   // [T][c*D] compressor gate logits (no APE yet)
  float* iq = nullptr;   // [T][H_I][D_I] indexer queries, roped (ratio 4)
  float* iw = nullptr;   // [T][H_I] indexer head weights / sqrt(D_I * H_I)
  float* icv = nullptr;  // [T][2*D_I]
  float* ics = nullptr;  // [T][2*D_I]
};

size_t Deepseek4Model::scratch_bytes(int64_t T) const {
  const size_t t = static_cast<size_t>(T), f = sizeof(float);
  const size_t E = static_cast<size_t>(hp_.n_embd), W = E * static_cast<size_t>(hp_.n_hc);
  const size_t H = static_cast<size_t>(hp_.n_head), D = static_cast<size_t>(hp_.n_embd_head_k);
  const size_t ql = static_cast<size_t>(hp_.q_lora), HI = static_cast<size_t>(hp_.n_idx_head);
  const size_t DI = static_cast<size_t>(hp_.n_idx_dim), GO = static_cast<size_t>(hp_.n_out_group * hp_.out_lora);
  const size_t K = static_cast<size_t>(hp_.idx_top_k), nth = 256;  // per-thread buffers: thread count bound
  // Forward: state twice, head rows. Sub-layer: mix (flat, m, y, post, comb), normed rows.
  const size_t fwd = 2 * t * W * f + 3 * t * E * f + 64 * 64;
  const size_t mix = t * W * (f + 4) + t * (24 + 4 + 16) * f + 2 * t * E * f + 16 * 64;
  const size_t proj = t * f * (2 * ql + 2 * H * D + D + 4 * D + HI * DI + HI + 4 * DI) + 4 * t * (E + ql + H * D) +
                      t * 8 * 64 + 16 * 64;
  const size_t sel = t * (K + 1) * sizeof(int32_t) + t * f * 2 + 8 * 64;
  // attend's candidate row pointers: the window plus k (ratio 4) or a row per 128 positions
  const size_t cand = static_cast<size_t>(hp_.n_swa) + std::max(K, static_cast<size_t>(hp_.n_ctx_train) / 128 + 1);
  const size_t per_thread = nth * ((H * D + 4 * H + 4 * D + 2 * DI + (HI + 1) * kMaxRun) * f +
                                   K * sizeof(dsv4::ScoredRow) + cand * sizeof(void*) + 320);
  const size_t out = t * (H * D + GO) * f + 4 * t * (H * D + GO) + 8 * 64;
  const size_t attn = mix + proj + sel + per_thread + out + 4 * t * ForwardCtx::kAttnItemBytes;
  const size_t ffn = mix + t * E * f + dsv4::moe_scratch(hp_, T);
  return fwd + std::max(attn, ffn);
}

void Deepseek4Model::project(int il, ForwardCtx& ctx, const float* a, Proj* p) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  Arena& ar = ctx.arena;
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd, H = hp_.n_head, D = hp_.n_embd_head_k, R = hp_.n_rot;
  const int64_t ql = hp_.q_lora, HI = hp_.n_idx_head, DI = hp_.n_idx_dim;
  const int r = ratio(il);
  const float eps = hp_.norm_eps;
  ActRows aa(ctx, a, T, E, E);
  float* qa = ar.alloc<float>(T * ql);
  p->kv = ar.alloc<float>(T * D);
  matmul_many(ctx, aa, {{&lw.wq_a, qa, ql}, {&lw.wkv, p->kv, D}});
  if (r != 0) {
    const int64_t cD = dsv4::comp_mult(r) * D;
    p->cv = ar.alloc<float>(T * cD);
    p->cs = ar.alloc<float>(T * cD);
    matmul_many(ctx, aa, {{&lw.comp_kv, p->cv, cD}, {&lw.comp_gate, p->cs, cD}});
  }
  if (r == 4) {
    p->icv = ar.alloc<float>(T * 2 * DI);
    p->ics = ar.alloc<float>(T * 2 * DI);
    p->iw = ar.alloc<float>(T * HI);
    matmul_many(ctx, aa,
                {{&lw.idx_comp_kv, p->icv, 2 * DI}, {&lw.idx_comp_gate, p->ics, 2 * DI}, {&lw.idx_proj, p->iw, HI}});
    const float s = 1.0f / std::sqrt(static_cast<float>(DI * HI));
    for (int64_t i = 0; i < T * HI; ++i) p->iw[i] *= s;
  }
  ctx.rms_norm_rows(qa, ql, lw.q_a_norm, eps, T, ql, qa, ql);
  ActRows aq(ctx, qa, T, ql, ql);
  p->q = ar.alloc<float>(T * H * D);
  if (r == 4) {
    p->iq = ar.alloc<float>(T * HI * DI);
    matmul_many(ctx, aq, {{&lw.wq_b, p->q, H * D}, {&lw.idx_q_b, p->iq, HI * DI}});
  } else {
    matmul(ctx, lw.wq_b, aq, p->q, H * D);
  }
  ctx.rms_norm_rows(p->q, D, Vec{}, eps, T * H, D, p->q, D);  // per head, no weight
  ctx.rms_norm_rows(p->kv, D, lw.kv_a_norm, eps, T, D, p->kv, D);
  const RopeParams rp = dsv4::rope_params(hp_, r);
  ctx.rope_rows(p->q + D - R, static_cast<int>(H), D, H * D, rp);
  ctx.rope_rows(p->kv + D - R, 1, D, D, rp);
  if (r == 4) ctx.rope_rows(p->iq + DI - R, static_cast<int>(HI), DI, HI * DI, dsv4::rope_params(hp_, 4));
}

// Every batch row's raw kv and compressor inputs (s with the APE row of its position).
void Deepseek4Model::write_rows(int il, ForwardCtx& ctx, const Proj& p) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t D = hp_.n_embd_head_k, DI = hp_.n_idx_dim;
  const int r = ratio(il);
  const int64_t cD = dsv4::comp_mult(r) * D;
  const RowLayout L = dsv4::row_layout(hp_, il, ctx.kv.type);
  ctx.parallel_for(ctx.batch.n_tok, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* row = ctx.kv_row(il, t);
      ctx.kt.store_kv(ctx.kv.type, p.kv + t * D, row + L.raw, D);
      const int64_t pos = ctx.batch.pos[t];
      if (r != 0) {
        auto* st = reinterpret_cast<float*>(row + L.state);
        std::memcpy(st, p.cv + t * cD, static_cast<size_t>(cD) * sizeof(float));
        const float* ape = lw.comp_ape.data + (pos % r) * cD;
        for (int64_t i = 0; i < cD; ++i) st[cD + i] = p.cs[t * cD + i] + ape[i];
      }
      if (r == 4) {
        auto* st = reinterpret_cast<float*>(row + L.idx_state);
        std::memcpy(st, p.icv + t * 2 * DI, static_cast<size_t>(2 * DI) * sizeof(float));
        const float* ape = lw.idx_comp_ape.data + (pos % 4) * 2 * DI;
        for (int64_t i = 0; i < 2 * DI; ++i) st[2 * DI + i] = p.ics[t * 2 * DI + i] + ape[i];
      }
    }
  });
}

// Compressed rows (and indexer rows) of the blocks that batch rows complete: softmax-pooled
// inputs, rms_norm * norm, RoPE at the block's first position r*b (SPEC 3.5).
void Deepseek4Model::build_compressed(int il, ForwardCtx& ctx) const {
  const int r = ratio(il);
  if (r == 0) return;
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t D = hp_.n_embd_head_k, DI = hp_.n_idx_dim, R = hp_.n_rot;
  const int64_t cD = dsv4::comp_mult(r) * D;
  const RowLayout L = dsv4::row_layout(hp_, il, ctx.kv.type);
  const RopeParams rp = dsv4::rope_params(hp_, r);
  const int64_t Wmax = std::max(D, DI);
  const int nth = ctx.pool.n_threads();
  float* scratch = ctx.arena.alloc<float>(static_cast<int64_t>(nth) * 3 * Wmax);
  const float** ptrs = ctx.arena.alloc<const float*>(static_cast<int64_t>(nth) * 2 * r * 2);
  ctx.pool.parallel_for(ctx.batch.n_tok, 1, [&](int64_t t0, int64_t t1, int ith) {
    float* out = scratch + static_cast<int64_t>(ith) * 3 * Wmax;
    const float** vp = ptrs + static_cast<int64_t>(ith) * 4 * r;
    const float** sp = vp + 2 * r;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pos = ctx.batch.pos[t];
      if ((pos + 1) % r != 0) continue;
      const int64_t b = pos / r;
      const SeqSlice& sq = ctx.seq_of(t);
      uint8_t* dst = const_cast<uint8_t*>(row_at(ctx, sq, il, pos));
      const int n_pos = r == 4 ? 8 : r;
      const int64_t first = r == 4 ? r * b - 4 : r * b;  // ratio 4 overlaps the previous block
      auto fill = [&](size_t state_off, int64_t cw) {
        for (int j = 0; j < n_pos; ++j) {
          const int64_t p = first + j;
          if (p < 0) {
            vp[j] = sp[j] = nullptr;
            continue;
          }
          const auto* st = reinterpret_cast<const float*>(row_at(ctx, sq, il, p) + state_off);
          vp[j] = st;
          sp[j] = st + cw;
        }
      };
      int32_t pos_b = static_cast<int32_t>(r * b);
      fill(L.state, cD);
      dsv4::compress({.v = vp, .s = sp, .n_pos = n_pos, .ratio = r, .width = D}, out, out + Wmax);
      ctx.kt.rms_norm(out, lw.comp_norm.data, out, D, hp_.norm_eps);
      ctx.kt.rope(RopeArgs{.x = out + D - R, .n_tok = 1, .n_head = 1, .tok_stride = D, .head_stride = D, .pos = &pos_b},
                  rp);
      ctx.kt.store_kv(ctx.kv.type, out, dst + L.comp, D);
      if (r == 4) {
        fill(L.idx_state, 2 * DI);
        dsv4::compress({.v = vp, .s = sp, .n_pos = 8, .ratio = 4, .width = DI}, out, out + Wmax);
        ctx.kt.rms_norm(out, lw.idx_comp_norm.data, out, DI, hp_.norm_eps);
        ctx.kt.rope(
            RopeArgs{.x = out + DI - R, .n_tok = 1, .n_head = 1, .tok_stride = DI, .head_stride = DI, .pos = &pos_b},
            rp);
        std::memcpy(dst + L.idx_comp, out, static_cast<size_t>(DI) * sizeof(float));
      }
    }
  });
}

// CSA (ratio 4): each query's selected compressed rows, sel [T][k], n_sel [T]. Traces
// "topk" [T][k] (-1 where fewer rows are visible).
void Deepseek4Model::select_rows(int il, ForwardCtx& ctx, const Proj& p, int32_t* sel, int32_t* n_sel) const {
  const int64_t T = ctx.batch.n_tok, HI = hp_.n_idx_head, DI = hp_.n_idx_dim;
  const int k = hp_.idx_top_k;
  const RowLayout L = dsv4::row_layout(hp_, il, ctx.kv.type);
  const int nth = ctx.pool.n_threads();
  const int bs = ctx.kv.block_size, max_run = std::min(bs / 4 + 1, kMaxRun);
  auto* heaps = ctx.arena.alloc<dsv4::ScoredRow>(static_cast<int64_t>(nth) * k);
  float* dots = ctx.arena.alloc<float>(static_cast<int64_t>(nth) * (HI + 1) * max_run);
  ctx.pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1, int ith) {
    float* d = dots + static_cast<int64_t>(ith) * (HI + 1) * max_run;
    const dsv4::IndexerScratch scr{
        .heap = heaps + static_cast<int64_t>(ith) * k, .dots = d, .scores = d + HI * max_run};
    for (int64_t t = t0; t < t1; ++t) {
      const SeqSlice& sq = ctx.seq_of(t);
      const int64_t n_vis = (ctx.batch.pos[t] + 1) / 4;
      const dsv4::IndexerQuery iq{
          .q = p.iq + t * HI * DI, .w = p.iw + t * HI, .n_head = static_cast<int>(HI), .dim = DI};
      // Row j's key is in the row of position 4j + 3; the rows of one KV block are
      // row_bytes apart, so j, j+1, ... up to the block's end form one run.
      auto run = [&](int64_t j, dsv4::KeyRun* r) {
        const int64_t pos = 4 * j + 3, blk_end = (pos / bs + 1) * bs;
        r->first = row_at(ctx, sq, il, pos) + L.idx_comp;
        r->stride = 4 * ctx.kv.row_bytes_of(il);
        return std::min<int64_t>((blk_end - 1 - pos) / 4 + 1, max_run);
      };
      int32_t* s = sel + t * k;
      n_sel[t] = dsv4::csa_select(ctx.kt, iq, n_vis, k, run, s, scr);
      for (int i = n_sel[t]; i < k; ++i) s[i] = -1;
    }
  });
  ctx.emit("topk", il, sel, T, k);
}

// Sparse attention with sinks and the inverse RoPE of the output (SPEC 3.4 steps 3-5).
void Deepseek4Model::attend(int il, ForwardCtx& ctx, const Proj& p, const int32_t* sel, const int32_t* n_sel,
                            float* o) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t H = hp_.n_head, D = hp_.n_embd_head_k, R = hp_.n_rot;
  const int r = ratio(il), k = hp_.idx_top_k;
  const RowLayout L = dsv4::row_layout(hp_, il, ctx.kv.type);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int nth = ctx.pool.n_threads();
  const int64_t T = ctx.batch.n_tok;
  // A query's candidates (window rows, then compressed rows) as a picked view: one row
  // pointer each (at its raw or comp part), block size 1, the kernel attending to all of
  // them (q_pos = count - 1). Per thread: room for the most any query of the batch has.
  int64_t max_pos = 0;
  for (int64_t t = 0; t < T; ++t) max_pos = std::max<int64_t>(max_pos, ctx.batch.pos[t]);
  const int64_t max_c = hp_.n_swa + (r == 128 ? (max_pos + 1) / 128 : r == 4 ? k : 0);
  const uint8_t** rows = ctx.arena.alloc<const uint8_t*>(static_cast<int64_t>(nth) * max_c);
  // Items: (query, range of heads); heads are split only when queries are fewer than threads.
  const int groups = static_cast<int>(std::clamp<int64_t>((nth + T - 1) / T, 1, H));
  ctx.pool.parallel_for(T * groups, 1, [&](int64_t i0, int64_t i1, int ith) {
    const uint8_t** cand = rows + static_cast<int64_t>(ith) * max_c;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / groups;
      const int g = static_cast<int>(item % groups);
      const SeqSlice& sq = ctx.seq_of(t);
      const int64_t pos = ctx.batch.pos[t];
      int32_t n = 0;
      for (int64_t q = std::max<int64_t>(0, pos - hp_.n_swa + 1); q <= pos; ++q)
        cand[n++] = row_at(ctx, sq, il, q) + L.raw;
      if (r == 128) {
        for (int64_t b = 0; b < (pos + 1) / 128; ++b) cand[n++] = row_at(ctx, sq, il, 128 * b + 127) + L.comp;
      } else if (r == 4) {
        for (int i = 0; i < n_sel[t]; ++i) cand[n++] = row_at(ctx, sq, il, 4 * int64_t{sel[t * k + i]} + 3) + L.comp;
      }
      const KvView picked{.type = ctx.kv.type, .blocks = cand, .block_size = 1, .row_stride = 0};
      const int32_t last = n - 1;
      // Key = value = the row (D wide, one KV head for all H); the sink starts each head's
      // online softmax (m = sink, l = 1), so it enters the denominator only.
      ctx.kt.flash_attn(AttnArgs{.n_head = static_cast<int>(H),
                                 .n_head_kv = 1,
                                 .d_k = static_cast<int>(D),
                                 .d_v = static_cast<int>(D),
                                 .scale = scale,
                                 .n_q = 1,
                                 .q = p.q + t * H * D,
                                 .q_tok_stride = H * D,
                                 .q_head_stride = D,
                                 .q_pos = &last,
                                 .k = picked,
                                 .v = picked,
                                 .out = o + t * H * D,
                                 .out_tok_stride = H * D,
                                 .out_head_stride = D,
                                 .head_begin = static_cast<int>(H * g / groups),
                                 .head_end = static_cast<int>(H * (g + 1) / groups),
                                 .sinks = lw.attn_sinks.data});
    }
  });
  // Inverse RoPE at each query's position: the angle -theta (negated positions).
  int32_t* neg = ctx.arena.alloc<int32_t>(ctx.batch.n_tok);
  for (int64_t t = 0; t < ctx.batch.n_tok; ++t) neg[t] = -ctx.batch.pos[t];
  const RopeParams rp = dsv4::rope_params(hp_, r);
  ctx.parallel_for(ctx.batch.n_tok, [&](int64_t t0, int64_t t1) {
    ctx.kt.rope(RopeArgs{.x = o + t0 * H * D + D - R,
                         .n_tok = t1 - t0,
                         .n_head = static_cast<int>(H),
                         .tok_stride = H * D,
                         .head_stride = D,
                         .pos = neg + t0},
                rp);
  });
}

// attn = out_b concat_g(out_a_g . concat(o_h for h in group g)) (SPEC 3.4 step 6).
void Deepseek4Model::output_lora(int il, ForwardCtx& ctx, float* o, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, H = hp_.n_head, D = hp_.n_embd_head_k, G = hp_.n_out_group, O = hp_.out_lora;
  const int64_t gw = H * D / G;
  float* z = ctx.arena.alloc<float>(T * G * O);
  for (int64_t g = 0; g < G; ++g) {
    Mat a = lw.wo_a;
    a.data += static_cast<size_t>(g * O) * a.row_stride;
    a.n_out = O;
    a.panels = nullptr;
    ActRows ag(ctx, o + g * gw, T, gw, H * D);
    matmul(ctx, a, ag, z + g * O, G * O);
  }
  ActRows az(ctx, z, T, G * O, G * O);
  matmul(ctx, lw.wo_b, az, out, hp_.n_embd);
}

void Deepseek4Model::attention(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd, H = hp_.n_head, D = hp_.n_embd_head_k;
  Arena& ar = ctx.arena;
  const dsv4::HcEntry hc =
      dsv4::hc_enter(ctx, hp_, lw.hc_attn_fn, lw.hc_attn_base, lw.hc_attn_scale, lw.attn_norm, x, T);

  Proj p;
  project(il, ctx, hc.y, &p);
  write_rows(il, ctx, p);
  build_compressed(il, ctx);
  int32_t* sel = nullptr;
  int32_t* n_sel = nullptr;
  if (ratio(il) == 4) {
    sel = ar.alloc<int32_t>(T * hp_.idx_top_k);
    n_sel = ar.alloc<int32_t>(T);
    select_rows(il, ctx, p, sel, n_sel);
  }
  float* o = ar.alloc<float>(T * H * D);
  {
    ProfScope ps(ctx.prof, Stage::kAttention);
    attend(il, ctx, p, sel, n_sel, o);
  }
  float* a = ar.alloc<float>(T * E);
  output_lora(il, ctx, o, a);
  ctx.emit("attn_out", il, a, T, E);
  dsv4::hc_post(ctx, hp_, x, a, hc.post, hc.comb, T, out);
}

void Deepseek4Model::ffn(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
  const dsv4::HcEntry hc = dsv4::hc_enter(ctx, hp_, lw.hc_ffn_fn, lw.hc_ffn_base, lw.hc_ffn_scale, lw.ffn_norm, x, T);
  float* f = ctx.arena.alloc<float>(T * E);
  dsv4::moe_ffn(ctx, hp_, lw, il, hc.y, f);
  ctx.emit("ffn_out", il, f, T, E);
  dsv4::hc_post(ctx, hp_, x, f, hc.post, hc.comb, T, out);
}

void Deepseek4Model::forward(ForwardCtx& ctx, float* logits) const {
  const Batch& b = ctx.batch;
  const int64_t E = hp_.n_embd, T = b.n_tok, W = hp_.n_hc * E;
  const Weights& w = *w_;
  const size_t m0 = ctx.arena.mark();
  float* X = ctx.arena.alloc<float>(T * W);  // the hc streams
  float* X2 = ctx.arena.alloc<float>(T * W);
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {  // every stream starts as the token embedding
      const uint8_t* row = w.tok_embd.data + static_cast<size_t>(b.tokens[t]) * w.tok_embd.row_stride;
      dequantize_row(w.tok_embd.type, row, X + t * W, E);
      for (int s = 1; s < hp_.n_hc; ++s)
        std::memcpy(X + t * W + s * E, X + t * W, static_cast<size_t>(E) * sizeof(float));
    }
  });
  const size_t m1 = ctx.arena.mark();
  for (int il = 0; il < hp_.n_layer; ++il) {
    ctx.emit("in", il, X, T, W);
    {
      ProfScope ps(ctx.prof, Stage::kAttention);
      attention(il, ctx, X, X2);
    }
    ctx.arena.reset(m1);
    ctx.emit("mid", il, X2, T, W);
    {
      ProfScope ps(ctx.prof, Stage::kFfnExperts);
      ffn(il, ctx, X2, X);
    }
    ctx.arena.reset(m1);
    ctx.emit("out", il, X, T, W);
  }

  ProfScope ps(ctx.prof, Stage::kOutputHead);
  float* y = ctx.arena.alloc<float>(b.n_out * E);
  dsv4::hc_head(ctx, hp_, w, X, b.out_rows, b.n_out, y);
  ctx.rms_norm_rows(y, E, w.output_norm, hp_.norm_eps, b.n_out, E, y, E);
  ActRows a(ctx, y, b.n_out, E, E);
  matmul(ctx, w.output, a, logits, hp_.n_vocab);
  ctx.arena.reset(m0);
}

}  // namespace

std::unique_ptr<Model> make_deepseek4_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<Deepseek4Model>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
