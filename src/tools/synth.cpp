// ds-cli synth: writes a random-weight model of a named DeepSeek-family shape, for demos,
// tests and benchmarks (the demo model of scripts/run.sh is made this way).
//
// Pipeline: shape keys (synth_shapes) -> --layers / --set overrides -> tokenizer keys
// (synth_vocab) -> derived keys -> tensor list -> types from the quantization mixture
// (quantize_mix) -> tensors generated row by row and quantized in memory on the fly
// (quantize_stream). Nothing but one batch of rows is ever held in memory, so even a
// full-size V3 file can be written on a small machine, given the disk.
//
// Weights: every element is ~N(0, 0.02) from a generator seeded by (--seed, tensor name,
// row), so a tensor's values do not depend on the other tensors or on threading; norms
// are 1 and rope_freqs holds Llama-3.1 frequency factors. With normalized activations this
// keeps every layer's output of the order of its input: the model runs stably. Tensors of
// the grid i-quants, which have no quantizer, are random valid blocks with the same RMS
// (synth_blocks.h).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant/quantize.h"
#include "model/hparams.h"
#include "tools/command.h"
#include "tools/quantize_mix.h"
#include "tools/quantize_stream.h"
#include "tools/synth_blocks.h"
#include "tools/synth_shapes.h"
#include "tools/synth_vocab.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

struct SynthOptions {
  std::string shape, out, vocab;
  QuantMix mix = QuantMix::kQ4_K_M;
  int64_t n_layers = 0;  // 0: the shape's
  uint64_t seed = 42;
  int n_threads = 0;
  bool dry_run = false;  // print what would be written, write nothing
  std::vector<std::string> sets;
  std::vector<TypeOverride> overrides;  // --tensor-type
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: ds-cli synth --shape NAME --out FILE [--type TYPE] [--tensor-type NAME=TYPE ...]\n"
               "                    [--layers N] [--seed S] [--vocab FILE] [--set KEY=VALUE ...]\n"
               "                    [--threads N] [--dry-run]\n"
               "  Writes a random-weight GGUF model of a named shape. TYPE: %s\n"
               "  (default Q4_K_M). --tensor-type gives every matrix whose name contains NAME the tensor\n"
               "  type TYPE (e.g. ffn_down_exps=IQ2_XXS; first match wins; repeatable). Tensors of the\n"
               "  grid i-quants (IQ1_*, IQ2_*, IQ3_*) are random valid blocks scaled to the weights' RMS;\n"
               "  every other type is quantized from N(0, 0.02) weights.\n"
               "  --layers overrides block_count; --set overrides any hyper-parameter\n"
               "  (KEY without a namespace means <arch>.KEY, or <arch>.attention.KEY / <arch>.rope.KEY where\n"
               "  that key exists, e.g. --set expert_count=32 or --set head_count=8); values a loader would\n"
               "  reject (head_count=0, rope freq_base=0) are an error. --vocab copies\n"
               "  the tokenizer of a GGUF file; without it a small byte-level BPE vocabulary is trained.\n"
               "  --dry-run prints the parameter count, file size and tensor types and writes nothing.\n"
               "shapes:\n",
               quant_mix_names());
  for (const auto& s : synth_shapes()) std::fprintf(out, "  %-22s %s\n", s.name, s.summary);
}

// splitmix64: a fast, well-mixed 64-bit generator step.
inline uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

// n approximately normal deviates: each is the sum of four 16-bit uniforms from one
// 64-bit draw (Irwin-Hall, variance 4/12 of the unit range), rescaled to stddev. Tails stop
// at about 3.5 sigma, which suits random weights and is several times faster than
// Box-Muller -- generation dominates the time of F16/Q8_0 synth models.
void fill_normal(uint64_t state, float stddev, float* out, int64_t n) {
  const float scale = stddev / (65536.0f * 0.57735027f);  // sqrt(4/12) = 0.577...
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(&state);
    const int32_t sum = static_cast<int32_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    out[i] = static_cast<float>(sum - 2 * 65535) * scale;
  }
}

// Llama-3.1 rope_freqs (factor 8, low/high frequency factors 1/4, original context 8192):
// 1 for short wavelengths, 8 for long ones, a smooth blend between.
void fill_rope_freqs(float base, float* out, int64_t n) {
  const double factor = 8.0, low = 1.0, high = 4.0, n_orig = 8192.0, kPi = 3.141592653589793;
  for (int64_t i = 0; i < n; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / (2.0 * n));
    const double wavelen = 2.0 * kPi / freq;
    double f = 1.0;
    if (wavelen > n_orig / low) {
      f = factor;
    } else if (wavelen >= n_orig / high) {
      const double smooth = (n_orig / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(f);
  }
}

Status build_metadata(const SynthOptions& o, GgufWriter* w, bool* rope_freqs) {
  w->set("general.architecture", gguf_str("llama"));  // replaced by the shape, keeps it first
  w->set("general.name", gguf_str("synthetic " + o.shape));
  DS_RETURN_IF_ERROR(synth_shape_metadata(o.shape, w, rope_freqs));
  const std::string arch = w->find("general.architecture")->str;
  if (o.n_layers > 0) {
    w->set(arch + ".block_count", gguf_u32(static_cast<uint32_t>(o.n_layers)));
    const int64_t dense = synth_int(*w, arch + ".leading_dense_block_count", -1);
    if (dense > o.n_layers) w->set(arch + ".leading_dense_block_count", gguf_u32(static_cast<uint32_t>(o.n_layers)));
  }
  for (const auto& s : o.sets) DS_RETURN_IF_ERROR(synth_apply_override(w, s));
  const int64_t vocab_hint = synth_int(*w, arch + ".vocab_size", 0);
  auto n_vocab = synth_tokenizer(w, o.vocab, vocab_hint);
  if (!n_vocab) return n_vocab.status();
  w->set("general.file_type", gguf_u32(quant_mix_file_type(o.mix)));
  w->set("general.quantization_version", gguf_u32(2));
  return synth_finalize_metadata(w, *n_vocab);
}

void print_plan(const std::vector<SynthTensor>& tensors, const std::vector<GgmlType>& types, uint64_t size) {
  double params = 0.0;
  std::map<std::string, std::pair<int, double>> by_type;  // name -> (count, elements)
  for (size_t k = 0; k < tensors.size(); ++k) {
    double n = 1.0;
    for (int64_t d : tensors[k].ne) n *= static_cast<double>(d);
    params += n;
    auto& e = by_type[ggml_type_name(types[k])];
    e.first += 1;
    e.second += n;
  }
  std::printf("tensors: %zu\nparameters: %.0f\nfile size: %" PRIu64 " bytes (%s)\n", tensors.size(), params, size,
              human_bytes(static_cast<double>(size)).c_str());
  for (const auto& [name, e] : by_type)
    std::printf("type %s: %d tensors, %.0f elements\n", name.c_str(), e.first, e.second);
}

// A grid i-quant tensor: random valid blocks (synth_blocks.h), row r seeded by (tensor, r),
// scaled to the RMS of the N(0, stddev) weights it stands for; written in batches of rows,
// each batch filled on n_threads threads.
Status write_random_blocks(GgufWriter* w, const SynthTensor& t, GgmlType type, int64_t n_rows, uint64_t tensor_seed,
                           int n_threads) {
  const size_t row_bytes = ggml_row_size(type, t.ne[0]);
  const float scale = static_cast<float>(t.stddev / random_block_unit_rms(type));
  const int64_t batch = std::max<int64_t>(1, static_cast<int64_t>((size_t{64} << 20) / row_bytes));
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(batch, n_rows)) * row_bytes);
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int64_t r0 = 0; r0 < n_rows; r0 += batch) {
    const int64_t nr = std::min(batch, n_rows - r0);
    const int nt = static_cast<int>(std::min<int64_t>(n_threads, nr));
    auto work = [&](int ith) {
      for (int64_t r = nr * ith / nt; r < nr * (ith + 1) / nt; ++r) {
        fill_random_blocks(type, tensor_seed + static_cast<uint64_t>(r0 + r) * 0xD1B54A32D192ED03ull, scale,
                           buf.data() + static_cast<size_t>(r) * row_bytes, t.ne[0]);
      }
    };
    std::vector<std::thread> threads;
    for (int ith = 1; ith < nt; ++ith) threads.emplace_back(work, ith);
    work(0);
    for (auto& th : threads) th.join();
    DS_RETURN_IF_ERROR(w->write_data(buf.data(), static_cast<size_t>(nr) * row_bytes));
  }
  return Status::ok();
}

// Generates one tensor row by row (seeded per row, see the top of the file) and streams
// it, quantized, into w.
Status write_tensor(GgufWriter* w, const SynthTensor& t, GgmlType type, const SynthOptions& o, float rope_base,
                    int64_t n_expert) {
  int64_t n_rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) n_rows *= t.ne[d];
  if (t.init == SynthInit::kExpertIds) {  // row v: experts (v * K + k) mod n_expert, distinct for K <= n_expert
    std::vector<int32_t> row(static_cast<size_t>(t.ne[0]));
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t k = 0; k < t.ne[0]; ++k)
        row[static_cast<size_t>(k)] = static_cast<int32_t>((r * t.ne[0] + k) % n_expert);
      DS_RETURN_IF_ERROR(w->write_data(row.data(), row.size() * sizeof(int32_t)));
    }
    return Status::ok();
  }
  const uint64_t tensor_seed = o.seed * 0x9E3779B97F4A7C15ull ^ name_hash(t.name);
  auto source = [&](int64_t r0, int64_t nr, float* out) {
    for (int64_t r = 0; r < nr; ++r) {
      float* row = out + r * t.ne[0];
      switch (t.init) {
        case SynthInit::kOnes:
          std::fill(row, row + t.ne[0], 1.0f);
          break;
        case SynthInit::kRopeFreqs:
          fill_rope_freqs(rope_base, row, t.ne[0]);
          break;
        case SynthInit::kExpertIds:
          break;  // written above
        case SynthInit::kNormal: {
          uint64_t s = tensor_seed + static_cast<uint64_t>(r0 + r) * 0xD1B54A32D192ED03ull;
          fill_normal(splitmix64(&s), t.stddev, row, t.ne[0]);
          break;
        }
      }
    }
    return Status::ok();
  };
  if (!quantize_supported(type)) return write_random_blocks(w, t, type, n_rows, tensor_seed, o.n_threads);
  return stream_tensor(w, {t.name, type, t.ne[0], n_rows}, source, o.n_threads);
}

// The metadata (--set overrides included) must load: written alone to a temporary file and
// read back with the loader's own validation, so that `--set head_count=0` is an error here
// rather than a model file that no server can load.
Status check_loadable(const GgufWriter& meta) {
  GgufWriter w;
  for (const auto& [k, v] : meta.metadata()) w.set(k, v);
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ds-synth-check-" + std::to_string(getpid()) + ".gguf");
  Status st = w.begin(tmp.string());
  if (st) st = w.finish();
  if (st) {
    auto f = GgufFile::open(tmp.string());
    auto hp = f ? load_hparams(**f) : Result<HParams>(f.status());
    if (!hp) st = hp.status();
  }
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  if (!st) {
    std::string msg = st.message();
    if (const size_t at = msg.rfind(" in " + tmp.string()); at != std::string::npos) msg.erase(at);
    return Status::error("the hyper-parameters do not make a loadable model: " + msg);
  }
  return Status::ok();
}

Status synth_model(const SynthOptions& o) {
  GgufWriter w;
  bool rope_freqs = false;
  DS_RETURN_IF_ERROR(build_metadata(o, &w, &rope_freqs));
  DS_RETURN_IF_ERROR(check_loadable(w));
  auto tensors = synth_tensors(w, rope_freqs);
  if (!tensors) return tensors.status();
  const std::string arch = w.find("general.architecture")->str;
  const MixModel model{synth_int(w, arch + ".block_count", 0), synth_int(w, arch + ".expert_count", 0), true};
  std::vector<GgmlType> types;
  for (const auto& t : *tensors) {
    types.push_back(
        t.init == SynthInit::kExpertIds
            ? GgmlType::I32
            : choose_tensor_type(o.mix, {t.name, static_cast<uint32_t>(t.ne.size()), t.ne.data()}, model, o.overrides));
    DS_RETURN_IF_ERROR(w.add_tensor(t.name, types.back(), t.ne));
  }
  const uint64_t size = w.file_size();
  if (o.dry_run) {
    print_plan(*tensors, types, size);
    return Status::ok();
  }
  const bool verbose = size > (uint64_t{256} << 20);
  std::fprintf(stderr, "synth %s (%s, %zu tensors, %s) -> %s\n", o.shape.c_str(), quant_mix_name(o.mix),
               tensors->size(), human_bytes(static_cast<double>(size)).c_str(), o.out.c_str());
  DS_RETURN_IF_ERROR(w.begin(o.out));
  const auto start = std::chrono::steady_clock::now();
  const GgufValue* base = w.find(arch + ".rope.freq_base");
  const float rope_base = base && base->is_float() ? static_cast<float>(base->f) : 10000.0f;
  for (size_t k = 0; k < tensors->size(); ++k) {
    const SynthTensor& t = (*tensors)[k];
    if (verbose) {
      std::fprintf(stderr, "[%4zu/%zu] %-36s %-4s\n", k + 1, tensors->size(), t.name.c_str(), ggml_type_name(types[k]));
    }
    const Status s = write_tensor(&w, t, types[k], o, rope_base, std::max<int64_t>(model.n_expert, 1));
    if (!s.is_ok()) {
      w.abort();
      return s;
    }
  }
  DS_RETURN_IF_ERROR(w.finish());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s in %.1f s\n", o.out.c_str(), secs);
  return Status::ok();
}

// Parses the command line; a usage error when malformed. *help is set by --help.
Status parse_args(const std::vector<std::string>& args, SynthOptions* o, bool* help) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return Status::ok();
    }
    if (a == "--dry-run") {
      o->dry_run = true;
      continue;
    }
    if (a != "--shape" && a != "--out" && a != "--type" && a != "--layers" && a != "--seed" && a != "--vocab" &&
        a != "--set" && a != "--threads" && a != "--tensor-type") {
      return Status::invalid_argument("unknown argument '" + a + "'");
    }
    if (i + 1 >= args.size()) return Status::invalid_argument(a + " needs a value");
    const std::string& v = args[++i];
    char* end = nullptr;
    if (a == "--shape")
      o->shape = v;
    else if (a == "--out")
      o->out = v;
    else if (a == "--vocab")
      o->vocab = v;
    else if (a == "--set")
      o->sets.push_back(v);
    else if (a == "--tensor-type") {
      TypeOverride t;
      DS_RETURN_IF_ERROR(parse_type_override(v, &t));
      o->overrides.push_back(std::move(t));
    } else if (a == "--type" && !parse_quant_mix(v, &o->mix)) {
      return Status::invalid_argument("unknown --type '" + v + "' (one of " + quant_mix_names() + ")");
    } else if (a == "--layers" || a == "--seed" || a == "--threads") {
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      const unsigned long long hi = a == "--seed" ? ~0ull : a == "--layers" ? 4096 : 1024;
      if (v.empty() || *end || v[0] == '-' || n > hi || (a != "--seed" && n == 0)) {
        return Status::invalid_argument("bad " + a + " value '" + v + "'");
      }
      if (a == "--layers")
        o->n_layers = static_cast<int64_t>(n);
      else if (a == "--seed")
        o->seed = n;
      else
        o->n_threads = static_cast<int>(n);
    }
  }
  if (o->shape.empty()) return Status::invalid_argument("needs --shape");
  if (o->out.empty() && !o->dry_run) return Status::invalid_argument("needs --out (or --dry-run)");
  return Status::ok();
}

Status cmd_synth(const std::vector<std::string>& args) {
  SynthOptions o;
  bool help = false;
  DS_RETURN_IF_ERROR(parse_args(args, &o, &help));
  if (help) {
    print_usage(stdout);
    return Status::ok();
  }
  return synth_model(o);
}

}  // namespace

DS_CLI_COMMAND(synth, "write a random-weight model of a named DeepSeek shape", cmd_synth);

}  // namespace ds::cli
