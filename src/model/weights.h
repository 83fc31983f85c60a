// Typed views of a model's weights. Matrices point straight into the mmapped GGUF file
// (GgufTensorInfo::data); nothing is copied except what must be converted at load:
// 1-D tensors (norms, biases, rope_freqs, exp_probs_b) become f32 vectors, and the legacy
// deepseek2 `attn_kv_b` is split into per-head k_b (transposed, f32) and v_b (a view).
// Every tensor's shape is checked against the hyper-parameters; a wrong one is a load
// error naming the tensor, its shape and the expected shape.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ds/status.h"
#include "kernels/quant/types.h"
#include "model/hparams.h"
#include "runtime/numa.h"

namespace ds {

class GgufFile;
class ThreadPool;

// A 2-D weight: n_out rows of n_in elements, row r at data + r * row_stride. panels: the
// same rows repacked at load into 16-row panels (kernels/quant/repack.h), or null.
struct Mat {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_stride = 0;
  const uint8_t* panels = nullptr;
  explicit operator bool() const { return data != nullptr; }
};

// n_expert matrices of one shape, expert e at first.data + e * expert_stride.
struct ExpertMats {
  Mat first;
  size_t expert_stride = 0;
  Mat at(int e) const {
    Mat m = first;
    m.data += static_cast<size_t>(e) * expert_stride;
    if (m.panels) m.panels += static_cast<size_t>(e) * expert_stride;
    return m;
  }
  explicit operator bool() const { return first.data != nullptr; }
};

// An f32 vector owned by the Weights (converted at load).
struct Vec {
  const float* data = nullptr;
  int64_t n = 0;
  explicit operator bool() const { return data != nullptr; }
};

struct LayerWeights {
  Vec attn_norm;
  Vec ffn_norm;

  // llama / qwen2 / qwen3 / deepseek attention.
  Mat wq, wk, wv, wo;
  Vec bq, bk, bv;      // qwen2 only
  Vec q_norm, k_norm;  // qwen3: per-head RMSNorm weights [head_dim], shared by all heads

  // deepseek2 MLA attention.
  Mat wq_a;  // [E -> q_lora] (q compression) or empty
  Vec q_a_norm;
  Mat wq_b;   // [q_lora -> H*(nope+rope)]; attn_q when no q compression
  Mat wkv_a;  // [E -> kv_lora + rope]
  Vec kv_a_norm;
  std::vector<Mat> k_b;  // per head: [nope -> kv_lora] (q_abs = k_b^T q_nope)
  std::vector<Mat> v_b;  // per head: [kv_lora -> v]

  // deepseek4 (../shared/SPEC-deepseek32-deepseek4.md 3.2); wq_a, q_a_norm, wq_b and
  // kv_a_norm above are shared with MLA.
  Mat wkv;                           // attn_kv [E -> D], the single K=V head
  Vec attn_sinks;                    // [H]
  Mat wo_a;                          // attn_output_a [H*D/G -> O*G]: group g = rows [g*O, (g+1)*O)
  Mat wo_b;                          // attn_output_b [G*O -> E]
  Mat hc_attn_fn, hc_ffn_fn;         // [hc*E -> (2+hc)*hc]
  Vec hc_attn_base, hc_ffn_base;     // [(2+hc)*hc]
  Vec hc_attn_scale, hc_ffn_scale;   // [3]: pre, post, comb
  Mat comp_kv, comp_gate;            // attn_compressor_{kv,gate} [E -> c*D] (ratio != 0)
  Vec comp_ape;                      // [ratio][c*D], f32
  Vec comp_norm;                     // [D]
  Mat idx_q_b;                       // indexer.attn_q_b [q_lora -> H_I*D_I] (ratio 4)
  Mat idx_proj;                      // indexer.proj [E -> H_I]
  Mat idx_comp_kv, idx_comp_gate;    // [E -> 2*D_I]
  Vec idx_comp_ape;                  // [4][2*D_I], f32
  Vec idx_comp_norm;                 // [D_I]
  const int32_t* tid2eid = nullptr;  // ffn_gate_tid2eid [n_vocab][K_used] (hash blocks)

  // deepseek32 lightning indexer (SPEC-deepseek32-deepseek4.md 2.2).
  Mat idx_wq_b;    // indexer.attn_q_b [q_lora -> H_I * D_I]
  Mat idx_wk;      // indexer.attn_k [E -> D_I]
  Vec idx_k_norm;  // indexer.k_norm weight and bias [D_I] (LayerNorm)
  Vec idx_k_norm_b;

  // Dense FFN (llama, qwen2, qwen3, the leading blocks of deepseek, deepseek2 and deepseek32).
  Mat ffn_gate, ffn_up, ffn_down;

  // MoE FFN.
  Mat router;       // ffn_gate_inp [E -> n_expert]
  Vec exp_probs_b;  // selection bias, optional
  ExpertMats gate_exps, up_exps, down_exps;
  Mat gate_shexp, up_shexp, down_shexp;  // optional (n_expert_shared = 0)
};

struct Weights {
  Mat tok_embd;  // [E] rows, one per token
  Vec output_norm;
  Mat output;           // token_embd when tied
  Vec rope_freqs;       // optional, [n_rot/2]
  Mat output_hc_fn;     // deepseek4 hyper-connection head [hc*E -> hc]
  Vec output_hc_base;   // [hc]
  Vec output_hc_scale;  // [1]
  std::vector<LayerWeights> layers;

  // Storage of converted tensors; inner buffers never move.
  std::vector<std::vector<float>> owned;
  // Repacked matrices (repack_weights), one buffer each.
  std::vector<NumaBuffer> packed;
  // Page-aligned ranges of the mapped file that repack_weights released (the packed copies
  // replace them); --mlock leaves them out.
  std::vector<std::pair<const uint8_t*, size_t>> released;
};

Result<std::unique_ptr<Weights>> load_weights(const GgufFile& file, const HParams& hp);

// Packs every matrix whose type has packed kernels (repack_supported; at least 16 rows)
// into 16-row panels (docs/repack.md): a copy per matrix in anonymous memory, written by
// the pool's threads; then the original pages lying wholly inside the packed rows are
// released from the process (madvise MADV_DONTNEED: still mapped and valid, a later read
// faults them back in from the page cache), so resident memory stays about the file size.
// The released ranges are recorded in w.released. n_expert: matrices per expert tensor. Returns the bytes packed.
Result<size_t> repack_weights(Weights& w, int n_expert, ThreadPool& pool, NumaMode mode);

// --mlock: locks what the forward pass reads, once the weights are in their final place:
// each shard's tensor data range minus the pages repacking released (w.released; locking
// them would fault the file's copy back in beside the packed one), plus the packed copies.
// The total is summed first so that a refusal (RLIMIT_MEMLOCK) names the bytes needed.
Status lock_weights(const GgufFile& file, const Weights& w);

}  // namespace ds
