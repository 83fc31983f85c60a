// Runner: step preparation (chunks -> flat Batch with per-sequence block tables) and the
// calls into the model. All buffers are sized in create(); step() only fills them.
#include "engine/runner.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace ds {

Result<GgmlType> parse_kv_type(const std::string& name) {
  if (name == "f32") return GgmlType::F32;
  if (name == "f16") return GgmlType::F16;
  if (name == "bf16") return GgmlType::BF16;
  if (name == "q8_0") return GgmlType::Q8_0;
  return Status::error("unknown KV cache type '" + name + "' (expected f32, f16, bf16 or q8_0)");
}

Result<const KernelTable*> kernels_by_name(const std::string& name) {
  if (name.empty()) return &kern();
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (name == isa_name(isa)) {
      const KernelTable* t = kernel_table(isa);
      if (!t) return Status::error("ISA '" + name + "' is not available on this CPU");
      return t;
    }
  }
  return Status::error("unknown ISA '" + name + "' (expected ref, avx2, avx512 or amx)");
}

namespace {

// Q8_0 cache rows are quantized in 32-element blocks that must not straddle heads.
Status check_kv_type(const HParams& hp, GgmlType t) {
  if (t != GgmlType::Q8_0) return Status::ok();
  const bool ok = hp.is_mla() ? (hp.kv_lora % 32 == 0 && hp.n_rot % 32 == 0)
                              : (hp.n_embd_head_k % 32 == 0 && hp.n_embd_head_v % 32 == 0);
  return ok ? Status::ok() : Status::error("KV cache type q8_0 needs head sizes that are multiples of 32");
}

}  // namespace

Result<std::unique_ptr<Runner>> Runner::create(std::unique_ptr<Model> model, const RunnerOptions& opts) {
  std::unique_ptr<Runner> r(new Runner());
  r->opts_ = opts;
  r->kt_ = opts.kernels ? opts.kernels : &kern();
  if (opts.max_batch_tokens < 1) return Status::error("max_batch_tokens must be at least 1");
  if (opts.kv_block_size < 1) return Status::error("kv_block_size must be at least 1");
  DS_RETURN_IF_ERROR(check_kv_type(model->hp(), opts.kv_type));

  BlockPoolOptions bo;
  bo.n_blocks = opts.n_kv_blocks;
  bo.block_size = opts.kv_block_size;
  size_t token_bytes = 0;  // the layers' rows one after the other (KvLayout)
  for (int il = 0; il < model->hp().n_layer; ++il) {
    r->kv_layer_before_.push_back(token_bytes);
    r->kv_layer_rows_.push_back(model->kv_layer_row_bytes(il, opts.kv_type));
    token_bytes += r->kv_layer_rows_.back();
  }
  bo.bytes_per_token = token_bytes;
  bo.numa = opts.numa;
  auto kv = KvCache::create(bo);
  if (!kv) return kv.status();
  r->kv_ = std::move(*kv);

  auto pool = ThreadPool::create({.n_threads = opts.n_threads, .pin = opts.pin_threads});
  if (!pool) return pool.status();
  r->pool_ = std::move(*pool);
  auto numa = parse_numa_mode(opts.numa);
  if (!numa) return numa.status();
  auto arena = Arena::create(model->scratch_bytes(opts.max_batch_tokens), *numa);
  if (!arena) return arena.status();
  r->arena_ = std::move(*arena);
  const size_t T = static_cast<size_t>(opts.max_batch_tokens);
  r->tokens_.resize(T);
  r->pos_.resize(T);
  r->seqs_.resize(T);
  r->out_rows_.resize(T);
  const size_t per_seq = static_cast<size_t>((opts.max_seq_tokens + opts.kv_block_size - 1) / opts.kv_block_size) + 1;
  // Tables of all sequences in one step; more only with heavy prefix sharing (then it grows once).
  r->block_ptrs_.resize(2 * static_cast<size_t>(opts.n_kv_blocks) + per_seq + T);
  if (opts.repack && r->kt_->isa == Isa::kAvx512) {
    auto packed = model->repack(*r->pool_, *numa);
    if (!packed) return packed.status();
  }
  r->model_ = std::move(model);
  return r;
}

Status Runner::prepare(std::span<const SeqChunk> chunks, Batch* b) {
  const int64_t n_vocab = model_->hp().n_vocab;
  const int bs = kv_->block_size();
  int64_t n_tok = 0, n_out = 0;
  size_t n_ptr = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SeqChunk& ch = chunks[c];
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    if (n == 0) return Status::error("step: chunk " + std::to_string(c) + " has no tokens");
    if (n_tok + n > opts_.max_batch_tokens) {
      return Status::error("step: batch exceeds max_batch_tokens " + std::to_string(opts_.max_batch_tokens));
    }
    if (ch.pos0 < 0) return Status::error("step: negative pos0 for sequence " + std::to_string(ch.seq_id));
    for (size_t p = 0; p < c; ++p) {
      if (chunks[p].seq_id == ch.seq_id) {
        return Status::error("step: sequence " + std::to_string(ch.seq_id) + " appears twice in one step");
      }
    }
    const int64_t end = ch.pos0 + n;
    if (kv_->capacity(ch.seq_id) < end) {
      return Status::error("step: sequence " + std::to_string(ch.seq_id) + " has KV blocks for " +
                           std::to_string(kv_->capacity(ch.seq_id)) + " positions, needs " + std::to_string(end));
    }
    const int n_need = static_cast<int>((end + bs - 1) / bs);
    if (n_ptr + static_cast<size_t>(n_need) > block_ptrs_.size()) {
      // Only with many sequences sharing prefix blocks; earlier slices keep valid offsets.
      std::vector<const uint8_t*> grown(2 * (n_ptr + static_cast<size_t>(n_need)));
      std::copy_n(block_ptrs_.begin(), n_ptr, grown.begin());
      for (size_t p = 0; p < c; ++p) seqs_[p].kv_blocks = grown.data() + (seqs_[p].kv_blocks - block_ptrs_.data());
      block_ptrs_.swap(grown);
    }
    const int got = kv_->block_pointers(ch.seq_id, block_ptrs_.data() + n_ptr, n_need);
    seqs_[c] = SeqSlice{.t0 = n_tok, .n = n, .kv_blocks = block_ptrs_.data() + n_ptr, .n_blocks = got};
    n_ptr += static_cast<size_t>(got);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t tok = ch.tokens[static_cast<size_t>(i)];
      if (tok < 0 || tok >= n_vocab) {
        return Status::error("step: token id " + std::to_string(tok) + " is outside the vocabulary (" +
                             std::to_string(n_vocab) + ")");
      }
      tokens_[static_cast<size_t>(n_tok + i)] = tok;
      pos_[static_cast<size_t>(n_tok + i)] = static_cast<int32_t>(ch.pos0 + i);
      if (ch.all_logits || i == n - 1) out_rows_[static_cast<size_t>(n_out++)] = n_tok + i;
    }
    n_tok += n;
  }
  *b = Batch{.n_tok = n_tok,
             .tokens = tokens_.data(),
             .pos = pos_.data(),
             .seqs = seqs_.data(),
             .n_seqs = static_cast<int>(chunks.size()),
             .out_rows = out_rows_.data(),
             .n_out = n_out};
  return Status::ok();
}

ForwardCtx Runner::forward_ctx(const Batch& b, const TraceFn* trace, Profile* prof) {
  return ForwardCtx{.kt = *kt_,
                    .pool = *pool_,
                    .arena = *arena_,
                    .batch = b,
                    .kv = KvLayout{.type = opts_.kv_type,
                                   .block_size = kv_->block_size(),
                                   .layer_rows = kv_layer_rows_.data(),
                                   .layer_before = kv_layer_before_.data()},
                    .trace = trace,
                    .prof = prof};
}

Status Runner::step(std::span<const SeqChunk> chunks, float* logits, const TraceFn* trace) {
  Batch b;
  DS_RETURN_IF_ERROR(prepare(chunks, &b));
  if (b.n_tok == 0) return Status::ok();
  ForwardCtx ctx = forward_ctx(b, trace, profiling_ ? &prof_ : nullptr);
  if (profiling_) {
    prof_.current = Stage::kOther;
    prof_.since = std::chrono::steady_clock::now();
    prof_.wait_seen = prof_.wait_ns;
    pool_->set_wait_counter(&prof_.wait_ns);
  }
  model_->forward(ctx, logits);
  if (profiling_) {
    prof_.switch_to(Stage::kOther);
    pool_->set_wait_counter(nullptr);
  }
  return Status::ok();
}

static_assert(std::size(kProfileStages) == static_cast<size_t>(Stage::kCount), "Stage must follow kProfileStages");

std::vector<std::pair<std::string, double>> Runner::profile() const {
  std::vector<std::pair<std::string, double>> out;
  for (int i = 0; i < static_cast<int>(Stage::kCount); ++i) out.emplace_back(kProfileStages[i], prof_.seconds[i]);
  return out;
}

Status Runner::sublayer(int il, SubLayer kind, int32_t seq, int32_t pos0, const float* x, int64_t n, float* out,
                        const TraceFn* trace, const int32_t* tokens) {
  if (il < 0 || il >= model_->hp().n_layer) return Status::error("sublayer: no block " + std::to_string(il));
  std::vector<int32_t> dummy(static_cast<size_t>(n), 0);  // token ids, when the sub-layer reads them
  if (tokens) dummy.assign(tokens, tokens + n);
  const SeqChunk ch{.seq_id = seq, .tokens = dummy, .pos0 = pos0, .all_logits = false};
  Batch b;
  DS_RETURN_IF_ERROR(prepare(std::span<const SeqChunk>(&ch, 1), &b));
  ForwardCtx ctx = forward_ctx(b, trace);
  const size_t mark = arena_->mark();
  if (kind == SubLayer::kAttention) {
    model_->attention(il, ctx, x, out);
  } else {
    model_->ffn(il, ctx, x, out);
  }
  arena_->reset(mark);
  return Status::ok();
}

}  // namespace ds
