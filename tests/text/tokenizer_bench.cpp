// Tokenizer speed on ~100 KB of mixed English / Chinese / code text (seeded, generated here).
// Reported: encode with a cold word cache (a fresh tokenizer per iteration, load excluded) and
// with a warm one, for the deepseek-v3 and qwen2 (NFC) vocabularies. Target: well under 100 ms
// per 100 KB on one core.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"

namespace {

std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("DS_SHARED");
  return std::string(env && *env ? env : DS_SHARED_DEFAULT) + "/" + rel;
}

std::string make_text(size_t target_bytes, uint32_t seed) {
  static const char* en[] = {"the",      "model",    "server", "runs",    "fast",      "on",      "every",
                             "CPU",      "with",     "tokens", "and",     "quantized", "weights", "while",
                             "users",    "wait",     "for",    "answers", "about",     "science", "history",
                             "language", "Internet", "is",     "a",       "of",        "to",      "in",
                             "that",     "it",       "was",    "not",     "they",      "Hello",   "world"};
  static const char* zh[] = {"我们", "模型", "服务器", "今天", "天气", "很好", "深度", "求索", "人工",
                             "智能", "语言", "中文",   "测试", "数据", "计算", "快速", "问题", "回答"};
  static const char* code[] = {"    for (int i = 0; i < n; ++i) sum += a[i] * b[i];\n",
                               "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
                               "\tif (x->next != nullptr) { x = x->next; }\n",
                               "const auto result = std::make_unique<Buffer>(size_t{4096});\n",
                               "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;\n"};
  std::mt19937 rng(seed);
  auto pick = [&](auto& arr) { return arr[rng() % (sizeof(arr) / sizeof(arr[0]))]; };
  std::string text;
  while (text.size() < target_bytes) {
    const uint32_t kind = rng() % 10;
    if (kind < 4) {
      for (int w = 0; w < 12; ++w) {
        text += pick(en);
        text += (w % 5 == 4) ? ", " : " ";
      }
      text += std::to_string(rng() % 10000) + ".\n";
    } else if (kind < 7) {
      for (int w = 0; w < 10; ++w) text += pick(zh);
      text += "，" + std::to_string(rng() % 2025) + "年。\n";
    } else {
      text += pick(code);
    }
  }
  return text;
}

// Worst case for the word cache: random letter strings and random CJK ideographs, so almost
// every word is new.
std::string make_unique_words_text(size_t target_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < target_bytes) {
    if (rng() % 3 == 0) {
      for (int k = 0; k < 6; ++k) {
        const uint32_t cp = 0x4E00 + rng() % (0x9FA5 - 0x4E00);
        text += static_cast<char>(0xE0 | (cp >> 12));
        text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      const int len = 2 + static_cast<int>(rng() % 9);
      for (int k = 0; k < len; ++k) text += static_cast<char>('a' + rng() % 26);
    }
    text += rng() % 8 == 0 ? ".\n" : " ";
  }
  return text;
}

std::unique_ptr<ds::Tokenizer> load(const char* vocab) {
  auto file = ds::GgufFile::open(shared_path(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf"));
  if (!file) throw std::runtime_error(file.message());
  auto tok = ds::Tokenizer::from_gguf(**file);
  if (!tok) throw std::runtime_error(tok.message());
  return std::move(tok).value();
}

void encode_100kb(benchmark::State& state, const char* vocab, bool cold, bool unique_words = false) {
  const std::string text = unique_words ? make_unique_words_text(100 * 1024, 7) : make_text(100 * 1024, 42);
  auto tok = load(vocab);
  size_t n_tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      tok = load(vocab);
      state.ResumeTiming();
    }
    auto ids = tok->encode(text, false);
    n_tokens = ids->size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}

void decode_100kb(benchmark::State& state, const char* vocab) {
  auto tok = load(vocab);
  const auto ids = tok->encode(make_text(100 * 1024, 42), false).value();
  for (auto _ : state) {
    ds::StreamDecoder dec(*tok);
    std::string out;
    for (int32_t id : ids) out += dec.push(id);
    benchmark::DoNotOptimize(out);
  }
}

BENCHMARK_CAPTURE(encode_100kb, deepseek_v3_cold, "deepseek-v3", true)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_CAPTURE(encode_100kb, deepseek_v3_warm, "deepseek-v3", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_100kb, qwen2_cold, "qwen2", true)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_CAPTURE(encode_100kb, qwen2_warm, "qwen2", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_100kb, deepseek_llm_cold, "deepseek-llm", true)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_CAPTURE(encode_100kb, deepseek_v3_unique_words_cold, "deepseek-v3", true, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(decode_100kb, deepseek_v3_stream, "deepseek-v3")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
