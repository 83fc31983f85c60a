// The inference engine as the scheduler and server see it: load a model, own a paged KV
// cache, and run one batched forward step over chunks of many sequences at once.
// Nothing here knows about HTTP; nothing above it touches tensors.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ds/status.h"

namespace ds {

class Tokenizer;

struct EngineOptions {
  std::string model_path;
  int n_ctx = 4096;             // max tokens per sequence (clamped to the model's context_length)
  int n_parallel = 4;           // sequences the KV cache is sized for (n_ctx * n_parallel tokens)
  int64_t kv_bytes = 0;         // alternative KV budget in bytes (0: use n_ctx * n_parallel)
  int n_threads = 0;            // 0: one per physical core
  std::string kv_type = "f16";  // f32 | f16 | bf16 | q8_0
  std::string numa = "none";    // distribute | isolate | none
  // Lock the model's weights in RAM after load (the mapped file's pages still read, and the
  // repacked copies); a refusal (RLIMIT_MEMLOCK) is a load error naming the bytes needed.
  bool mlock = false;
  int kv_block_size = 16;      // tokens per KV block
  int max_batch_tokens = 512;  // most tokens one step may carry (sizes the scratch)
  std::string isa;             // kernel table: ref | avx2 | avx512 | amx; empty: best (DS_ISA)
  // Repack the Q2_K-Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 matrices into 16-row panels at load
  // (AVX-512 only; repack_supported in kernels/quant/repack.h, docs/repack.md).
  bool repack = true;
};

struct ModelInfo {
  std::string arch;  // llama | qwen2 | deepseek2
  std::string name;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int32_t bos = -1;
  int32_t eos = -1;
  int64_t n_params = 0;
  uint64_t file_bytes = 0;
};

// One sequence's contribution to a step: tokens at positions pos0, pos0+1, ...
// The sequence's KV blocks must already cover pos0 + tokens.size() positions.
struct SeqChunk {
  int32_t seq_id = 0;
  std::span<const int32_t> tokens;
  int32_t pos0 = 0;
  bool all_logits = false;  // false: logits for the last token only; true: every token
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& opts);
  virtual ~Engine() = default;

  virtual const ModelInfo& info() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual int n_ctx() const = 0;

  // Paged KV cache (vLLM-style): fixed-size blocks, a block table per sequence,
  // reference-counted blocks so full prefix blocks can be shared between sequences.
  virtual int kv_block_size() const = 0;
  virtual int kv_blocks_total() const = 0;
  virtual int kv_blocks_free() const = 0;
  // Grow (never shrink) seq's block table to cover n_tokens positions. Fails cleanly
  // (no partial allocation) when the pool has too few free blocks.
  virtual Status seq_reserve(int32_t seq_id, int32_t n_tokens) = 0;
  // Drop seq's references to its blocks; blocks whose count reaches zero are free.
  virtual void seq_release(int32_t seq_id) = 0;
  virtual std::vector<int32_t> seq_blocks(int32_t seq_id) const = 0;
  // Start seq (which must hold no blocks) with these full blocks of another sequence,
  // sharing them (their reference counts go up). Used by the prefix cache.
  virtual Status seq_adopt(int32_t seq_id, std::span<const int32_t> block_ids) = 0;
  virtual void block_retain(int32_t block_id) = 0;
  virtual void block_release(int32_t block_id) = 0;
  // Append to seq's table a fresh block holding a copy of block src_block (all its rows), so
  // that a prompt matching only the first rows of a cached block reuses them without sharing
  // the block (the sequence then writes its own rows from there on; a row it has not
  // computed yet is overwritten before any step reads it). The default cannot copy.
  virtual Status seq_copy_block(int32_t seq_id, int32_t src_block) {
    (void)seq_id, (void)src_block;
    return Status::error("seq_copy_block is not supported by this engine");
  }

  // One forward step over all chunks (total tokens <= max_batch_tokens). Writes logits
  // rows in chunk order: one row per chunk, or one per token for all_logits chunks.
  // Results for a sequence do not depend on the other chunks [BATCH_INVARIANT].
  virtual Status step(std::span<const SeqChunk> chunks, float* logits) = 0;

  // KV cache bytes one decode step of one sequence reads at context length n_ctx (for the
  // bandwidth roofline of `ds-cli bench`; sparse attention reads only its selected rows).
  virtual double decode_kv_bytes(int64_t n_ctx) const { return 0.0 * static_cast<double>(n_ctx); }

  // Latency attribution for `ds-cli bench --profile`: when enabled, step() adds the time of
  // each stage (names from kProfileStages) into a table that profile() returns and
  // profile_reset() zeroes. Off by default; an engine that does not profile returns {}.
  virtual void set_profiling(bool on) {}
  virtual std::vector<std::pair<std::string, double>> profile() const { return {}; }  // stage, seconds
  virtual void profile_reset() {}
};

// Stage names an engine reports in profile(), in this order.
inline constexpr const char* kProfileStages[] = {"norms+rope",  "attention",    "router", "ffn_dense", "ffn_experts",
                                                 "output_head", "quantize_act", "sync",   "other"};

}  // namespace ds
