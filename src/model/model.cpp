// Model loading (file -> hyper-parameters -> weights -> architecture) and the generic
// block loop of SPEC.md: h = embed(tokens); per block h += attn(norm(h)); h += ffn(norm(h));
// logits = output(norm(h)) for the requested rows.
#include "model/model.h"

#include <cstring>

namespace ds {

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.status();
  auto hp = load_hparams(**file);
  if (!hp) return hp.status();
  auto w = load_weights(**file, *hp);
  if (!w) return w.status();
  switch (hp->arch) {
    case Arch::kLlama:
      return make_llama_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kQwen2:
      return make_qwen2_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kDeepseek2:
      return make_deepseek2_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kDeepseek:
      return make_deepseek_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kQwen3:
      return make_qwen3_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kDeepseek4:
      return make_deepseek4_model(std::move(*file), std::move(*hp), std::move(*w));
    case Arch::kDeepseek32:
      return make_deepseek32_model(std::move(*file), std::move(*hp), std::move(*w));
  }
  return Status::error("unsupported architecture in " + path);
}

size_t Model::base_scratch_bytes(int64_t max_tokens) const {
  const size_t T = static_cast<size_t>(max_tokens), E = static_cast<size_t>(hp_.n_embd);
  // h, sub-layer output, normalized output rows, and their quantized form (<= 4 bytes per
  // element for every activation type), plus alignment slack.
  return 4 * T * E * sizeof(float) + 16 * 64;
}

void Model::forward(ForwardCtx& ctx, float* logits) const {
  const Batch& b = ctx.batch;
  const int64_t E = hp_.n_embd, T = b.n_tok;
  const Weights& w = *w_;
  const size_t m0 = ctx.arena.mark();
  float* h = ctx.arena.alloc<float>(T * E);    // residual stream
  float* sub = ctx.arena.alloc<float>(T * E);  // sub-layer output

  ctx.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* row = w.tok_embd.data + static_cast<size_t>(b.tokens[t]) * w.tok_embd.row_stride;
      if (w.tok_embd.type == GgmlType::F32) {
        std::memcpy(h + t * E, row, static_cast<size_t>(E) * sizeof(float));
      } else {
        dequantize_row(w.tok_embd.type, row, h + t * E, E);
      }
    }
  });

  const size_t m1 = ctx.arena.mark();
  auto add_into_h = [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * E; i < t1 * E; ++i) h[i] += sub[i];
  };
  for (int il = 0; il < hp_.n_layer; ++il) {
    ctx.emit("in", il, h, T, E);
    {
      ProfScope ps(ctx.prof, Stage::kAttention);
      attention(il, ctx, h, sub);
    }
    ctx.arena.reset(m1);
    ctx.parallel_for(T, add_into_h);
    ctx.emit("mid", il, h, T, E);
    {
      ProfScope ps(ctx.prof, hp_.is_moe_layer(il) ? Stage::kFfnExperts : Stage::kFfnDense);
      ffn(il, ctx, h, sub);
    }
    ctx.arena.reset(m1);
    ctx.parallel_for(T, add_into_h);
    ctx.emit("out", il, h, T, E);
  }

  // Output head for the requested rows only.
  ProfScope ps(ctx.prof, Stage::kOutputHead);
  const int64_t n_out = b.n_out;
  float* xo = ctx.arena.alloc<float>(n_out * E);
  for (int64_t i = 0; i < n_out; ++i) {
    ctx.kt.rms_norm(h + b.out_rows[i] * E, w.output_norm.data, xo + i * E, E, hp_.norm_eps);
  }
  ActRows a(ctx, xo, n_out, E, E);
  matmul(ctx, w.output, a, logits, hp_.n_vocab);
  ctx.arena.reset(m0);
}

}  // namespace ds
