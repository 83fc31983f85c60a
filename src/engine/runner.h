// Runner: a loaded Model plus everything one forward step needs (kernel table, thread
// pool, scratch arena, paged KV cache), sized once at creation. step() turns the
// scheduler's chunks into one flat Batch and runs the model; nothing is allocated there.
// The Engine (engine.cpp) wraps a Runner with the tokenizer; tests and ds-cli eval use the
// Runner directly for tracing and the teacher-forced sub-layer checks.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ds/engine.h"
#include "ds/status.h"
#include "engine/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/thread_pool.h"

namespace ds {

struct RunnerOptions {
  int n_threads = 0;  // 0: one per physical core
  bool pin_threads = true;
  GgmlType kv_type = GgmlType::F16;  // F32, F16, BF16 or Q8_0
  int kv_block_size = 16;
  int n_kv_blocks = 0;
  int max_batch_tokens = 512;
  int max_seq_tokens = 4096;             // longest sequence (sizes the block-pointer table)
  const KernelTable* kernels = nullptr;  // null: kern() (best ISA, DS_ISA)
  std::string numa = "none";
  // Pack the quantized matrices (repack_supported) into 16-row panels at creation when the kernel table reads
  // them (AVX-512) and release the original pages (docs/repack.md).
  bool repack = true;
};

// "f32" | "f16" | "bf16" | "q8_0" -> type; an error naming the value otherwise.
Result<GgmlType> parse_kv_type(const std::string& name);
// "ref" | "avx2" | "avx512" | "amx" | "" (best) -> table; an error when unknown or unavailable.
Result<const KernelTable*> kernels_by_name(const std::string& name);

enum class SubLayer { kAttention, kFfn };

class Runner {
 public:
  static Result<std::unique_ptr<Runner>> create(std::unique_ptr<Model> model, const RunnerOptions& opts);

  const Model& model() const { return *model_; }
  KvCache& kv() { return *kv_; }
  const KvCache& kv() const { return *kv_; }
  const KernelTable& kernels() const { return *kt_; }
  int max_batch_tokens() const { return opts_.max_batch_tokens; }
  GgmlType kv_type() const { return opts_.kv_type; }
  // Scratch arena size and the most any step has used so far (bytes).
  size_t scratch_capacity() const { return arena_->capacity(); }
  size_t scratch_high_water() const { return arena_->high_water(); }

  // Logits rows in chunk order (engine.h SeqChunk). trace: per-block tensors, or null.
  Status step(std::span<const SeqChunk> chunks, float* logits, const TraceFn* trace = nullptr);

  // Stage timing of step() (Engine::profile); off by default.
  void set_profiling(bool on) { profiling_ = on; }
  std::vector<std::pair<std::string, double>> profile() const;
  void profile_reset() { prof_ = Profile{}; }

  // One sub-layer of block il for one sequence's rows at positions pos0..pos0+n-1 (its KV
  // blocks reserved), on given inputs x [n][n_embd] -> out [n][n_embd]. The attention
  // sub-layer writes those positions' KV rows first. For teacher-forced tests. tokens: the
  // rows' token ids when the sub-layer reads them (deepseek4 hash routing), else null.
  // deepseek4's sub-layers map the whole hyper-connection state: x and out are then
  // [n][n_hc * n_embd] (model.h).
  Status sublayer(int il, SubLayer kind, int32_t seq, int32_t pos0, const float* x, int64_t n, float* out,
                  const TraceFn* trace = nullptr, const int32_t* tokens = nullptr);

 private:
  Runner() = default;
  Status prepare(std::span<const SeqChunk> chunks, Batch* b);
  // The forward context of one prepared batch (profiling on when prof is set).
  ForwardCtx forward_ctx(const Batch& b, const TraceFn* trace, Profile* prof = nullptr);

  RunnerOptions opts_;
  std::unique_ptr<Model> model_;
  const KernelTable* kt_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<KvCache> kv_;
  std::vector<size_t> kv_layer_rows_, kv_layer_before_;  // KvLayout's per-layer rows
  // Step buffers, sized at creation.
  std::vector<int32_t> tokens_, pos_;
  std::vector<SeqSlice> seqs_;
  std::vector<int64_t> out_rows_;
  std::vector<const uint8_t*> block_ptrs_;
  bool profiling_ = false;
  Profile prof_;
};

}  // namespace ds
