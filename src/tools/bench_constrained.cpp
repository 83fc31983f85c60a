// Constrained-decoding benchmark; see bench_constrained.h. A complete document (the grammar
// reached its end and EOS was sampled) starts a fresh matcher, so the run always covers
// n_gen tokens of structured output.
#include "tools/bench_constrained.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "ds/tokenizer.h"
#include "runtime/sampler.h"

namespace ds::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct DecodeRun {
  double seconds = 0;
  int64_t masks = 0, hits = 0;
  double mask_ms = 0, miss_ms = 0;
  int n_outputs = 0;
};

Result<DecodeRun> decode(Engine& e, int n_gen, const std::shared_ptr<const constrain::Constraint>& c) {
  const int n_vocab = e.info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  DS_RETURN_IF_ERROR(e.seq_reserve(0, n_gen + 1));
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 1234;
  sp.constraint = c;
  auto sampler = std::make_unique<Sampler>(sp, n_vocab);
  DecodeRun r;
  auto collect = [&] {
    if (!sampler->matcher()) return;
    const auto& st = sampler->matcher()->stats();
    r.masks += st.masks;
    r.hits += st.cache_hits;
    r.mask_ms += st.mask_ms;
    r.miss_ms += st.miss_ms;
  };
  int32_t token = e.info().bos >= 0 ? e.info().bos : 0;
  Status st;
  const double t0 = now_s();
  for (int it = 0; it < n_gen && st.is_ok(); ++it) {
    const SeqChunk chunk{.seq_id = 0, .tokens = std::span(&token, 1), .pos0 = it};
    st = e.step(std::span(&chunk, 1), logits.data());
    if (!st) break;
    int32_t next = sampler->sample(logits.data());
    if (c && (next < 0 || e.tokenizer().is_eog(next))) {  // a document is complete: start the next
      ++r.n_outputs;
      collect();
      sp.seed += 1;
      sampler = std::make_unique<Sampler>(sp, n_vocab);
      if (next < 0) next = token;
    }
    token = next;
  }
  r.seconds = now_s() - t0;
  collect();
  e.seq_release(0);
  if (!st) return st;
  return r;
}

}  // namespace

Result<ConstrainedBench> bench_constrained(Engine& e, const std::string& schema_path, int n_gen) {
  std::ifstream in(schema_path);
  if (!in) return Status::error("--json-schema: cannot read " + schema_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto schema = nlohmann::ordered_json::parse(ss.str(), nullptr, false);
  if (schema.is_discarded()) return Status::error("--json-schema: " + schema_path + " is not JSON");
  auto gbnf = constrain::json_schema_to_gbnf(schema);
  if (!gbnf) return Status::error("--json-schema: " + gbnf.message());
  auto g = constrain::parse_gbnf(gbnf.value());
  if (!g) return Status::error("--json-schema: " + g.message());
  const Tokenizer& tok = e.tokenizer();
  const double t_vocab = now_s();
  auto vocab = constrain::TokenVocab::build(
      tok.n_vocab(), [&](int32_t id) { return tok.is_special(id) ? std::string() : tok.token_bytes(id); },
      [&](int32_t id) { return tok.is_eog(id); });
  std::fprintf(stderr, "bench: vocabulary trie of %d tokens (%zu nodes) built in %.1f ms\n", tok.n_vocab(),
               vocab->nodes.size(), (now_s() - t_vocab) * 1e3);
  auto c = std::make_shared<const constrain::Constraint>(std::move(g).value(), vocab);
  auto free_run = decode(e, n_gen, nullptr);
  if (!free_run) return free_run.status();
  auto con = decode(e, n_gen, c);
  if (!con) return con.status();
  ConstrainedBench b;
  b.free_tps = n_gen / free_run->seconds;
  b.constrained_tps = n_gen / con->seconds;
  b.mask_ms = con->masks ? con->mask_ms / static_cast<double>(con->masks) : 0;
  const int64_t misses = con->masks - con->hits;
  b.miss_mask_ms = misses ? con->miss_ms / static_cast<double>(misses) : 0;
  b.hit_rate = con->masks ? static_cast<double>(con->hits) / static_cast<double>(con->masks) : 0;
  b.n_outputs = con->n_outputs;
  return b;
}

}  // namespace ds::cli
