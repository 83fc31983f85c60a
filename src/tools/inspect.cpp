// ds-cli inspect FILE: what a GGUF file holds -- architecture, hyper-parameters, tokenizer,
// tensor table, file type, size and shards. Reads through GgufFile, so a broken file gets
// the reader's error message and exit code 1.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tools/command.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

// general.file_type values (llama_ftype) for the types users meet. A file type names the
// preset's mixture; the per-tensor types are what the loader reads.
const char* file_type_name(int64_t ft) {
  static const std::map<int64_t, const char*> names = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},    {9, "Q5_1"},
      {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},   {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
      {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"},  {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},
      {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},    {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"},
      {31, "IQ1_M"},  {32, "BF16"},   {38, "MXFP4_MOE"}};
  auto it = names.find(ft);
  return it == names.end() ? "unknown" : it->second;
}

void print_usage() {
  std::printf(
      "usage: ds-cli inspect FILE [--metadata] [--no-tensors] [--check]\n"
      "  Prints the architecture, hyper-parameters, tokenizer summary, tensor table (name, type,\n"
      "  shape, bytes), file type, size and shards of a GGUF model (first shard of a split model).\n"
      "  --metadata    print every metadata key (arrays summarized)\n"
      "  --no-tensors  omit the tensor table\n"
      "  --check       also validate every tensor's blocks (finite scales, no MXFP4 exponent 255);\n"
      "                reads all tensor data\n"
      "supported tensor types: %s\n",
      ggml_supported_type_names().c_str());
}

void print_tokenizer(const GgufFile& f) {
  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  if (!toks) {
    std::printf("tokenizer: none\n");
    return;
  }
  const GgufValue* merges = f.find("tokenizer.ggml.merges");
  auto str = [&](const char* k) {
    auto v = f.get_string_or(k, "-");
    return v ? *v : std::string("(bad type)");
  };
  auto num = [&](const char* k) {
    auto v = f.get_int_or(k, -1);
    return v ? *v : -2;
  };
  std::printf("tokenizer: model=%s pre=%s tokens=%zu merges=%zu bos=%" PRId64 " eos=%" PRId64 " pad=%" PRId64 "\n",
              str("tokenizer.ggml.model").c_str(), str("tokenizer.ggml.pre").c_str(), toks->array_size(),
              merges ? merges->array_size() : 0, num("tokenizer.ggml.bos_token_id"), num("tokenizer.ggml.eos_token_id"),
              num("tokenizer.ggml.padding_token_id"));
  if (const GgufValue* t = f.find("tokenizer.chat_template"); t && t->type == GgufValueType::kString) {
    std::printf("chat template: %zu bytes: %s\n", t->str.size(), t->to_string().c_str());
  }
}

Status cmd_inspect(const std::vector<std::string>& args) {
  std::string path;
  bool all_meta = false, tensors = true, check = false;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      print_usage();
      return Status::ok();
    }
    if (a == "--metadata")
      all_meta = true;
    else if (a == "--no-tensors")
      tensors = false;
    else if (a == "--check")
      check = true;
    else if (!a.empty() && a[0] == '-')
      return Status::invalid_argument("unknown option " + a);
    else if (path.empty())
      path = a;
    else
      return Status::invalid_argument("more than one file given");
  }
  if (path.empty()) return Status::invalid_argument("no FILE given");

  auto opened = GgufFile::open(path, {.check_data = check});
  if (!opened) return opened.status();
  const GgufFile& f = **opened;
  const std::string arch = f.architecture();
  std::printf("file: %s\n", f.path().c_str());
  std::printf("GGUF version %u, %zu metadata keys, %zu tensors, alignment %" PRIu64 ", %s in %zu shard(s)\n",
              f.version(), f.metadata().size(), f.tensors().size(), f.alignment(),
              human_bytes(static_cast<double>(f.total_file_bytes())).c_str(), f.shard_paths().size());
  for (size_t i = 0; f.shard_paths().size() > 1 && i < f.shard_paths().size(); ++i) {
    std::printf("  shard %zu: %s\n", i + 1, f.shard_paths()[i].c_str());
  }
  std::printf("architecture: %s\n", arch.empty() ? "(none)" : arch.c_str());
  if (auto name = f.get_string_or("general.name", ""); name && !name->empty()) std::printf("name: %s\n", name->c_str());
  if (auto ft = f.get_int("general.file_type"); ft && ft->has_value()) {
    std::printf("file type: %s (%" PRId64 ")\n", file_type_name(**ft), **ft);
  }
  if (!arch.empty()) {
    std::printf("hyper-parameters:\n");
    for (const auto& [k, v] : f.metadata()) {
      if (starts_with(k, arch + ".")) std::printf("  %-52s %s\n", k.c_str(), v.to_string().c_str());
    }
  }
  print_tokenizer(f);
  if (all_meta) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : f.metadata()) {
      std::printf("  %-52s %-6s %s\n", k.c_str(), gguf_value_type_name(v.type), v.to_string().c_str());
    }
  }
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;
  int64_t n_params = 0;
  for (const auto& t : f.tensors()) {
    auto& e = by_type[ggml_type_name(t.type)];
    e.first++;
    e.second += t.nbytes;
    n_params += t.n_elements();
  }
  std::printf("parameters: %.3f M\n", static_cast<double>(n_params) / 1e6);
  std::printf("tensor types:");
  for (const auto& [name, e] : by_type)
    std::printf(" %s x%zu (%s)", name.c_str(), e.first, human_bytes(static_cast<double>(e.second)).c_str());
  std::printf("\n");
  if (tensors) {
    std::printf("tensors:\n  %-40s %-7s %-24s %12s %s\n", "name", "type", "shape", "bytes", "shard");
    for (const auto& t : f.tensors()) {
      std::printf("  %-40s %-7s %-24s %12zu %d\n", t.name.c_str(), ggml_type_name(t.type), t.shape_string().c_str(),
                  t.nbytes, t.shard + 1);
    }
  }
  if (check) std::printf("check: every tensor's blocks are valid\n");
  return Status::ok();
}

}  // namespace

DS_CLI_COMMAND(inspect, "show a GGUF file's architecture, hyper-parameters, tokenizer and tensors", cmd_inspect);

}  // namespace ds::cli
