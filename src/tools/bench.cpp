// ds-cli bench: prefill and decode speed of a model, and this machine's limits measured in
// the same run (read bandwidth, int8 dot-product peak; also the float32 FMA peak, the
// roofline of attention), so that results are reported as fractions of the roofline
// rather than as bare tokens per second.
//   decode roofline  = tg_tps * bytes read per token / bandwidth: the weights (experts
//                      counted only in the share a token selects) plus the KV cache rows
//                      the attention reads at the decode depth (Engine::decode_kv_bytes)
//   prefill roofline = pp_tps * int8 ops per token / int8 peak (2 ops per multiply-add)
// Each repeat is divided by the limit read just before and after it (see cmd_bench).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ds/engine.h"
#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "tools/machine_limits.h"
#include "runtime/thread_pool.h"
#include "tools/bench_constrained.h"
#include "tools/command.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

struct BenchArgs {
  std::string model;
  int n_prompt = 512;
  int n_gen = 128;
  int n_threads = 0;
  int batch = 8;
  int depth = 0;            // context tokens already in the cache when the decode tests start
  int chunk = 0;            // tokens per prefill step (0: the whole prompt in one step)
  bool fast_depth = false;  // the -d context is not computed (cache rows left as they are)
  int repeats = 3;
  bool json = false;
  bool profile = false;
  bool limits = true;
  bool repack = true;
  std::string kv_type = "f16";
  std::string json_schema;  // --json-schema: the constrained-decoding test
  bool help = false;
};

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Weight bytes and int8 ops one token touches: every matrix once, experts in the share
// n_expert_used / n_expert, the embedding table as one row. head_ops: the output head's
// part of ops_per_token, which a prefill computes for the prompt's last token only.
struct ModelCost {
  double bytes_per_token = 0;
  double ops_per_token = 0;
  double head_ops = 0;
  // int8 ops per prompt token of an n-token prefill: the trunk for every token, the head once.
  double prefill_ops_per_token(int n) const { return ops_per_token - head_ops + head_ops / std::max(n, 1); }
};

ModelCost model_cost(const GgufFile& f) {
  ModelCost c;
  const std::string arch = f.architecture();
  const double n_exp = static_cast<double>(f.get_int_or(arch + ".expert_count", 0).value());
  const double n_used = static_cast<double>(f.get_int_or(arch + ".expert_used_count", 0).value());
  // MTP blocks stored after the trunk (nextn_predict_layers) are not part of a decode step.
  const int64_t n_trunk =
      f.get_int_or(arch + ".block_count", 0).value() - f.get_int_or(arch + ".nextn_predict_layers", 0).value();
  for (const auto& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && std::strtoll(t.name.c_str() + 4, nullptr, 10) >= n_trunk) continue;
    double bytes = static_cast<double>(t.nbytes), params = static_cast<double>(t.n_elements());
    if (t.name == "token_embd.weight") {
      bytes /= static_cast<double>(t.ne[1]);
      params = 0;
      if (!f.tensor("output.weight")) params = static_cast<double>(t.n_elements());  // tied head
    }
    if (t.name.find("_exps") != std::string::npos && n_exp > 0) {
      bytes *= n_used / n_exp;
      params *= n_used / n_exp;
    }
    if (t.n_dims < 2) params = 0;  // norms and biases: no multiply-adds worth counting
    c.bytes_per_token += bytes;
    c.ops_per_token += 2.0 * params;
    if (t.name == "output.weight" || (t.name == "token_embd.weight" && params > 0)) c.head_ops += 2.0 * params;
  }
  return c;
}

void usage() {
  std::printf(
      "usage: ds-cli bench --model FILE [-p N] [-n N] [-d D] [-t N] [--batch B] [--repeats R] [--kv-type T]\n"
      "                    [--chunk C] [--json] [--profile] [--no-limits]\n"
      "  -p N         prompt tokens for the prefill test (default 512)\n"
      "  -n N         tokens to decode for the decode tests (default 128)\n"
      "  -t N         threads (default: one per physical core)\n"
      "  -d, --depth D  the single-sequence decode test (and its profile) starts after D context\n"
      "               tokens (prefilled untimed); its roofline counts the weight bytes and the KV\n"
      "               cache bytes a decode step reads at that depth (default 0)\n"
      "  --fast-depth skip computing the -d context: decoding starts at position D over cache rows\n"
      "               left as the pool holds them (zeros or earlier tests' rows); a step reads and\n"
      "               computes as much as after a real prefill, but the logits mean nothing\n"
      "  --chunk C    prefill (the prompt and the -d context) C tokens per step (default: the\n"
      "               whole prompt in one step); bounds the scratch memory of long prompts\n"
      "  --batch B    concurrent sequences for the aggregate decode test (default 8; 0 skips it)\n"
      "  --repeats R  repeats of each test; medians are reported with min..max (default 3)\n"
      "  --kv-type T  KV cache type f32|f16|bf16|q8_0 (default f16)\n"
      "  --json       one line with one JSON object (pp_tps, tg_tps, batch_tg_tps, bandwidth_gbs,\n"
      "               int8_gops, fp32_gflops, bf16_gflops, tg_roofline, pp_roofline, ...)\n"
      "  --profile    break one prefill chunk, a decode step and (with --batch) a batched decode\n"
      "               step down by stage (decode steps: mean of 8)\n"
      "  --no-limits  skip measuring bandwidth and the peaks (rooflines then read 0)\n"
      "  --no-repack  keep the quantized weights in the file's layout (as ds-server --no-repack)\n"
      "  --json-schema FILE  only the constrained-decoding test: n tokens sampled and fed back, without\n"
      "               and with the schema's grammar; speeds and the token-mask cost per token\n");
}

Status parse(const std::vector<std::string>& a, BenchArgs* b) {
  for (size_t i = 0; i < a.size(); ++i) {
    auto val = [&](int* out) {
      if (i + 1 >= a.size()) return false;
      char* end = nullptr;
      long v = std::strtol(a[++i].c_str(), &end, 10);
      if (*end || v < 0 || v > 1000000) return false;
      *out = static_cast<int>(v);
      return true;
    };
    const std::string& s = a[i];
    bool ok = true;
    if (s == "--help" || s == "-h") {
      b->help = true;
      return Status::ok();
    } else if (s == "--model" || s == "-m") {
      ok = i + 1 < a.size();
      if (ok) b->model = a[++i];
    } else if (s == "-p")
      ok = val(&b->n_prompt);
    else if (s == "-n")
      ok = val(&b->n_gen);
    else if (s == "-t" || s == "--threads")
      ok = val(&b->n_threads);
    else if (s == "--batch")
      ok = val(&b->batch);
    else if (s == "--depth" || s == "-d")
      ok = val(&b->depth);
    else if (s == "--chunk")
      ok = val(&b->chunk);
    else if (s == "--fast-depth")
      b->fast_depth = true;
    else if (s == "--repeats")
      ok = val(&b->repeats);
    else if (s == "--kv-type") {
      ok = i + 1 < a.size();
      if (ok) b->kv_type = a[++i];
    } else if (s == "--json")
      b->json = true;
    else if (s == "--profile")
      b->profile = true;
    else if (s == "--no-limits")
      b->limits = false;
    else if (s == "--no-repack")
      b->repack = false;
    else if (s == "--json-schema") {
      ok = i + 1 < a.size();
      if (ok) b->json_schema = a[++i];
    } else
      return Status::invalid_argument("unknown option " + s);
    if (!ok) return Status::invalid_argument("bad or missing value for " + s);
  }
  if (b->model.empty()) return Status::invalid_argument("needs --model");
  if (b->n_prompt < 1 || b->n_gen < 1 || b->repeats < 1) {
    return Status::invalid_argument("-p, -n and --repeats must be at least 1");
  }
  return Status::ok();
}

std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
  return t;
}

// Prefill of the prompt, `chunk` tokens per step (0: one step); returns seconds.
Result<double> run_prefill(Engine& e, std::span<const int32_t> toks, std::vector<float>& logits, int chunk = 0) {
  DS_RETURN_IF_ERROR(e.seq_reserve(0, static_cast<int32_t>(toks.size())));
  const int n = static_cast<int>(toks.size()), step = chunk > 0 ? chunk : n;
  const double t0 = now_s();
  Status s;
  for (int p0 = 0; p0 < n && s.is_ok(); p0 += step) {
    const SeqChunk c{.seq_id = 0, .tokens = toks.subspan(p0, std::min(step, n - p0)), .pos0 = p0};
    s = e.step(std::span(&c, 1), logits.data());
  }
  const double dt = now_s() - t0;
  e.seq_release(0);
  if (!s) return s;
  return dt;
}

// n_seq sequences decode n_gen tokens each, one token per sequence per step, after `depth`
// random context tokens (prefilled untimed, in chunks of `chunk` tokens; with `fast`, not
// computed: one untimed step at position depth - 1 touches the cache, then the timed steps
// run over rows whose values do not change what a step reads or computes); returns seconds
// for the decode steps.
Result<double> run_decode(Engine& e, int n_seq, int n_gen, int n_vocab, std::vector<float>& logits, int depth = 0,
                          int chunk = 512, bool fast = false) {
  for (int s = 0; s < n_seq; ++s) {
    Status st = e.seq_reserve(s, depth + n_gen);
    if (!st) {
      for (int k = 0; k < s; ++k) e.seq_release(k);
      return st;
    }
  }
  std::vector<int32_t> toks = random_tokens(n_seq * n_gen, n_vocab, 42);
  std::vector<SeqChunk> chunks(n_seq);
  Status st;
  if (depth > 0) {
    const std::vector<int32_t> ctx = random_tokens(depth, n_vocab, 43);
    for (int s = 0; s < n_seq && st.is_ok(); ++s)
      for (int p0 = fast ? depth - 1 : 0; p0 < depth && st.is_ok(); p0 += chunk) {
        const SeqChunk c{.seq_id = s, .tokens = std::span(ctx).subspan(p0, std::min(chunk, depth - p0)), .pos0 = p0};
        st = e.step(std::span(&c, 1), logits.data());
      }
    e.profile_reset();  // a profile covers the decode steps only
  }
  const double t0 = now_s();
  for (int it = 0; it < n_gen && st.is_ok(); ++it) {
    for (int s = 0; s < n_seq; ++s) {
      chunks[s] = {.seq_id = s, .tokens = std::span(&toks[static_cast<size_t>(s * n_gen + it)], 1), .pos0 = depth + it};
    }
    st = e.step(chunks, logits.data());
  }
  const double dt = now_s() - t0;
  for (int s = 0; s < n_seq; ++s) e.seq_release(s);
  if (!st) return st;
  return dt;
}

// Stage times of the engine's profile divided by n_steps (a mean step).
void print_profile(const char* what, const Engine& e, int n_steps = 1) {
  auto p = e.profile();
  for (auto& [name, secs] : p) secs /= n_steps;
  double total = 0;
  for (const auto& [name, secs] : p) total += secs;
  std::printf("profile of %s (%.2f ms):\n", what, total * 1e3);
  if (p.empty()) std::printf("  (this engine reports no stage times)\n");
  for (const auto& [name, secs] : p) {
    std::printf("  %-14s %9.3f ms  %5.1f%%\n", name.c_str(), secs * 1e3, total > 0 ? 100.0 * secs / total : 0.0);
  }
}

Status cmd_bench(const std::vector<std::string>& args) {
  BenchArgs b;
  DS_RETURN_IF_ERROR(parse(args, &b));
  if (b.help) {
    usage();
    return Status::ok();
  }

  auto file = GgufFile::open(b.model);
  if (!file) return file.status();
  const ModelCost cost = model_cost(**file);

  const int n_par = std::max(1, b.batch) + 1;
  EngineOptions eo;
  eo.model_path = b.model;
  eo.n_ctx = std::max(b.n_prompt, b.depth + b.n_gen) + 16;
  eo.n_parallel = n_par;
  eo.n_threads = b.n_threads;
  eo.repack = b.repack;
  eo.kv_type = b.kv_type;
  eo.max_batch_tokens = std::max(b.chunk > 0 ? std::min(b.chunk, b.n_prompt) : b.n_prompt, std::max(1, b.batch));
  auto engine = Engine::create(eo);
  if (!engine) return engine.status();
  Engine& e = **engine;
  const int n_vocab = e.info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(std::max(1, b.batch)) * static_cast<size_t>(n_vocab));
  if (!b.json_schema.empty()) {
    std::vector<double> free, con, ratio;
    ConstrainedBench last;
    for (int r = 0; r < b.repeats; ++r) {
      auto cb = bench_constrained(e, b.json_schema, b.n_gen);
      if (!cb) return cb.status();
      free.push_back(cb->free_tps);
      con.push_back(cb->constrained_tps);
      ratio.push_back(cb->constrained_tps / cb->free_tps);
      last = *cb;
    }
    const Stats sf = stats_of(free), sc = stats_of(con), sr = stats_of(ratio);
    std::printf("constrained decode, %d tokens, %d repeats (%s)\n", b.n_gen, b.repeats, b.json_schema.c_str());
    std::printf("  unconstrained  %8.2f t/s (%.2f..%.2f)\n", sf.median, sf.min, sf.max);
    std::printf("  json_schema    %8.2f t/s (%.2f..%.2f), %.1f%% of unconstrained (%.1f..%.1f%%)\n", sc.median, sc.min,
                sc.max, 100 * sr.median, 100 * sr.min, 100 * sr.max);
    std::printf("  mask per token %.3f ms (%.0f%% from the cache; a trie walk %.3f ms); %d documents completed\n",
                last.mask_ms, 100 * last.hit_rate, last.miss_mask_ms, last.n_outputs);
    return Status::ok();
  }

  // The cache rows a decode step reads, at the mean context of the timed steps.
  const double kv_bytes = e.decode_kv_bytes(b.depth + b.n_gen / 2);
  std::vector<double> pp, tg, btg;
  const auto prompt = random_tokens(b.n_prompt, n_vocab, 7);
  // Warm-up (not timed): faults in the mmapped weights and the scratch buffers (one step).
  const auto warm = std::span(prompt).first(static_cast<size_t>(std::min(b.n_prompt, eo.max_batch_tokens)));
  if (auto w = run_prefill(e, warm, logits); !w) return Status::error("prefill: " + w.message());
  (void)run_decode(e, 1, std::min(b.n_gen, 4), n_vocab, logits);

  // The limits are read next to the runs they are compared with, because this kind of host
  // swings between states within minutes: the int8 peak just before and just after each
  // prefill repeat, the bandwidth probe just before and just after each decode repeat. Each
  // repeat's roofline divides by the mean of its own two readings; the reported limits and
  // rooflines are medians over the repeats. (With -d, the untimed context prefill runs
  // between the first reading and the timed decode. The probe's own pool sleeps at once
  // when idle, so it does not spin on the cores the engine's steps run on.)
  std::unique_ptr<ThreadPool> pool;
  std::optional<BandwidthProbe> probe;
  PeakOptions popts{.repeats = 3};
  if (b.limits) {
    auto created = ThreadPool::create({.n_threads = b.n_threads, .spin_us = 0});
    if (!created) return created.status();
    pool = std::move(*created);
    auto p = BandwidthProbe::create(*pool);
    if (!p) return p.status();
    probe.emplace(std::move(*p));
    // The limits of the kernels that ran: under DS_ISA=avx2 the AVX2 loops, not VNNI's.
    popts.allow_avx512 = kern().isa >= Isa::kAvx512;
  }
  constexpr int kProbeRepeats = 3;
  auto bandwidth_now = [&] { return probe ? probe->measure(kProbeRepeats).gbs.median : 0.0; };
  std::string peak_isa = "-";
  auto int8_now = [&] {
    if (!pool) return 0.0;
    const Int8PeakResult r = measure_int8_peak(*pool, popts);
    peak_isa = r.isa;
    return r.gops.median;
  };
  std::vector<double> bws, gopss, tg_roofs, pp_roofs;
  for (int r = 0; r < b.repeats; ++r) {
    const double g0 = int8_now();
    auto p = run_prefill(e, prompt, logits, b.chunk);
    if (!p) return Status::error("prefill: " + p.message());
    const double g = 0.5 * (g0 + int8_now());
    pp.push_back(b.n_prompt / *p);
    if (g > 0) {
      gopss.push_back(g);
      pp_roofs.push_back(pp.back() * cost.prefill_ops_per_token(b.n_prompt) / (g * 1e9));
    }
    const double bw0 = bandwidth_now();
    auto t = run_decode(e, 1, b.n_gen, n_vocab, logits, b.depth, eo.max_batch_tokens, b.fast_depth);
    if (!t) return Status::error("decode: " + t.message());
    const double bw = 0.5 * (bw0 + bandwidth_now());
    tg.push_back(b.n_gen / *t);
    if (bw > 0) {
      bws.push_back(bw);
      tg_roofs.push_back(tg.back() * (cost.bytes_per_token + kv_bytes) / (bw * 1e9));
    }
    if (b.batch > 0) {
      auto bt = run_decode(e, b.batch, b.n_gen, n_vocab, logits);
      if (!bt) return Status::error("batched decode: " + bt.message());
      btg.push_back(static_cast<double>(b.batch) * b.n_gen / *bt);
    }
  }
  const double gflops = pool ? measure_fp32_peak(*pool, popts).gflops.median : 0;
  const double bf16_gflops = pool ? measure_bf16_peak(*pool, popts).gflops.median : 0;
  const Stats spp = stats_of(pp), stg = stats_of(tg), sbtg = stats_of(btg);
  const Stats sbw = stats_of(bws), sgops = stats_of(gopss);
  const double bw = sbw.median, gops = sgops.median;
  const double tg_roof = stats_of(tg_roofs).median, pp_roof = stats_of(pp_roofs).median;

  if (b.json) {
    std::printf(
        "{\"model\":\"%s\",\"n_threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"batch\":%d,\"pp_tps\":%.3f,"
        "\"depth\":%d,\"pp_tps_min\":%.3f,\"pp_tps_max\":%.3f,\"tg_tps\":%.3f,\"tg_tps_min\":%.3f,\"tg_tps_max\":%.3f,"
        "\"batch_tg_tps\":%.3f,\"bandwidth_gbs\":%.3f,\"bandwidth_gbs_min\":%.3f,\"bandwidth_gbs_max\":%.3f,"
        "\"int8_gops\":%.3f,\"int8_gops_min\":%.3f,\"int8_gops_max\":%.3f,\"fp32_gflops\":%.3f,\"bf16_gflops\":%.3f,"
        "\"bytes_per_token\":%.0f,\"kv_bytes_per_token\":%.0f,\"ops_per_token\":%.0f,"
        "\"prefill_ops_per_token\":%.0f,\"tg_roofline\":%.4f,\"pp_roofline\":%.4f}\n",
        escape_for_display(b.model).c_str(), b.n_threads, b.n_prompt, b.n_gen, b.batch, spp.median, b.depth, spp.min,
        spp.max, stg.median, stg.min, stg.max, sbtg.median, bw, sbw.min, sbw.max, gops, sgops.min, sgops.max, gflops,
        bf16_gflops, cost.bytes_per_token, kv_bytes, cost.ops_per_token, cost.prefill_ops_per_token(b.n_prompt),
        tg_roof, pp_roof);
  } else {
    std::printf(
        "model: %s (%s, %s of weights + %s of KV cache read per decoded token, %.2f GOP per prefill "
        "token)\n",
        b.model.c_str(), e.info().arch.c_str(), human_bytes(cost.bytes_per_token).c_str(),
        human_bytes(kv_bytes).c_str(), cost.prefill_ops_per_token(b.n_prompt) / 1e9);
    std::printf(
        "machine: read bandwidth %.1f GB/s (%.1f..%.1f), int8 peak %.0f GOPS (%.0f..%.0f, %s), "
        "fp32 FMA peak %.0f GFLOPS, bf16 dot peak %s\n",
        bw, sbw.min, sbw.max, gops, sgops.min, sgops.max, peak_isa.c_str(), gflops,
        bf16_gflops > 0 ? (std::to_string(static_cast<int>(bf16_gflops + 0.5)) + " GFLOPS").c_str() : "-");
    std::printf("  (read just before and after every decode / prefill repeat; each repeat's roofline uses its own)\n");
    std::printf("%-22s %10s %20s %10s\n", "test", "t/s", "min..max", "roofline");
    std::printf("%-22s %10.2f %9.2f..%-10.2f %9.1f%%\n", ("pp" + std::to_string(b.n_prompt)).c_str(), spp.median,
                spp.min, spp.max, 100 * pp_roof);
    const std::string tg_name = "tg" + std::to_string(b.n_gen) + (b.depth ? " @ d" + std::to_string(b.depth) : "");
    std::printf("%-22s %10.2f %9.2f..%-10.2f %9.1f%%\n", tg_name.c_str(), stg.median, stg.min, stg.max, 100 * tg_roof);
    if (!tg_roofs.empty()) {  // each repeat against its own probe readings, in run order
      std::printf("  %s per repeat:", tg_name.c_str());
      for (size_t r = 0; r < tg_roofs.size(); ++r)
        std::printf(" %.1f t/s at %.1f GB/s (%.0f%%)%s", tg[r], bws[r], 100 * tg_roofs[r],
                    r + 1 < tg_roofs.size() ? "," : "\n");
    }
    if (b.batch > 0) {
      std::printf("%-22s %10.2f %9.2f..%-10.2f %9.2fx\n", ("tg x" + std::to_string(b.batch) + " aggregate").c_str(),
                  sbtg.median, sbtg.min, sbtg.max, stg.median > 0 ? sbtg.median / stg.median : 0.0);
    }
  }
  if (b.profile) {
    e.set_profiling(true);
    e.profile_reset();
    (void)run_prefill(e, warm, logits);
    print_profile(("one prefill chunk of " + std::to_string(warm.size()) + " tokens").c_str(), e);
    constexpr int kSteps = 8;
    e.profile_reset();
    (void)run_decode(e, 1, kSteps, n_vocab, logits, b.depth, eo.max_batch_tokens, b.fast_depth);
    print_profile("one decode step (mean of 8)", e, kSteps);
    if (b.batch > 0) {
      e.profile_reset();
      (void)run_decode(e, b.batch, kSteps, n_vocab, logits);
      print_profile(("one decode step of " + std::to_string(b.batch) + " sequences (mean of 8)").c_str(), e, kSteps);
    }
    e.set_profiling(false);
  }
  return Status::ok();
}

}  // namespace

DS_CLI_COMMAND(bench, "measure prefill and decode speed against this machine's bandwidth and int8 limits", cmd_bench);

}  // namespace ds::cli
