// deepseek32 block (DeepSeek-V3.2, ../shared/SPEC-deepseek32-deepseek4.md 2.3): deepseek2's
// absorbed MLA and MoE (deepseek2.h), with DeepSeek Sparse Attention:
//   a      = rms_norm(x) * attn_norm;  qr = rms_norm(q_a a) * q_a_norm      (as deepseek2)
//   iq     = indexer.attn_q_b qr       H_I heads of D_I, NEOX RoPE on the first rope dims
//   ik     = LayerNorm(indexer.attn_k a) * k_norm + k_norm_b  (eps 1e-6), NEOX RoPE likewise
//   w      = indexer.proj a / sqrt(D_I H_I)
//   cache[pos] = [c | k_pe | ik]
//   S_t    = top-k over j <= t of sum_h relu(iq_{t,h} . ik_j) w_{t,h}    (lightning_indexer.h)
//   o_h    = softmax over j in S_t of (q_abs_h . c_j + q_pe_h . k_pe_j) * kq_scale, . c_j
//   attn   = attn_output(concat_h v_b_h o_h);  ffn as deepseek2
// Sparse attention is a method, not a mask: the MLA kernel is handed a view whose "blocks"
// are the selected rows themselves (block_size 1, one pointer per row), so it reads exactly
// those k rows and a decode step's attention costs O(k) whatever the context; queries that
// see at most k rows (every query of a short context) take the dense path, which is the
// same function (SPEC 1.2: every visible row is selected).
// The indexer keys are f32 (bf16 in a bf16 cache) and not Hadamard-rotated (SPEC 1.3): both sides would be
// rotated by the same orthonormal matrix, which leaves every q . k unchanged up to 1e-7
// relative rounding; the rotation exists to make a quantized key cache accurate, and an
// f32 key needs none. The MTP block after the trunk is not loaded (weights.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "model/deepseek2.h"
#include "model/lightning_indexer.h"

namespace ds {

namespace {

// LayerNorm of the indexer keys (SPEC 2.3, care point 2): mean and variance summed in
// double as the reference does, then weight and bias.
constexpr float kIndexerNormEps = 1e-6f;

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    y[i] = v;
    sum2 += static_cast<double>(v * v);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(n)) + kIndexerNormEps);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale * w[i] + b[i];
}

class Deepseek32Model : public Deepseek2Model {
 public:
  using Deepseek2Model::Deepseek2Model;

  // [KV_LAYOUT] for deepseek32: [c | k_pe] in the cache type, padded to 16 bytes, then the
  // indexer key (D_I f32, or bf16 in a bf16 cache). Sizing, admission and prefix sharing count whole rows, so
  // they account for the indexer keys with nothing else to change.
  size_t kv_row_bytes(GgmlType t) const override {
    return idx_key_offset(t) + ggml_row_size(idx_key_type(t), hp_.n_idx_dim);
  }

  size_t scratch_bytes(int64_t T) const override {
    const size_t t = static_cast<size_t>(T), k = static_cast<size_t>(hp_.idx_top_k);
    const size_t HI = static_cast<size_t>(hp_.n_idx_head), DI = static_cast<size_t>(hp_.n_idx_dim);
    const size_t ql = static_cast<size_t>(hp_.q_lora);
    // ik, w, iq and the quantized qr; the selection (indices, row pointers) and per-row ints.
    const size_t indexer = t * (4 * (DI + HI + HI * DI + ql) + k * (sizeof(int32_t) + sizeof(uint8_t*)) + 16) +
                           LightningIndexer::scratch_bytes(T, hp_.n_idx_head, hp_.n_idx_dim, hp_.idx_top_k) + 32 * 64;
    return Deepseek2Model::scratch_bytes(T) + indexer;
  }

  // A decode step reads every indexer key (scores) and at most top_k latent rows.
  double decode_kv_bytes(int64_t n_ctx, GgmlType t) const override {
    const double keys = static_cast<double>(n_ctx) * static_cast<double>(ggml_row_size(idx_key_type(t), hp_.n_idx_dim));
    const double rows =
        static_cast<double>(std::min<int64_t>(n_ctx, hp_.idx_top_k)) * static_cast<double>(latent_row_bytes(t));
    return static_cast<double>(hp_.n_layer) * (keys + rows);
  }

  void attention(int il, ForwardCtx& ctx, const float* x, float* out) const override;

 private:
  size_t idx_key_offset(GgmlType t) const { return (latent_row_bytes(t) + 15) & ~size_t{15}; }
  // The indexer key's type: bf16 in a bf16 cache (the precision the user chose for the cache;
  // half the bytes, and bf16 dot products where the CPU has them: the indexer dominates
  // long-context decode), f32 with every other cache type (f16 keys would be converted on
  // every load and score no faster).
  static GgmlType idx_key_type(GgmlType t) { return t == GgmlType::BF16 ? GgmlType::BF16 : GgmlType::F32; }
  // The lightning indexer of block il: writes the batch's keys into the cache and selects.
  void index(int il, ForwardCtx& ctx, ActRows& a, const float* qr, int32_t* sel, int32_t* n_sel) const;
  // o [T][H][kv_lora]: each query attends to its selected latent rows only.
  void sparse_mla(int il, ForwardCtx& ctx, const float* qcat, const int32_t* sel, const int32_t* n_sel, float* o) const;
  // Traces "topk" [T][k] (selected positions, -1 past n_sel) and "topk_gap" [T]: the gap
  // between the k-th and k+1-th score over the score spread (1 for rows that select all).
  void trace_selection(int il, ForwardCtx& ctx, const IndexerArgs& ia, const int32_t* sel, const int32_t* n_sel) const;
};

void Deepseek32Model::index(int il, ForwardCtx& ctx, ActRows& a, const float* qr, int32_t* sel, int32_t* n_sel) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const Batch& b = ctx.batch;
  const int64_t T = b.n_tok, HI = hp_.n_idx_head, DI = hp_.n_idx_dim, ql = hp_.q_lora;
  Arena& ar = ctx.arena;

  float* ik = ar.alloc<float>(T * DI);
  float* w = ar.alloc<float>(T * HI);
  float* iq = ar.alloc<float>(T * HI * DI);
  matmul_many(ctx, a, {{&lw.idx_wk, ik, DI}, {&lw.idx_proj, w, HI}});
  ActRows aq(ctx, qr, T, ql, ql);
  matmul(ctx, lw.idx_wq_b, aq, iq, HI * DI);

  RopeParams rp = hp_.rope_params(nullptr);
  rp.neox = true;  // care point 1: NEOX pairs on the first rope dims of each indexer head
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(DI * HI));
  {
    ProfScope ps(ctx.prof, Stage::kNormsRope);
    ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        layer_norm(ik + t * DI, lw.idx_k_norm.data, lw.idx_k_norm_b.data, ik + t * DI, DI);
        for (int64_t h = 0; h < HI; ++h) w[t * HI + h] *= w_scale;
      }
    });
  }
  ctx.rope_rows(iq, static_cast<int>(HI), DI, HI * DI, rp);
  ctx.rope_rows(ik, 1, DI, DI, rp);

  const size_t key_off = idx_key_offset(ctx.kv.type);
  int32_t* n_keys = ar.alloc<int32_t>(T);
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      ctx.kt.store_kv(idx_key_type(ctx.kv.type), ik + t * DI, ctx.kv_row(il, t) + key_off, DI);
      n_keys[t] = b.pos[t] + 1;  // causal: keys 0..pos
    }
  });

  const IndexerArgs ia{.n_head = static_cast<int>(HI),
                       .dim = DI,
                       .top_k = hp_.idx_top_k,
                       .q = iq,
                       .w = w,
                       .n_keys = n_keys,
                       .keys = IndexerKeyLayout{.type = idx_key_type(ctx.kv.type),
                                                .keys_per_block = ctx.kv.block_size,
                                                .key_stride = ctx.kv.row_bytes_of(il),
                                                .offset = ctx.kv.offset(il, 0) + key_off}};
  {
    ProfScope ps(ctx.prof, Stage::kAttention);
    LightningIndexer::select(ctx, ia, sel, n_sel);
  }
  if (ctx.trace) trace_selection(il, ctx, ia, sel, n_sel);
}

void Deepseek32Model::trace_selection(int il, ForwardCtx& ctx, const IndexerArgs& ia, const int32_t* sel,
                                      const int32_t* n_sel) const {
  const int64_t T = ctx.batch.n_tok;
  const int k = hp_.idx_top_k;
  std::vector<int32_t> ids(static_cast<size_t>(T * k), -1);
  std::vector<float> gap(static_cast<size_t>(T), 1.0f);
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(sel + t * k, n_sel[t], ids.begin() + t * k);
    const int32_t nk = ia.n_keys[t];
    if (nk <= k) continue;
    std::vector<float> s(static_cast<size_t>(nk));
    LightningIndexer::scores(ctx, ia, t, s.data());
    const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
    const float spread = *hi - *lo;
    std::nth_element(s.begin(), s.begin() + k, s.end(), std::greater<float>());
    const float kth = *std::min_element(s.begin(), s.begin() + k);  // k-th largest
    gap[static_cast<size_t>(t)] = spread > 0.0f ? (kth - s[static_cast<size_t>(k)]) / spread : 0.0f;
  }
  ctx.emit("topk", il, ids.data(), T, k);
  ctx.emit("topk_gap", il, gap.data(), T, 1);
}

void Deepseek32Model::sparse_mla(int il, ForwardCtx& ctx, const float* qcat, const int32_t* sel, const int32_t* n_sel,
                                 float* o) const {
  const Batch& b = ctx.batch;
  const int64_t T = b.n_tok;
  const int H = hp_.n_head, k = hp_.idx_top_k, bs = ctx.kv.block_size;
  // Sparse rows get a view of their selected rows: rows[t][i] is row i's address, and
  // q_pos n_sel - 1 makes the kernel attend to all of them.
  const uint8_t** rows = ctx.arena.alloc<const uint8_t*>(T * k);
  int32_t* last = ctx.arena.alloc<int32_t>(T);
  auto dense = [&](int64_t t) { return n_sel[t] == b.pos[t] + 1; };
  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (dense(t)) continue;
      const SeqSlice& sq = ctx.seq_of(t);
      for (int32_t i = 0; i < n_sel[t]; ++i) {
        const int32_t j = sel[t * k + i];
        rows[t * k + i] = sq.kv_blocks[j / bs] + ctx.kv.offset(il, j % bs);
      }
      last[t] = n_sel[t] - 1;
    }
  });
  const size_t layer_off = ctx.kv.offset(il, 0);
  ProfScope ps(ctx.prof, Stage::kAttention);
  ctx.for_each_attention_item(H, [&](int seq, int64_t q0, int64_t n, int h0, int h1) {
    const SeqSlice& sq = b.seqs[seq];
    auto run = [&](int64_t t0, int64_t n_q, const KvView& kv, const int32_t* q_pos) {
      mla_call(ctx, qcat, o, t0, n_q, q_pos, kv, h0, h1);
    };
    const KvView paged{.type = ctx.kv.type,
                       .blocks = sq.kv_blocks,
                       .block_size = bs,
                       .row_stride = ctx.kv.row_bytes_of(il),
                       .head_offset = 0,
                       .elem_offset = layer_off};
    for (int64_t i = sq.t0 + q0, end = sq.t0 + q0 + n; i < end;) {
      if (dense(i)) {  // a run of dense queries in one call, over the paged cache
        int64_t e = i + 1;
        while (e < end && dense(e)) ++e;
        run(i, e - i, paged, b.pos + i);
        i = e;
        continue;
      }
      const KvView picked{.type = ctx.kv.type, .blocks = rows + i * k, .block_size = 1, .row_stride = 0};
      run(i, 1, picked, last + i);
      ++i;
    }
  });
}

void Deepseek32Model::attention(int il, ForwardCtx& ctx, const float* x, float* out) const {
  const LayerWeights& lw = w_->layers[static_cast<size_t>(il)];
  const int64_t T = ctx.batch.n_tok, E = hp_.n_embd;
  float* xn = ctx.arena.alloc<float>(T * E);
  ctx.rms_norm_rows(x, E, lw.attn_norm, hp_.norm_eps, T, E, xn, E);
  ActRows a(ctx, xn, T, E, E);
  float* qr = nullptr;
  const float* q = mla_project(il, ctx, a, &qr);
  int32_t* sel = ctx.arena.alloc<int32_t>(T * hp_.idx_top_k);
  int32_t* n_sel = ctx.arena.alloc<int32_t>(T);
  index(il, ctx, a, qr, sel, n_sel);
  const float* qcat = mla_absorb(il, ctx, q);
  float* o = ctx.arena.alloc<float>(T * hp_.n_head * hp_.kv_lora);
  sparse_mla(il, ctx, qcat, sel, n_sel, o);
  mla_output(il, ctx, o, out);
}

}  // namespace

std::unique_ptr<Model> make_deepseek32_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<Deepseek32Model>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
