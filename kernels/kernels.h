// The whole kernel API. Raw pointers, sizes and strides; no model types. Every entry has a
// scalar reference in kernels/ref/ (the spec) and optional AVX2 / AVX-512 / AMX versions,
// one file per ISA and op. dispatch.cpp reads CPUID once and fills one KernelTable per
// available ISA; model code calls ds::kern().<op>(...) and never touches an intrinsic.
//
// Numerics follow ../shared/SPEC.md ("How the ecosystem computes quantized dot products"):
// activations are quantized once per row to vec_dot_type(weight type) and the dot product
// runs in integers per sub-block, scaled in float.
//
// Batch invariance [BATCH_INVARIANT]: for every ISA, matmul() computes each output
// element y[t][r] with exactly the same operations in the same order whatever n_tok,
// row_begin and row_end are, so a token's result never depends on what else is batched.
// [KQUANT_EXACT]: for K-quant weights (Q2_K..Q6_K) vec_dot and matmul are bit-identical to
// the reference on every ISA (exact integer sums per superblock, the reference's float
// order), so those results do not depend on the CPU either; [QUANT_EXACT] the same holds
// for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (exact integer sums per 32-block), and
// [IQUANT_ORDER] for the i-quants and MXFP4 (exact integer sums, the float order documented
// in kernels/ref/vec_dot_iq.cpp). F32/F16/BF16 agree with the reference to float rounding.
//
// Builds with -DDS_WITH_ONEDNN=ON also have oneDNN's F32/BF16 matmul (kernels/onednn_gemm.h):
// faster for many tokens but not batch invariant, so it is not in this table and no serving
// path calls it (docs/architecture.md, "oneDNN").
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant/blocks.h"
#include "kernels/quant/types.h"

namespace ds {

enum class Isa { kRef = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };
const char* isa_name(Isa isa);

// The activation block type a weight type's dot product consumes:
// K-quants and the 256-element i-quants -> Q8_K; Q4_0/Q5_0/Q8_0, IQ4_NL, MXFP4 -> Q8_0;
// Q4_1/Q5_1 -> Q8_1; F16 -> F16; BF16 -> BF16; F32 -> F32.
GgmlType vec_dot_type(GgmlType weight);

// y[t * out_stride + r] = dot(W row r, activation row t), r in [row_begin, row_end), t in [0, n_tok).
struct MatmulArgs {
  GgmlType wtype;       // weight type
  const void* w;        // W: [n_out rows][n_in], row r at w + r * w_row_stride
  size_t w_row_stride;  // bytes
  int64_t n_in;         // elements per row (a multiple of the block size)
  int64_t row_begin;    // output rows to compute (the caller splits rows over threads)
  int64_t row_end;
  const void* act;        // activations already in vec_dot_type(wtype): [n_tok][n_in]
  size_t act_row_stride;  // bytes
  int64_t n_tok;
  float* out;          // [n_tok][out_stride]
  int64_t out_stride;  // elements
  // The same weights repacked into 16-row panels (kernels/quant/repack.h), covering rows
  // [0, 16 * floor(n_out / 16)), or null. Kernels that know the layout read it for those
  // rows; every other path reads w, which stays valid.
  const void* w_panels = nullptr;
};

// RoPE [ROPE]. Angles for pair i of n_rot rotated dims at position p:
//   theta_e = p * freq_base^(-2i/n_rot) / freq_factors[i] (when given, Llama-3.1 rope_freqs)
//   linear scaling: theta = theta_e * freq_scale; YaRN (ext_factor > 0): SPEC.md step 4.
// Returned cos/sin are multiplied by attn_factor (1 for DeepSeek files, see SPEC.md).
struct RopeParams {
  int n_rot = 0;      // rotated dims per head (<= head_dim, <= 1024; the rest pass through)
  bool neox = false;  // false: adjacent pairs (x[2i], x[2i+1]); true: halves (x[i], x[i+n_rot/2])
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1/factor for linear and YaRN scaling
  const float* freq_factors = nullptr;  // [n_rot/2] or null
  float ext_factor = 0.0f;              // YaRN mix: 1 with YaRN, 0 without
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;  // YaRN original context length
};

// x: [n_tok] rows of [n_head] heads of head_dim floats; rotates the first n_rot dims of each
// head (for DeepSeek's q_pe/k_pe, point x at the rope part and set head_dim = n_rot).
struct RopeArgs {
  float* x;
  int64_t n_tok;
  int n_head;
  int64_t tok_stride;   // elements between tokens
  int64_t head_stride;  // elements between heads
  const int32_t* pos;   // [n_tok]
};

// A paged KV view: token j of a sequence lives in block blocks[j / block_size] at
// row (j % block_size); each row is row_stride bytes; head h starts at head_offset * h
// bytes into the row. type is F32, F16, BF16 or Q8_0 (Q8_0 rows are head_dim/32 blocks).
struct KvView {
  GgmlType type = GgmlType::F32;
  const uint8_t* const* blocks = nullptr;
  int block_size = 0;
  size_t row_stride = 0;
  size_t head_offset = 0;
  size_t elem_offset = 0;  // bytes from the row start to element 0 of head 0
};

// Flash attention for one sequence (GQA/MHA): online softmax over KV tiles, never the
// full score matrix. Query t (at position q_pos[t]) attends to KV positions [0, q_pos[t]].
struct AttnArgs {
  int n_head;
  int n_head_kv;
  int d_k;
  int d_v;
  float scale;
  int64_t n_q;
  const float* q;  // q[t * q_tok_stride + h * q_head_stride + i]
  int64_t q_tok_stride;
  int64_t q_head_stride;
  const int32_t* q_pos;  // [n_q]
  KvView k;
  KvView v;
  float* out;  // out[t * out_tok_stride + h * out_head_stride + i], d_v wide
  int64_t out_tok_stride;
  int64_t out_head_stride;
  int head_begin;  // heads to compute (thread split)
  int head_end;
  // [n_head] or null: an attention sink per head (DeepSeek-V4), a logit with no value that
  // enters only the denominator: the online softmax starts at m = sink, l = 1.
  const float* sinks = nullptr;
};

// DeepSeek absorbed MLA attention over the latent cache rows [c (kv_lora) | k_pe (n_rope)]:
// score_j = (q_abs . c_j + q_pe . k_pe_j) * scale; out = softmax(score) . c (kv_lora wide).
struct MlaArgs {
  int n_head;
  int kv_lora;
  int n_rope;
  float scale;
  int64_t n_q;
  const float* q_abs;  // q_abs[t * q_tok_stride + h * q_head_stride + i], kv_lora wide
  const float* q_pe;   // q_pe[t * q_tok_stride + h * q_head_stride + i], n_rope wide
  int64_t q_tok_stride;
  int64_t q_head_stride;
  const int32_t* q_pos;
  KvView kv;   // row = [c | k_pe], head_offset unused
  float* out;  // out[t * out_tok_stride + h * out_head_stride + i], kv_lora wide
  int64_t out_tok_stride;
  int64_t out_head_stride;
  int head_begin;
  int head_end;
};

// MoE routing (SPEC.md deepseek2 step 5), per token.
enum class MoeGating { kSoftmax = 1, kSigmoid = 2 };
struct MoeRouteArgs {
  const float* logits;  // [n_tok][n_expert] router outputs
  int64_t n_tok;
  int n_expert;
  int n_expert_used;
  int n_group = 1;  // expert_group_count (1 = no group limit)
  int n_group_used = 1;
  MoeGating gating = MoeGating::kSoftmax;
  const float* bias = nullptr;  // exp_probs_b: added for choosing only
  bool norm = false;            // expert_weights_norm
  float scale = 1.0f;           // expert_weights_scale
  int32_t* ids;                 // [n_tok][n_expert_used], the reference's slot order (descending choice score)
  float* weights;               // [n_tok][n_expert_used]
  float* scratch;               // moe_route_scratch_floats(n_expert) floats of working space
};
// Working space of moe_route: probabilities, choice scores and two values per group (at most
// one group per expert). The caller provides it so that routing allocates nothing.
constexpr int64_t moe_route_scratch_floats(int n_expert) {
  return 4 * static_cast<int64_t>(n_expert);
}

// Lightning-indexer scores (../shared/SPEC-deepseek32-deepseek4.md 1.1) of one query
// against the keys [k0, k1) of a paged view, every key read once for all heads:
//   out[j - k0] = sum_h max(0, q_h . k_j) * w_h
// Keys are F32 or BF16 rows of dim elements at ref::kv_row(keys, j) (head_offset unused),
// shared by all heads (MQA). The query and its per-head weights are packed once per query by
// indexer_pack_query into the layout every ISA reads [INDEXER_QUERY_LAYOUT]: heads innermost,
// so a kernel multiplies one key element into all heads at once and never reduces a dot
// product across lanes. BF16 keys take the query rounded to bf16 (nearest even) and multiply
// with bf16 products (exact in f32), summed in f32 like the F32 keys.
struct IndexerScoreArgs {
  const void* q;  // packed query + weights (indexer_pack_query)
  int n_head;
  int64_t dim;  // elements per key (even for BF16 keys)
  KvView keys;  // type F32 or BF16
  int64_t k0, k1;
  float* out;  // [k1 - k0]
};

// [INDEXER_QUERY_LAYOUT] hp = n_head rounded up to 16; bytes:
//   [0, 4 hp)   w: hp floats, zero past n_head (a padded head scores relu(0) * 0 = 0)
//   then F32 keys:  q[d][hp] floats, q[d * hp + h] = q_h[d]
//        BF16 keys: q[d / 2][hp][2] bf16, element (d, h) at (d / 2 * hp + h) * 2 + d % 2
int indexer_head_pad(int n_head);
size_t indexer_query_bytes(GgmlType key_type, int n_head, int64_t dim);
// q: [n_head][dim] floats; w: [n_head]; out: indexer_query_bytes(key_type, n_head, dim) bytes.
void indexer_pack_query(GgmlType key_type, const float* q, const float* w, int n_head, int64_t dim, void* out);

struct KernelTable {
  Isa isa;

  // Activation quantization of one row of n floats into vec_dot_type blocks (Q8_K, Q8_0,
  // Q8_1, F16, BF16; F32 is a copy). Bit-exact to SPEC.md on every ISA.
  void (*quantize_act)(GgmlType act_type, const float* x, void* y, int64_t n);
  // Dot product of one weight row with one activation row (n elements).
  float (*vec_dot)(GgmlType wtype, int64_t n, const void* w, const void* act);
  void (*matmul)(const MatmulArgs& a);

  // y = x / sqrt(mean(x^2) + eps) * w  (w may be null: no weight). In place allowed.
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  void (*rope)(const RopeArgs& a, const RopeParams& p);
  // y = silu(g) * u, n elements (in place on y == g allowed).
  void (*silu_mul)(const float* g, const float* u, float* y, int64_t n);
  // In-place softmax of n values after multiplying by scale.
  void (*softmax)(float* x, int64_t n, float scale);
  void (*flash_attn)(const AttnArgs& a);
  // flash_attn over a BF16 K and V cache (d_k even), and mla_attn over a BF16 latent cache
  // (kv_lora + n_rope even), round q and the softmax weights to bf16 (nearest even) and
  // multiply them with bf16 dot products: the reference's numerics for a bf16 cache
  // (SPEC.md: BF16 operands take BF16 activations). Set on AVX-512 CPUs with AVX512_BF16;
  // other tables multiply in float over every cache type.
  bool attn_bf16_dot = false;
  void (*mla_attn)(const MlaArgs& a);
  void (*moe_route)(const MoeRouteArgs& a);
  // Convert n floats into a KV row of type t (F32, F16, BF16, Q8_0).
  void (*store_kv)(GgmlType t, const float* x, void* y, int64_t n);
  void (*indexer_scores)(const IndexerScoreArgs& a);
};

// The table for the best ISA this CPU supports, lowered by DS_ISA=ref|avx2|avx512.
const KernelTable& kern();
// The table for a given ISA, or nullptr when the CPU (or OS) cannot run it. For tests.
const KernelTable* kernel_table(Isa isa);
Isa best_isa();
// The AVX-512 table as a CPU without AVX512_BF16 gets it (BF16 weights widened to float),
// or nullptr when AVX-512 is not usable. For tests on hosts that have the extension.
const KernelTable* kernel_table_without_bf16();

// Dequantize one row of n elements of any weight type to float (reference path).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

}  // namespace ds
