// ds-cli eval: run a model over given token ids and write the logits (float32 LE
// [n_tokens][n_vocab], the layout of ../shared/refdata), optionally dumping the per-block
// tensors in the refdata .layers format; or report perplexity over a text file.
// Uses the Runner directly (no scheduler) so that chunking, KV type and ISA are explicit.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "ds/tokenizer.h"
#include "tools/cli_args.h"
#include "util/files.h"
#include "tools/command.h"

namespace ds::cli {
namespace {

void print_usage() {
  std::printf(
      "usage: ds-cli eval --model M (--tokens-json J --logits-out F | --perplexity FILE) [options]\n"
      "  --tokens-json J    JSON file with a \"tokens\" array of ids (refdata .json files)\n"
      "  --logits-out F     write float32 little-endian logits [n_tokens][n_vocab]\n"
      "  --perplexity FILE  tokenize FILE (with BOS) and report perplexity over windows of --ctx\n"
      "  --kv-type T        f32 (default) | f16 | bf16 | q8_0\n"
      "  --chunk N          feed N tokens per step through the KV cache (0 = one batch, default)\n"
      "  --ctx N            perplexity window (default 512)\n"
      "  --threads N        worker threads (default: one per physical core)\n"
      "  --isa NAME         ref | avx2 | avx512 | amx (default: best, or DS_ISA)\n"
      "  --dump-layers DIR  write blk{il}.in/mid/out.f32 and blk{il}.experts.i32 (refdata layout;\n"
      "                     deepseek32 also topk.i32 / topk_gap.f32; deepseek4 also attn_out/ffn_out.f32\n"
      "                     and, ratio-4 blocks, topk.i32)\n");
}

struct Args {
  std::string model, tokens_json, logits_out, perplexity, dump_dir, kv_type = "f32", isa;
  int chunk = 0, ctx = 512, threads = 0;
  bool help = false;
};

Status parse(const std::vector<std::string>& args, Args* a) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    if (k == "--help" || k == "-h") {
      a->help = true;
      return Status::ok();
    }
    if (i + 1 >= args.size()) return Status::invalid_argument(k + " needs a value");
    const std::string& v = args[++i];
    Status ok;
    if (k == "--model" || k == "-m")
      a->model = v;
    else if (k == "--tokens-json")
      a->tokens_json = v;
    else if (k == "--logits-out")
      a->logits_out = v;
    else if (k == "--perplexity")
      a->perplexity = v;
    else if (k == "--dump-layers")
      a->dump_dir = v;
    else if (k == "--kv-type")
      a->kv_type = v;
    else if (k == "--isa")
      a->isa = v;
    else if (k == "--chunk")
      ok = parse_int_arg(k, v, 0, kMaxCliTokens, &a->chunk);
    else if (k == "--ctx")
      ok = parse_int_arg(k, v, 2, kMaxCliTokens, &a->ctx);
    else if (k == "--threads" || k == "-t")
      ok = parse_int_arg(k, v, 0, kMaxCliThreads, &a->threads);
    else
      return Status::invalid_argument("unknown option " + k);
    DS_RETURN_IF_ERROR(ok);
  }
  if (a->model.empty() || (a->perplexity.empty() && (a->tokens_json.empty() || a->logits_out.empty()))) {
    return Status::invalid_argument("needs --model and either --perplexity or both --tokens-json and --logits-out");
  }
  return Status::ok();
}

Result<std::unique_ptr<Runner>> make_runner(const Args& a, int64_t n_tokens, int batch) {
  auto model = Model::load(a.model);
  if (!model) return model.status();
  auto kv = parse_kv_type(a.kv_type);
  if (!kv) return kv.status();
  auto kt = kernels_by_name(a.isa);
  if (!kt) return kt.status();
  RunnerOptions o;
  o.n_threads = a.threads;
  o.kv_type = *kv;
  o.kv_block_size = 16;
  o.n_kv_blocks = static_cast<int>((n_tokens + 15) / 16) + 1;
  o.max_batch_tokens = batch;
  o.max_seq_tokens = static_cast<int>(n_tokens);
  o.kernels = *kt;
  return Runner::create(std::move(*model), o);
}

// Collects per-block tensors across steps (rows appended in step order).
struct LayerDump {
  std::map<std::string, std::vector<uint8_t>> files;
  TraceFn fn() {
    return [this](const char* name, int il, const void* data, int64_t rows, int64_t cols) {
      const bool ids = std::strcmp(name, "experts") == 0 || std::strcmp(name, "topk") == 0;
      auto& f = files["blk" + std::to_string(il) + "." + name + (ids ? ".i32" : ".f32")];
      const auto* p = static_cast<const uint8_t*>(data);
      f.insert(f.end(), p, p + rows * cols * 4);
    };
  }
  Status write(const std::string& dir) const {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    for (const auto& [name, bytes] : files) {
      std::ofstream out(dir + "/" + name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out) return Status::error("cannot write " + dir + "/" + name);
    }
    return Status::ok();
  }
};

// Logits of every token of `tokens` (sequence 0), fed `step` tokens at a time.
Status run_tokens(Runner& r, const std::vector<int32_t>& tokens, int64_t step, float* logits, const TraceFn* trace) {
  const int64_t n = static_cast<int64_t>(tokens.size()), V = r.model().hp().n_vocab;
  DS_RETURN_IF_ERROR(r.kv().reserve(0, static_cast<int32_t>(n)));
  for (int64_t p = 0; p < n; p += step) {
    const int64_t m = std::min(step, n - p);
    const SeqChunk ch{.seq_id = 0,
                      .tokens = std::span<const int32_t>(tokens.data() + p, static_cast<size_t>(m)),
                      .pos0 = static_cast<int32_t>(p),
                      .all_logits = true};
    DS_RETURN_IF_ERROR(r.step(std::span<const SeqChunk>(&ch, 1), logits + p * V, trace));
  }
  r.kv().release(0);
  return Status::ok();
}

Result<std::vector<int32_t>> read_tokens_json(const std::string& path) {
  auto text = read_regular_file(path);
  if (!text) return text.status();
  std::vector<int32_t> tokens;
  try {
    tokens = nlohmann::json::parse(*text).at("tokens").get<std::vector<int32_t>>();
  } catch (const std::exception& e) {
    return Status::error(path + ": no \"tokens\" array of ids (" + e.what() + ")");
  }
  if (tokens.empty()) return Status::error(path + " holds no tokens");
  return tokens;
}

Status eval_logits(const Args& a) {
  auto read = read_tokens_json(a.tokens_json);
  if (!read) return read.status();
  const std::vector<int32_t>& tokens = *read;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t step = a.chunk > 0 ? std::min<int64_t>(a.chunk, n) : std::min<int64_t>(n, 4096);
  auto r = make_runner(a, n, static_cast<int>(step));
  if (!r) return r.status();
  const int64_t V = (*r)->model().hp().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * V));
  LayerDump dump;
  const TraceFn trace = dump.fn();
  DS_RETURN_IF_ERROR(run_tokens(**r, tokens, step, logits.data(), a.dump_dir.empty() ? nullptr : &trace));
  std::ofstream out(a.logits_out, std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
  if (!out) return Status::error("cannot write " + a.logits_out);
  if (!a.dump_dir.empty()) DS_RETURN_IF_ERROR(dump.write(a.dump_dir));
  std::fprintf(stderr, "eval: %lld tokens x %lld logits -> %s (kv %s, isa %s)\n", static_cast<long long>(n),
               static_cast<long long>(V), a.logits_out.c_str(), a.kv_type.c_str(), isa_name((*r)->kernels().isa));
  return Status::ok();
}

Status eval_perplexity(const Args& a) {
  auto read = read_regular_file(a.perplexity);
  if (!read) return read.status();
  const std::string& text = *read;
  auto r = make_runner(a, a.ctx, a.chunk > 0 ? std::min(a.chunk, a.ctx) : a.ctx);
  if (!r) return r.status();
  auto tok = Tokenizer::from_gguf((*r)->model().file());
  if (!tok) return tok.status();
  auto ids = (*tok)->encode(text, true);
  if (!ids) return Status::error(a.perplexity + ": " + ids.message());
  if (ids->size() < 2) return Status::error(a.perplexity + " is too short to score");
  const int64_t V = (*r)->model().hp().n_vocab;
  const int64_t step = a.chunk > 0 ? std::min(a.chunk, a.ctx) : a.ctx;
  std::vector<float> logits(static_cast<size_t>(a.ctx) * static_cast<size_t>(V));
  double nll = 0.0;
  int64_t scored = 0;
  // Windows of --ctx tokens, each from an empty cache; every token after a window's first is scored.
  for (size_t w0 = 0; w0 + 1 < ids->size(); w0 += static_cast<size_t>(a.ctx)) {
    const size_t w1 = std::min(ids->size(), w0 + static_cast<size_t>(a.ctx));
    const std::vector<int32_t> win(ids->begin() + static_cast<std::ptrdiff_t>(w0),
                                   ids->begin() + static_cast<std::ptrdiff_t>(w1));
    if (win.size() < 2) break;
    DS_RETURN_IF_ERROR(run_tokens(**r, win, step, logits.data(), nullptr));
    for (size_t i = 0; i + 1 < win.size(); ++i) {
      const float* l = logits.data() + i * static_cast<size_t>(V);
      double mx = l[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
      nll += std::log(sum) + mx - l[win[i + 1]];
      ++scored;
    }
  }
  std::printf("perplexity: %.4f over %lld tokens (%zu tokens, window %d)\n",
              std::exp(nll / static_cast<double>(scored)), static_cast<long long>(scored), ids->size(), a.ctx);
  return Status::ok();
}

Status cmd_eval(const std::vector<std::string>& args) {
  Args a;
  DS_RETURN_IF_ERROR(parse(args, &a));
  if (a.help) {
    print_usage();
    return Status::ok();
  }
  return a.perplexity.empty() ? eval_logits(a) : eval_perplexity(a);
}

}  // namespace

DS_CLI_COMMAND(eval, "logits for token ids (refdata layout), per-block dumps, or perplexity over a text", cmd_eval);

}  // namespace ds::cli
