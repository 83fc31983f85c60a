// Engine (include/ds/engine.h): a Runner (model, kernels, threads, scratch, paged KV cache)
// plus the model's tokenizer and summary. Sizing: the KV pool holds n_ctx * n_parallel
// tokens, or as many blocks as kv_bytes allows; n_ctx is clamped to the model's context.
#include <algorithm>

#include "ds/engine.h"
#include "engine/runner.h"
#include "ds/tokenizer.h"

namespace ds {

namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<Runner> runner, std::unique_ptr<Tokenizer> tok, ModelInfo info, int n_ctx)
      : runner_(std::move(runner)), tok_(std::move(tok)), info_(std::move(info)), n_ctx_(n_ctx) {}

  const ModelInfo& info() const override { return info_; }
  const Tokenizer& tokenizer() const override { return *tok_; }
  int n_ctx() const override { return n_ctx_; }

  int kv_block_size() const override { return runner_->kv().block_size(); }
  int kv_blocks_total() const override { return runner_->kv().n_blocks(); }
  int kv_blocks_free() const override { return runner_->kv().n_free(); }
  Status seq_reserve(int32_t seq_id, int32_t n_tokens) override {
    if (n_tokens > n_ctx_) {
      return Status::error("sequence " + std::to_string(seq_id) + " needs " + std::to_string(n_tokens) +
                           " positions, more than the context size " + std::to_string(n_ctx_));
    }
    return runner_->kv().reserve(seq_id, n_tokens);
  }
  void seq_release(int32_t seq_id) override { runner_->kv().release(seq_id); }
  std::vector<int32_t> seq_blocks(int32_t seq_id) const override { return runner_->kv().blocks(seq_id); }
  Status seq_adopt(int32_t seq_id, std::span<const int32_t> block_ids) override {
    return runner_->kv().adopt(seq_id, block_ids);
  }
  Status seq_copy_block(int32_t seq_id, int32_t src_block) override {
    return runner_->kv().copy_block(seq_id, src_block);
  }
  void block_retain(int32_t block_id) override { runner_->kv().block_retain(block_id); }
  void block_release(int32_t block_id) override { runner_->kv().block_release(block_id); }

  Status step(std::span<const SeqChunk> chunks, float* logits) override { return runner_->step(chunks, logits); }

  double decode_kv_bytes(int64_t n_ctx) const override {
    return runner_->model().decode_kv_bytes(n_ctx, runner_->kv_type());
  }
  void set_profiling(bool on) override { runner_->set_profiling(on); }
  std::vector<std::pair<std::string, double>> profile() const override { return runner_->profile(); }
  void profile_reset() override { runner_->profile_reset(); }

 private:
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<Tokenizer> tok_;
  ModelInfo info_;
  int n_ctx_ = 0;
};

ModelInfo model_info(const Model& m, const Tokenizer& tok) {
  const HParams& hp = m.hp();
  ModelInfo info;
  info.arch = hp.arch_name;
  info.name = hp.name;
  info.n_vocab = static_cast<int>(hp.n_vocab);
  info.n_ctx_train = static_cast<int>(hp.n_ctx_train);
  info.n_embd = static_cast<int>(hp.n_embd);
  info.n_layer = hp.n_layer;
  info.bos = tok.bos();
  info.eos = tok.eos();
  for (const GgufTensorInfo& t : m.file().tensors()) info.n_params += t.n_elements();
  info.file_bytes = m.file().total_file_bytes();
  return info;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  auto model = Model::load(opts.model_path);
  if (!model) return model.status();
  auto tok = Tokenizer::from_gguf((*model)->file());
  if (!tok) return Status::error("tokenizer of " + opts.model_path + ": " + tok.message());
  auto kv_type = parse_kv_type(opts.kv_type);
  if (!kv_type) return kv_type.status();
  auto kernels = kernels_by_name(opts.isa);
  if (!kernels) return kernels.status();

  const HParams& hp = (*model)->hp();
  const int n_ctx = static_cast<int>(std::min<int64_t>(std::max(opts.n_ctx, 1), hp.n_ctx_train));
  const int bs = std::max(opts.kv_block_size, 1);
  const size_t block_bytes = (*model)->kv_token_bytes(*kv_type) * static_cast<size_t>(bs);
  int64_t n_blocks = opts.kv_bytes > 0 ? opts.kv_bytes / static_cast<int64_t>(block_bytes)
                                       : int64_t{(n_ctx + bs - 1) / bs} * std::max(opts.n_parallel, 1);
  if (n_blocks < 1) return Status::error("KV budget of " + std::to_string(opts.kv_bytes) + " bytes holds no block");
  n_blocks = std::min<int64_t>(n_blocks, 1 << 30);

  RunnerOptions ro;
  ro.n_threads = opts.n_threads;
  ro.kv_type = *kv_type;
  ro.kv_block_size = bs;
  ro.n_kv_blocks = static_cast<int>(n_blocks);
  ro.max_batch_tokens = opts.max_batch_tokens;
  ro.max_seq_tokens = n_ctx;
  ro.kernels = *kernels;
  ro.numa = opts.numa;
  ro.repack = opts.repack;
  ModelInfo info = model_info(**model, **tok);
  auto runner = Runner::create(std::move(*model), ro);
  if (!runner) return runner.status();
  if (opts.mlock) {
    const Model& m = (*runner)->model();
    if (Status st = lock_weights(m.file(), m.weights()); !st) return Status::error("--mlock: " + st.message());
  }
  return std::unique_ptr<Engine>(new EngineImpl(std::move(*runner), std::move(*tok), std::move(info), n_ctx));
}

}  // namespace ds
