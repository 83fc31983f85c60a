// ds-cli quantize IN OUT TYPE: converts an F32/F16/BF16 GGUF model (one file or the
// first shard of a split model) into one GGUF file of a named mixture (quantize_mix.h).
// All metadata is copied in order, general.file_type is set, split.* keys are dropped (the
// output is one file); tensors stream through quantize_stream one batch of rows at a time,
// so memory use stays small whatever the model size. Every failure -- a broken input, an
// already-quantized input, NaN weights, a full disk -- is an error message and exit code 1,
// and never leaves a partial OUT behind.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"
#include "kernels/quant/quantize.h"
#include "tools/cli_args.h"
#include "tools/command.h"
#include "tools/quantize_mix.h"
#include "tools/quantize_stream.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: ds-cli quantize IN OUT TYPE [--threads N] [--tensor-type NAME=TYPE ...]\n"
               "  Quantizes an F32/F16/BF16 GGUF model IN (or the first shard of a split model) into\n"
               "  OUT. TYPE: %s.\n"
               "  The grid i-quants (IQ1_*, IQ2_*, IQ3_*) are read and synthesized but not quantized\n"
               "  (no importance matrix here); IQ4_NL, IQ4_XS and MXFP4_MOE are. Norms, biases, 1-D\n"
               "  tensors and the MoE router stay F32; the output head gets Q6_K (Q8_0 under Q8_0 and\n"
               "  MXFP4_MOE); rows not a multiple of the block size fall back to Q5_0 / Q5_1 / Q8_0 /\n"
               "  IQ4_NL / F16. --tensor-type gives every matrix whose name contains NAME the tensor\n"
               "  type TYPE (first match wins; repeatable). Progress goes to stderr.\n",
               quant_mix_names());
}

bool is_float_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

Result<MixModel> mix_model(const GgufFile& in) {
  MixModel m;
  const std::string arch = in.architecture();
  auto layers = in.get_int_or(arch + ".block_count", 0);
  if (!layers) return layers.status();
  auto experts = in.get_int_or(arch + ".expert_count", 0);
  if (!experts) return experts.status();
  m.n_layer = *layers;
  m.n_expert = *experts;
  m.has_output = in.tensor("output.weight") != nullptr;
  return m;
}

Status quantize_file(const std::string& in_path, const std::string& out_path, QuantMix mix,
                     const std::vector<TypeOverride>& overrides, int n_threads) {
  auto opened = GgufFile::open(in_path);
  if (!opened) return opened.status();
  const GgufFile& in = **opened;
  for (const auto& t : in.tensors()) {
    if (!is_float_type(t.type) && t.type != GgmlType::I32) {  // I32 tables are copied as they are
      return Status::error(in_path + ": tensor '" + t.name + "' is already quantized (" + ggml_type_name(t.type) +
                           "); quantize needs an F32, F16 or BF16 model");
    }
  }
  auto model = mix_model(in);
  if (!model) return model.status();

  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) {
    if (!starts_with(key, "split.")) w.set(key, value);
  }
  w.set("general.file_type", gguf_u32(quant_mix_file_type(mix)));
  w.set("general.quantization_version", gguf_u32(2));
  std::vector<GgmlType> types;
  for (const auto& t : in.tensors()) {
    const GgmlType type =
        t.type == GgmlType::I32 ? GgmlType::I32 : choose_tensor_type(mix, {t.name, t.n_dims, t.ne}, *model, overrides);
    if (type != GgmlType::I32 && !quantize_supported(type)) {
      return Status::error("tensor '" + t.name + "': ds-cli quantize cannot write " + ggml_type_name(type) +
                           " (the grid i-quants need an importance-matrix search; `ds-cli synth` writes random " +
                           "valid blocks of them)");
    }
    types.push_back(type);
    DS_RETURN_IF_ERROR(w.add_tensor(t.name, type, std::vector<int64_t>(t.ne, t.ne + t.n_dims)));
  }
  DS_RETURN_IF_ERROR(w.begin(out_path));
  const auto start = std::chrono::steady_clock::now();
  const size_t n = in.tensors().size();
  for (size_t k = 0; k < n; ++k) {
    const GgufTensorInfo& t = in.tensors()[k];
    std::fprintf(stderr, "[%4zu/%zu] %-36s %-4s -> %-4s %s\n", k + 1, n, t.name.c_str(), ggml_type_name(t.type),
                 ggml_type_name(types[k]), t.shape_string().c_str());
    if (t.type == GgmlType::I32) {  // deepseek4 ffn_gate_tid2eid: integer ids, not weights
      DS_RETURN_IF_ERROR(w.write_data(t.data, t.nbytes));
      continue;
    }
    const size_t in_row = t.row_bytes();
    auto source = [&](int64_t r0, int64_t nr, float* out) {
      for (int64_t r = 0; r < nr; ++r) {
        dequantize_row(t.type, t.data + static_cast<size_t>(r0 + r) * in_row, out + r * t.ne[0], t.ne[0]);
      }
      return Status::ok();
    };
    const Status s = stream_tensor(&w, {t.name, types[k], t.ne[0], t.n_rows()}, source, n_threads);
    if (!s.is_ok()) {
      w.abort();
      return Status::error(in_path + ": " + s.message());
    }
  }
  DS_RETURN_IF_ERROR(w.finish());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s: %s, %s in %.1f s (from %s)\n", out_path.c_str(), quant_mix_name(mix),
               human_bytes(static_cast<double>(std::filesystem::file_size(out_path))).c_str(), secs,
               human_bytes(static_cast<double>(in.total_file_bytes())).c_str());
  return Status::ok();
}

Status cmd_quantize(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  std::vector<TypeOverride> overrides;
  int n_threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      print_usage(stdout);
      return Status::ok();
    }
    if (args[i] == "--threads" && i + 1 < args.size()) {
      DS_RETURN_IF_ERROR(parse_int_arg(args[i], args[i + 1], 1, 1024, &n_threads));
      ++i;
    } else if (args[i] == "--tensor-type" && i + 1 < args.size()) {
      TypeOverride o;
      DS_RETURN_IF_ERROR(parse_type_override(args[++i], &o));
      overrides.push_back(std::move(o));
    } else if (starts_with(args[i], "--")) {
      return Status::invalid_argument("unknown or incomplete option '" + args[i] + "'");
    } else {
      pos.push_back(args[i]);
    }
  }
  if (pos.size() != 3)
    return Status::invalid_argument("wants IN OUT TYPE, got " + std::to_string(pos.size()) + " arguments");
  QuantMix mix;
  if (!parse_quant_mix(pos[2], &mix)) {
    return Status::invalid_argument("unknown TYPE '" + pos[2] + "' (one of " + quant_mix_names() + ")");
  }
  if (!quant_mix_quantizable(mix)) {
    return Status::invalid_argument(str_format(
        "%s is readable but not quantizable here (the grid i-quants need an importance-matrix lattice search); "
        "quantizable: Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, Q4_0, IQ4_NL, IQ4_XS, MXFP4_MOE, F16, BF16, F32; "
        "`ds-cli synth --type %s` writes random valid blocks",
        quant_mix_name(mix), quant_mix_name(mix)));
  }
  std::error_code ec;
  if (std::filesystem::equivalent(pos[0], pos[1], ec)) {
    return Status::invalid_argument("OUT must differ from IN (" + pos[1] + ")");
  }
  return quantize_file(pos[0], pos[1], mix, overrides, n_threads);
}

}  // namespace

DS_CLI_COMMAND(quantize, "quantize an F32/F16/BF16 GGUF model (Q4_K_M, Q5_K_S, Q3_K_M, Q2_K, Q8_0, Q4_0)",
               cmd_quantize);

}  // namespace ds::cli
