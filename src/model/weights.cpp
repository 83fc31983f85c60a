// Weight views and load-time conversions (../shared/SPEC.md "Architectures").
// Shapes are written in ggml order, ne[0] first: a matrix [n_in, n_out] has n_out rows of
// n_in elements. 3-D expert tensors are [n_in, n_out, n_expert].
#include "model/weights.h"

#include <cstring>
#include <initializer_list>
#include <string>

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

 private:
  const GgufFile& f_;
  Weights* w_;
};

std::string blk(int il, const char* name) { return "blk." + std::to_string(il) + "." + name; }

Status load_dense_attention(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd, hk = hp.n_embd_head_k, hv = hp.n_embd_head_v;
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_q.weight"), E, hp.n_head * hk, true, &lw->wq));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_k.weight"), E, hp.n_head_kv * hk, true, &lw->wk));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_v.weight"), E, hp.n_head_kv * hv, true, &lw->wv));
  DS_RETURN_IF_ERROR(L.mat(blk(il, "attn_output.weight"), hp.n_head * hv, E, true, &lw->wo));
  const bool biases = hp.arch == Arch::kQwen2;
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_q.bias"), hp.n_head * hk, biases, &lw->bq));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_k.bias"), hp.n_head_kv * hk, biases, &lw->bk));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_v.bias"), hp.n_head_kv * hv, biases, &lw->bv));
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
  const int64_t E = hp.n_embd, HI = hp.idx_n_head, DI = hp.idx_head_dim;
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

Status load_layer(Loader& L, const HParams& hp, int il, LayerWeights* lw) {
  const int64_t E = hp.n_embd;
  DS_RETURN_IF_ERROR(L.vec(blk(il, "attn_norm.weight"), E, true, &lw->attn_norm));
  DS_RETURN_IF_ERROR(L.vec(blk(il, "ffn_norm.weight"), E, true, &lw->ffn_norm));
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
  // Trunk blocks only: the MTP blocks a deepseek32 file stores after them (hp.n_nextn) are
  // for speculative decoding and are skipped here, as the reference skips them.
  w->layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    DS_RETURN_IF_ERROR(load_layer(L, hp, il, &w->layers[static_cast<size_t>(il)]));
  }
  return w;
}

}  // namespace ds
