// Weight views and load-time conversions (../shared/SPEC.md "Architectures").
// Shapes are written in ggml order, ne[0] first: a matrix [n_in, n_out] has n_out rows of
// n_in elements. 3-D expert tensors are [n_in, n_out, n_expert].
#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/kernels.h"

namespace ds {

namespace {

std::string shape_str(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  for (int64_t d : shape) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

class Loader {
 public:
  Loader(const GgufFile& f, Weights* w) : f_(f), w_(w) {}

  // The tensor `name` with exactly this shape; nullptr (and ok) when optional and absent.
  Status find(const std::string& name, std::initializer_list<int64_t> shape, bool required,
              const GgufTensorInfo** out) {
    *out = f_.tensor(name);
    if (!*out) {
      return required ? Status::error("missing tensor " + name + " (expected shape " + shape_str(shape) + ") in " +
                                      f_.path())
                      : Status::ok();
    }
    const GgufTensorInfo& t = **out;
    int64_t want[4] = {1, 1, 1, 1};
    int i = 0;
    for (int64_t d : shape) want[i++] = d;
    for (int k = 0; k < 4; ++k) {
      if (t.ne[k] != want[k]) {
        return Status::error("tensor " + name + " has shape " + t.shape_string() + ", expected " + shape_str(shape) +
                             " in " + f_.path());
      }
    }
    const auto tr = ggml_type_traits(t.type);
    if (t.ne[0] % tr.block_size != 0 || t.data == nullptr) {
      return Status::error("tensor " + name + " of type " + std::string(tr.name ? tr.name : "?") +
                           " has an unusable row length " + std::to_string(t.ne[0]));
    }
    return Status::ok();
  }

  Status mat(const std::string& name, int64_t n_in, int64_t n_out, bool required, Mat* out) {
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(find(name, {n_in, n_out}, required, &t));
    if (t) *out = view(*t, n_in, n_out);
    return Status::ok();
  }

  Status vec(const std::string& name, int64_t n, bool required, Vec* out) {
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(find(name, {n}, required, &t));
    if (t) *out = to_f32(*t, n);
    return Status::ok();
  }

  Status experts(const std::string& name, int64_t n_in, int64_t n_out, int n_expert, ExpertMats* out) {
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(find(name, {n_in, n_out, n_expert}, true, &t));
    out->first = view(*t, n_in, n_out);
    out->expert_stride = static_cast<size_t>(n_out) * out->first.row_stride;
    return Status::ok();
  }

  // Merged ffn_gate_up_exps [E, 2*Fe, X]: rows [0, Fe) of each expert are gate, [Fe, 2Fe) up.
  Status merged_gate_up(const std::string& name, int64_t n_in, int64_t n_ff, int n_expert, ExpertMats* gate,
                        ExpertMats* up) {
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(find(name, {n_in, 2 * n_ff, n_expert}, true, &t));
    gate->first = view(*t, n_in, n_ff);
    gate->expert_stride = static_cast<size_t>(2 * n_ff) * gate->first.row_stride;
    *up = *gate;
    up->first.data += static_cast<size_t>(n_ff) * gate->first.row_stride;
    return Status::ok();
  }

  Mat view(const GgufTensorInfo& t, int64_t n_in, int64_t n_out) const {
    return Mat{.type = t.type, .data = t.data, .n_in = n_in, .n_out = n_out, .row_stride = t.row_bytes()};
  }

  Vec to_f32(const GgufTensorInfo& t, int64_t n) {
    std::vector<float>& buf = w_->owned.emplace_back(static_cast<size_t>(n));
    if (t.type == GgmlType::F32) {
      std::memcpy(buf.data(), t.data, static_cast<size_t>(n) * sizeof(float));
    } else {
      dequantize_row(t.type, t.data, buf.data(), n);
    }
    return Vec{buf.data(), n};
  }

  std::vector<float>& own(size_t n) { return w_->owned.emplace_back(n); }
  const GgufFile& file() const { return f_; }

  // A small 2-D tensor [n_in, n_rows] converted to f32 rows (deepseek4 APE tables).
  Status rows_f32(const std::string& name, int64_t n_in, int64_t n_rows, Vec* out) {
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(find(name, {n_in, n_rows}, true, &t));
    std::vector<float>& buf = own(static_cast<size_t>(n_in * n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      dequantize_row(t->type, t->data + static_cast<size_t>(r) * t->row_bytes(), buf.data() + r * n_in, n_in);
    }
    *out = Vec{buf.data(), n_in * n_rows};
    return Status::ok();
  }

 private:
  const GgufFile& f_;
  Weights* w_;
};

std::string blk(int il, const char* name) {
  return "blk." + std::to_string(il) + "." + name;
}

// A fused attn_qkv [E, q + k + v rows] (and its bias) as three row views, the same matrices
// a file with separate attn_q/attn_k/attn_v holds.
Status load_fused_qkv(Loader& L, const GgufTensorInfo& qkv, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, nq = hp.n_head * hp.n_embd_head_k, nk = hp.n_head_kv * hp.n_embd_head_k;
  const int64_t nv = hp.n_head_kv * hp.n_embd_head_v;
  lw->wq = L.view(qkv, E, nq);
  lw->wk = L.view(qkv, E, nk);
  lw->wk.data += static_cast<size_t>(nq) * lw->wk.row_stride;
  lw->wv = L.view(qkv, E, nv);
  lw->wv.data += static_cast<size_t>(nq + nk) * lw->wv.row_stride;
  Vec b;
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_qkv.bias"), nq + nk + nv, hp.arch == Arch::kQwen2, &b));
  if (b) {
    lw->bq = Vec{b.data, nq};
    lw->bk = Vec{b.data + nq, nk};
    lw->bv = Vec{b.data + nq + nk, nv};
  }
  return Status::ok();
}

Status load_dense_attention(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, hk = hp.n_embd_head_k, hv = hp.n_embd_head_v;
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_output.weight"), hp.n_head * hv, E, true, &lw->wo));
  const GgufTensorInfo* qkv = nullptr;
  DS_RETURN_IF_ERROR(
      L.find(blk(il, "attn_qkv.weight"), {E, (hp.n_head + hp.n_head_kv) * hk + hp.n_head_kv * hv}, false, &qkv));
  if (qkv) {
    DS_RETURN_IF_ERROR(load_fused_qkv(L, *qkv, hp, il, lw));
  } else {
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q.weight"), E, hp.n_head * hk, true, &lw->wq));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_k.weight"), E, hp.n_head_kv * hk, true, &lw->wk));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_v.weight"), E, hp.n_head_kv * hv, true, &lw->wv));
    const bool biases = hp.arch == Arch::kQwen2;
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_q.bias"), hp.n_head * hk, biases, &lw->bq));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_k.bias"), hp.n_head_kv * hk, biases, &lw->bk));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_v.bias"), hp.n_head_kv * hv, biases, &lw->bv));
  }
  if (hp.arch == Arch::kQwen3) {
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_q_norm.weight"), hk, true, &lw->q_norm));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_k_norm.weight"), hk, true, &lw->k_norm));
  }
  return Status::ok();
}

// Legacy attn_kv_b [kv_lora, H*(nope+v)]: per head, rows [0, nope) are k_nope and rows
// [nope, nope+v) are v (SPEC.md "Legacy layout"). v_b is a view of the v rows; k_b is the
// transpose of the k_nope rows (so q_abs = k_b q_nope), kept in f32 to add no rounding.
Status convert_kv_b(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t H = hp.n_head, nope = hp.n_nope, nv = hp.n_v, kvl = hp.kv_lora;
  Mat kvb;
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_kv_b.weight"), kvl, H * (nope + nv), true, &kvb));
  std::vector<float> row(static_cast<size_t>(kvl));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<float>& kb = L.own(static_cast<size_t>(kvl * nope));  // [kv_lora][nope]
    for (int64_t i = 0; i < nope; ++i) {
      const uint8_t* src = kvb.data + static_cast<size_t>(h * (nope + nv) + i) * kvb.row_stride;
      if (kvb.type == GgmlType::F32) {
        std::memcpy(row.data(), src, row.size() * sizeof(float));
      } else {
        dequantize_row(kvb.type, src, row.data(), kvl);
      }
      for (int64_t j = 0; j < kvl; ++j) kb[static_cast<size_t>(j * nope + i)] = row[static_cast<size_t>(j)];
    }
    lw->k_b.push_back(Mat{.type = GgmlType::F32,
                          .data = reinterpret_cast<const uint8_t*>(kb.data()),
                          .n_in = nope,
                          .n_out = kvl,
                          .row_stride = static_cast<size_t>(nope) * sizeof(float)});
    Mat vb = kvb;
    vb.n_out = nv;
    vb.data += static_cast<size_t>(h * (nope + nv) + nope) * kvb.row_stride;
    lw->v_b.push_back(vb);
  }
  return Status::ok();
}

Status load_mla_attention(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, H = hp.n_head, nope = hp.n_nope, rope = hp.n_rot, kvl = hp.kv_lora;
  const int64_t q_width = H * (nope + rope);
  if (hp.q_lora > 0) {
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q_a.weight"), E, hp.q_lora, true, &lw->wq_a));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_q_a_norm.weight"), hp.q_lora, true, &lw->q_a_norm));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q_b.weight"), hp.q_lora, q_width, true, &lw->wq_b));
  } else {
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q.weight"), E, q_width, true, &lw->wq_b));
  }
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_kv_a_mqa.weight"), E, kvl + rope, true, &lw->wkv_a));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_kv_a_norm.weight"), kvl, true, &lw->kv_a_norm));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_output.weight"), H * hp.n_v, E, true, &lw->wo));
  if (hp.mla_legacy) return convert_kv_b(L, hp, il, lw);

  const GgufTensorInfo* kb = nullptr;
  const GgufTensorInfo* vb = nullptr;
  DS_RETURN_IF_ERROR(L.find(blk(il, "attn_k_b.weight"), {nope, kvl, H}, true, &kb));
  DS_RETURN_IF_ERROR(L.find(blk(il, "attn_v_b.weight"), {kvl, hp.n_v, H}, true, &vb));
  for (int64_t h = 0; h < H; ++h) {
    Mat k = L.view(*kb, nope, kvl);
    k.data += static_cast<size_t>(h * kvl) * k.row_stride;
    lw->k_b.push_back(k);
    Mat v = L.view(*vb, kvl, hp.n_v);
    v.data += static_cast<size_t>(h * hp.n_v) * v.row_stride;
    lw->v_b.push_back(v);
  }
  return Status::ok();
}

// The deepseek32 lightning indexer of block il (SPEC-deepseek32-deepseek4.md 2.2).
Status load_indexer(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, HI = hp.n_idx_head, DI = hp.n_idx_dim;
  DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer.attn_q_b.weight"), hp.q_lora, HI * DI, true, &lw->idx_wq_b));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer.attn_k.weight"), E, DI, true, &lw->idx_wk));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "indexer.k_norm.weight"), DI, true, &lw->idx_k_norm));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "indexer.k_norm.bias"), DI, true, &lw->idx_k_norm_b));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer.proj.weight"), E, HI, true, &lw->idx_proj));
  return Status::ok();
}

Status load_moe(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, Fe = hp.n_ff_exp;
  const int X = hp.n_expert;
  DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_gate_inp.weight"), E, X, true, &lw->router));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "exp_probs_b.bias"), X, false, &lw->exp_probs_b));
  const GgufTensorInfo* merged = nullptr;
  DS_RETURN_IF_ERROR(L.find(blk(il, "ffn_gate_up_exps.weight"), {E, 2 * Fe, X}, false, &merged));
  if (merged) {
    DS_RETURN_IF_ERROR(L.merged_gate_up(blk(il, "ffn_gate_up_exps.weight"), E, Fe, X, &lw->gate_exps, &lw->up_exps));
  } else {
    DS_RETURN_IF_ERROR(L.experts(blk(il, "ffn_gate_exps.weight"), E, Fe, X, &lw->gate_exps));
    DS_RETURN_IF_ERROR(L.experts(blk(il, "ffn_up_exps.weight"), E, Fe, X, &lw->up_exps));
  }
  DS_RETURN_IF_ERROR(L.experts(blk(il, "ffn_down_exps.weight"), Fe, E, X, &lw->down_exps));
  if (hp.n_expert_shared > 0) {
    const int64_t Fs = Fe * hp.n_expert_shared;
    DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_gate_shexp.weight"), E, Fs, true, &lw->gate_shexp));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_up_shexp.weight"), E, Fs, true, &lw->up_shexp));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_down_shexp.weight"), Fs, E, true, &lw->down_shexp));
  }
  return Status::ok();
}

// deepseek4 block il (SPEC-deepseek32-deepseek4.md 3.2). The experts and the router use
// load_moe; the hash blocks read ffn_gate_tid2eid (I32) instead of exp_probs_b.
Status load_deepseek4_layer(Loader& L, const GgufFile& f, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, H = hp.n_head, D = hp.n_embd_head_k, G = hp.n_out_group, O = hp.out_lora;
  const int64_t nhc = hp.n_hc, nmix = (2 + nhc) * nhc, DI = hp.n_idx_dim;
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_sinks.weight"), H, true, &lw->attn_sinks));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q_a.weight"), E, hp.q_lora, true, &lw->wq_a));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_q_a_norm.weight"), hp.q_lora, true, &lw->q_a_norm));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q_b.weight"), hp.q_lora, H * D, true, &lw->wq_b));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_kv.weight"), E, D, true, &lw->wkv));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_kv_a_norm.weight"), D, true, &lw->kv_a_norm));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_output_a.weight"), H * D / G, O * G, true, &lw->wo_a));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_output_b.weight"), G * O, E, true, &lw->wo_b));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "hc_attn_fn.weight"), nhc * E, nmix, true, &lw->hc_attn_fn));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "hc_attn_base.weight"), nmix, true, &lw->hc_attn_base));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "hc_attn_scale.weight"), 3, true, &lw->hc_attn_scale));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "hc_ffn_fn.weight"), nhc * E, nmix, true, &lw->hc_ffn_fn));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "hc_ffn_base.weight"), nmix, true, &lw->hc_ffn_base));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "hc_ffn_scale.weight"), 3, true, &lw->hc_ffn_scale));
  const int ratio = hp.compress_ratio[static_cast<size_t>(il)];
  if (ratio != 0) {
    const int64_t c = ratio == 4 ? 2 : 1;
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_compressor_kv.weight"), E, c * D, true, &lw->comp_kv));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_compressor_gate.weight"), E, c * D, true, &lw->comp_gate));
    DS_RETURN_IF_ERROR(L.rows_f32(blk(il, "attn_compressor_ape.weight"), c * D, ratio, &lw->comp_ape));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_compressor_norm.weight"), D, true, &lw->comp_norm));
  }
  if (ratio == 4) {
    DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer.attn_q_b.weight"), hp.q_lora, hp.n_idx_head * DI, true, &lw->idx_q_b));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer.proj.weight"), E, hp.n_idx_head, true, &lw->idx_proj));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer_compressor_kv.weight"), E, 2 * DI, true, &lw->idx_comp_kv));
    DS_RETURN_IF_ERROR(L.mat(blk(il, "indexer_compressor_gate.weight"), E, 2 * DI, true, &lw->idx_comp_gate));
    DS_RETURN_IF_ERROR(L.rows_f32(blk(il, "indexer_compressor_ape.weight"), 2 * DI, 4, &lw->idx_comp_ape));
    DS_RETURN_IF_ERROR(L.vec(blk(il, "indexer_compressor_norm.weight"), DI, true, &lw->idx_comp_norm));
  }
  DS_RETURN_IF_ERROR(load_moe(L, hp, il, lw));
  if (il < hp.n_hash_layer) {
    const std::string name = blk(il, "ffn_gate_tid2eid.weight");
    const GgufTensorInfo* t = nullptr;
    DS_RETURN_IF_ERROR(L.find(name, {hp.n_expert_used, hp.n_vocab}, true, &t));
    if (t->type != GgmlType::I32) return Status::error("tensor " + name + " must be I32 in " + f.path());
    const auto* ids = reinterpret_cast<const int32_t*>(t->data);
    for (int64_t i = 0; i < hp.n_expert_used * hp.n_vocab; ++i) {
      if (ids[i] < 0 || ids[i] >= hp.n_expert) {
        return Status::error("tensor " + name + " holds expert id " + std::to_string(ids[i]) + " outside [0, " +
                             std::to_string(hp.n_expert) + ") in " + f.path());
      }
    }
    lw->tid2eid = ids;
  } else if (!lw->exp_probs_b) {
    return Status::error("missing tensor " + blk(il, "exp_probs_b.bias") + " in " + f.path());
  }
  return Status::ok();
}

Status load_layer(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd;
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_norm.weight"), E, true, &lw->attn_norm));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "ffn_norm.weight"), E, true, &lw->ffn_norm));
  if (hp.arch == Arch::kDeepseek4) return load_deepseek4_layer(L, L.file(), hp, il, lw);
  if (hp.is_mla()) {
    DS_RETURN_IF_ERROR(load_mla_attention(L, hp, il, lw));
    if (hp.arch == Arch::kDeepseek32) DS_RETURN_IF_ERROR(load_indexer(L, hp, il, lw));
  } else {
    DS_RETURN_IF_ERROR(load_dense_attention(L, hp, il, lw));
  }
  if (hp.is_moe_layer(il)) return load_moe(L, hp, il, lw);
  DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_gate.weight"), E, hp.n_ff, true, &lw->ffn_gate));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_up.weight"), E, hp.n_ff, true, &lw->ffn_up));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "ffn_down.weight"), hp.n_ff, E, true, &lw->ffn_down));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Weights>> load_weights(const GgufFile& f, const HParams& hp) {
  auto w = std::make_unique<Weights>();
  Loader L(f, w.get());
  DS_RETURN_IF_ERROR(L.mat("token_embd.weight", hp.n_embd, hp.n_vocab, true, &w->tok_embd));
  DS_RETURN_IF_ERROR(L.vec("output_norm.weight", hp.n_embd, true, &w->output_norm));
  DS_RETURN_IF_ERROR(L.mat("output.weight", hp.n_embd, hp.n_vocab, false, &w->output));
  if (!w->output) w->output = w->tok_embd;  // tied output head
  if (hp.arch == Arch::kLlama) {
    DS_RETURN_IF_ERROR(L.vec("rope_freqs.weight", hp.n_rot / 2, false, &w->rope_freqs));
  }
  if (hp.arch == Arch::kDeepseek4) {
    if (!f.tensor("output.weight")) return Status::error("missing tensor output.weight in " + f.path());
    DS_RETURN_IF_ERROR(L.mat("output_hc_fn.weight", hp.n_hc * hp.n_embd, hp.n_hc, true, &w->output_hc_fn));
    DS_RETURN_IF_ERROR(L.vec("output_hc_base.weight", hp.n_hc, true, &w->output_hc_base));
    DS_RETURN_IF_ERROR(L.vec("output_hc_scale.weight", 1, true, &w->output_hc_scale));
  }
  // Trunk blocks only: the MTP blocks a deepseek32 file stores after them (hp.n_nextn) are
  // for speculative decoding and are skipped here, as the reference skips them.
  w->layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    DS_RETURN_IF_ERROR(load_layer(L, hp, il, &w->layers[static_cast<size_t>(il)]));
  }
  return w;
}

Status lock_weights(const GgufFile& file, const Weights& w) {
  std::map<int, std::pair<const uint8_t*, const uint8_t*>> shards;  // tensor data range per shard
  for (const GgufTensorInfo& t : file.tensors()) {
    auto [it, fresh] = shards.try_emplace(t.shard, t.data, t.data + t.nbytes);
    if (!fresh) {
      it->second.first = std::min(it->second.first, t.data);
      it->second.second = std::max(it->second.second, t.data + t.nbytes);
    }
  }
  std::vector<std::pair<const uint8_t*, size_t>> released = w.released;
  std::sort(released.begin(), released.end());
  std::vector<std::pair<const void*, size_t>> ranges;
  for (const auto& [shard, r] : shards) {
    const uint8_t* lo = r.first;
    for (const auto& [p, n] : released) {
      if (p + n <= lo || p >= r.second) continue;
      if (p > lo) ranges.emplace_back(lo, static_cast<size_t>(p - lo));
      lo = std::max(lo, p + n);
    }
    if (r.second > lo) ranges.emplace_back(lo, static_cast<size_t>(r.second - lo));
  }
  for (const NumaBuffer& b : w.packed) ranges.emplace_back(b.data(), b.size());
  size_t total = 0;
  for (const auto& [p, n] : ranges) total += n;
  for (const auto& [p, n] : ranges) {
    if (Status s = lock_memory(p, n); !s) {
      return Status::error("cannot lock the model weights (" + std::to_string(total) +
                           " bytes in all): " + s.message());
    }
  }
  return Status::ok();
}

}  // namespace ds
