// ds-cli generate: prompt -> streamed text through the Engine (prefill in batches of
// max_batch_tokens, then one decode step per token), greedy at --temp 0, otherwise
// temperature sampling from a seeded generator. Reports the decode rate on stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ds/engine.h"
#include "gguf/gguf_file.h"
#include "model/tokenizer.h"
#include "tools/command.h"

namespace ds::cli {
namespace {

void print_usage() {
  std::printf(
      "usage: ds-cli generate --model M --prompt TEXT [options]\n"
      "  -n N          tokens to generate (default 64)\n"
      "  --temp T      temperature; 0 = greedy (default 0.8)\n"
      "  --seed S      sampling seed (default 42)\n"
      "  --threads N   worker threads (default: one per physical core)\n"
      "  --kv-type T   f32 | f16 (default) | bf16 | q8_0\n"
      "  --ctx N       context size (default: prompt + n)\n"
      "  --isa NAME    ref | avx2 | avx512 | amx (default: best, or DS_ISA)\n");
}

int32_t sample(const float* logits, int64_t n_vocab, float temp, std::mt19937_64& rng) {
  int64_t best = 0;
  for (int64_t v = 1; v < n_vocab; ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  if (temp <= 0.0f) return static_cast<int32_t>(best);
  std::vector<double> p(static_cast<size_t>(n_vocab));
  double sum = 0.0;
  for (int64_t v = 0; v < n_vocab; ++v) {
    p[static_cast<size_t>(v)] = std::exp((static_cast<double>(logits[v]) - logits[best]) / temp);
    sum += p[static_cast<size_t>(v)];
  }
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int64_t v = 0; v < n_vocab; ++v) {
    u -= p[static_cast<size_t>(v)];
    if (u <= 0.0) return static_cast<int32_t>(v);
  }
  return static_cast<int32_t>(best);
}

int cmd_generate(const std::vector<std::string>& args) {
  EngineOptions eo;
  eo.kv_type = "f16";
  std::string prompt;
  int n_gen = 64, ctx = 0;
  float temp = 0.8f;
  uint64_t seed = 42;
  bool have_prompt = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    if (k == "--help" || k == "-h") { print_usage(); return 0; }
    if (i + 1 >= args.size()) { std::fprintf(stderr, "generate: %s needs a value\n", k.c_str()); return 2; }
    const std::string& v = args[++i];
    try {
      if (k == "--model" || k == "-m") eo.model_path = v;
      else if (k == "--prompt" || k == "-p") { prompt = v; have_prompt = true; }
      else if (k == "-n" || k == "--n-predict") n_gen = std::stoi(v);
      else if (k == "--temp") temp = std::stof(v);
      else if (k == "--seed") seed = std::stoull(v);
      else if (k == "--threads" || k == "-t") eo.n_threads = std::stoi(v);
      else if (k == "--kv-type") eo.kv_type = v;
      else if (k == "--ctx") ctx = std::stoi(v);
      else if (k == "--isa") eo.isa = v;
      else { std::fprintf(stderr, "generate: unknown option %s\n", k.c_str()); return 2; }
    } catch (const std::exception&) {
      std::fprintf(stderr, "generate: %s expects a number, got '%s'\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  if (eo.model_path.empty() || !have_prompt || n_gen < 0) { print_usage(); return 2; }

  // Tokenize first (the file is only mapped, not read) so that the KV cache is sized to
  // the prompt plus the tokens to generate.
  std::vector<int32_t> prompt_ids;
  {
    auto file = GgufFile::open(eo.model_path);
    if (!file) { std::fprintf(stderr, "generate: %s\n", file.message().c_str()); return 1; }
    auto t = Tokenizer::from_gguf(**file);
    if (!t) { std::fprintf(stderr, "generate: %s\n", t.message().c_str()); return 1; }
    auto enc = (*t)->encode(prompt, true);
    if (!enc) { std::fprintf(stderr, "generate: %s\n", enc.message().c_str()); return 1; }
    prompt_ids = std::move(*enc);
  }
  const int32_t n_total = static_cast<int32_t>(prompt_ids.size()) + n_gen;
  eo.n_parallel = 1;
  eo.n_ctx = std::max(ctx, n_total);
  auto engine = Engine::create(eo);
  if (!engine) { std::fprintf(stderr, "generate: %s\n", engine.message().c_str()); return 1; }
  Engine& e = **engine;
  const Tokenizer& tok = e.tokenizer();
  const std::vector<int32_t>* ids = &prompt_ids;
  if (Status st = e.seq_reserve(0, n_total); !st) { std::fprintf(stderr, "generate: %s\n", st.message().c_str()); return 1; }

  const int64_t V = e.info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  std::mt19937_64 rng(seed);
  StreamDecoder dec(tok, false);
  const auto t0 = std::chrono::steady_clock::now();
  // Prefill in batches of at most max_batch_tokens.
  const size_t max_batch = static_cast<size_t>(std::max(1, eo.max_batch_tokens));
  for (size_t p = 0; p < ids->size(); p += max_batch) {
    const size_t m = std::min(max_batch, ids->size() - p);
    const SeqChunk ch{.seq_id = 0, .tokens = std::span<const int32_t>(ids->data() + p, m), .pos0 = static_cast<int32_t>(p)};
    if (Status st = e.step(std::span<const SeqChunk>(&ch, 1), logits.data()); !st) {
      std::fprintf(stderr, "generate: %s\n", st.message().c_str());
      return 1;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  int n_done = 0;
  int32_t pos = static_cast<int32_t>(ids->size());
  for (; n_done < n_gen; ++n_done) {
    int32_t next = sample(logits.data(), V, temp, rng);
    if (tok.is_eog(next)) break;
    std::fputs(dec.push(next).c_str(), stdout);
    std::fflush(stdout);
    if (n_done + 1 == n_gen) { ++n_done; break; }
    const SeqChunk ch{.seq_id = 0, .tokens = std::span<const int32_t>(&next, 1), .pos0 = pos++};
    if (Status st = e.step(std::span<const SeqChunk>(&ch, 1), logits.data()); !st) {
      std::fprintf(stderr, "\ngenerate: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::fputs(dec.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const auto t2 = std::chrono::steady_clock::now();
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "generate: prompt %zu tokens in %.3f s (%.1f tok/s), %d tokens in %.3f s (%.2f tok/s)\n",
               ids->size(), pre_s, static_cast<double>(ids->size()) / std::max(pre_s, 1e-9), n_done, dec_s,
               n_done / std::max(dec_s, 1e-9));
  return 0;
}

}  // namespace

DS_CLI_COMMAND(generate, "generate text from a prompt (streams to stdout)", cmd_generate);

}  // namespace ds::cli
