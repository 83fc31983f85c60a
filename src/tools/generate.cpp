// ds-cli generate: prompt -> streamed text through the Engine (prefill in batches of
// max_batch_tokens, then one decode step per token), greedy at --temp 0, otherwise
// temperature sampling from a seeded generator. Reports the decode rate on stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ds/engine.h"
#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"
#include "tools/cli_args.h"
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

struct GenArgs {
  EngineOptions eo;
  std::string prompt;
  bool have_prompt = false;
  int n_gen = 64, ctx = 0;
  float temp = 0.8f;
  uint64_t seed = 42;
  bool help = false;
};

Status parse_args(const std::vector<std::string>& args, GenArgs* g) {
  g->eo.kv_type = "f16";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    if (k == "--help" || k == "-h") {
      g->help = true;
      return Status::ok();
    }
    if (i + 1 >= args.size()) return Status::invalid_argument(k + " needs a value");
    const std::string& v = args[++i];
    Status ok;
    if (k == "--model" || k == "-m")
      g->eo.model_path = v;
    else if (k == "--prompt" || k == "-p") {
      g->prompt = v;
      g->have_prompt = true;
    } else if (k == "-n" || k == "--n-predict")
      ok = parse_int_arg(k, v, 0, kMaxCliTokens, &g->n_gen);
    else if (k == "--temp")
      ok = parse_float_arg(k, v, 0.0, 100.0, &g->temp);
    else if (k == "--seed") {
      int64_t seed = 0;
      ok = parse_int_arg(k, v, 0, INT64_MAX, &seed);
      g->seed = static_cast<uint64_t>(seed);
    } else if (k == "--threads" || k == "-t")
      ok = parse_int_arg(k, v, 0, kMaxCliThreads, &g->eo.n_threads);
    else if (k == "--kv-type")
      g->eo.kv_type = v;
    else if (k == "--ctx")
      ok = parse_int_arg(k, v, 0, kMaxCliTokens, &g->ctx);
    else if (k == "--isa")
      g->eo.isa = v;
    else
      return Status::invalid_argument("unknown option " + k);
    DS_RETURN_IF_ERROR(ok);
  }
  if (g->eo.model_path.empty() || !g->have_prompt) return Status::invalid_argument("needs --model and --prompt");
  return Status::ok();
}

// Tokenizes before the engine exists (the file is only mapped) so that the KV cache can
// be sized to the prompt plus the tokens to generate.
Result<std::vector<int32_t>> tokenize_prompt(const GenArgs& g) {
  auto file = GgufFile::open(g.eo.model_path);
  if (!file) return file.status();
  auto t = Tokenizer::from_gguf(**file);
  if (!t) return t.status();
  return (*t)->encode(g.prompt, true);
}

// "VmHWM" (peak resident) or "VmRSS" of this process in kB, -1 when unknown.
long proc_status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') kb = std::strtol(line + n + 1, nullptr, 10);
  }
  std::fclose(f);
  return kb;
}

Status step_one(Engine& e, std::span<const int32_t> toks, int32_t pos0, float* logits) {
  const SeqChunk ch{.seq_id = 0, .tokens = toks, .pos0 = pos0};
  return e.step(std::span<const SeqChunk>(&ch, 1), logits);
}

Status cmd_generate(const std::vector<std::string>& args) {
  GenArgs g;
  DS_RETURN_IF_ERROR(parse_args(args, &g));
  if (g.help) {
    print_usage();
    return Status::ok();
  }
  auto ids = tokenize_prompt(g);
  if (!ids) return ids.status();
  const int32_t n_prompt = static_cast<int32_t>(ids->size()), n_total = n_prompt + g.n_gen;
  g.eo.n_parallel = 1;
  g.eo.n_ctx = std::max(g.ctx, n_total);
  auto engine = Engine::create(g.eo);
  if (!engine) return engine.status();
  Engine& e = **engine;
  Status st = e.seq_reserve(0, n_total);
  std::vector<float> logits(static_cast<size_t>(e.info().n_vocab));
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t max_batch = std::max(1, g.eo.max_batch_tokens);
  for (int32_t p = 0; st && p < n_prompt; p += max_batch) {
    st = step_one(e, std::span<const int32_t>(ids->data() + p, static_cast<size_t>(std::min(max_batch, n_prompt - p))),
                  p, logits.data());
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::mt19937_64 rng(g.seed);
  StreamDecoder dec(e.tokenizer(), false);
  int n_done = 0;
  for (int32_t pos = n_prompt; st && n_done < g.n_gen; ++pos) {
    const int32_t next = sample(logits.data(), e.info().n_vocab, g.temp, rng);
    if (e.tokenizer().is_eog(next)) break;
    std::fputs(dec.push(next).c_str(), stdout);
    std::fflush(stdout);
    if (++n_done < g.n_gen) st = step_one(e, std::span<const int32_t>(&next, 1), pos, logits.data());
  }
  std::fputs((dec.flush() + "\n").c_str(), stdout);
  DS_RETURN_IF_ERROR(st);
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::fprintf(stderr,
               "generate: prompt %d tokens in %.3f s (%.1f tok/s), %d tokens in %.3f s (%.2f tok/s); "
               "resident %.1f MiB (peak %.1f MiB), model file %.1f MiB\n",
               n_prompt, pre_s, n_prompt / std::max(pre_s, 1e-9), n_done, dec_s, n_done / std::max(dec_s, 1e-9),
               proc_status_kb("VmRSS") / 1024.0, proc_status_kb("VmHWM") / 1024.0,
               static_cast<double>(e.info().file_bytes) / (1 << 20));
  return Status::ok();
}

}  // namespace

DS_CLI_COMMAND(generate, "generate text from a prompt (streams to stdout)", cmd_generate);

}  // namespace ds::cli
