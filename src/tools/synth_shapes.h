// Named model shapes for `ds-cli synth` and the tensor list a shape implies.
//
// Design: a shape is only a set of GGUF hyper-parameter keys (the real key names of
// ../shared/SPEC.md). `--set KEY=VALUE` edits those keys, and the tensor list is then
// derived from the final keys alone, so any override (expert count, q_lora rank, layer
// count, ...) changes the tensors consistently and the file always describes itself.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"
#include "gguf/gguf_writer.h"

namespace ds::cli {

struct SynthShapeInfo {
  const char* name;
  const char* summary;
};
const std::vector<SynthShapeInfo>& synth_shapes();

// Writes general.architecture and the <arch>.* keys of a named shape into w.
// *rope_freqs is set when the shape carries a Llama-3.1 rope_freqs tensor.
Status synth_shape_metadata(std::string_view shape, GgufWriter* w, bool* rope_freqs);

// Applies one "KEY=VALUE" override. KEY without a namespace ("expert_count") means
// "<arch>.KEY". The value is parsed as the key's existing type, else inferred
// (true/false -> bool, integer -> u32/i32/u64/i64, number -> f32, otherwise string).
Status synth_apply_override(GgufWriter* w, std::string_view assignment);

// Recomputes the keys that follow from others (deepseek2 MLA: head_count_kv = 1,
// key_length = kv_lora + rope, value_length = kv_lora), checks every hyper-parameter the
// tensors depend on, and sets <arch>.vocab_size to n_vocab.
Status synth_finalize_metadata(GgufWriter* w, int64_t n_vocab);

// kExpertIds: an I32 table of expert ids (deepseek4 ffn_gate_tid2eid), K distinct ids per row.
enum class SynthInit { kNormal, kOnes, kRopeFreqs, kExpertIds };
struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;  // ggml order, ne[0] contiguous
  SynthInit init = SynthInit::kNormal;
  float stddev = 0.02f;
};

// The tensors of the model the (finalized) metadata describes, in file order.
Result<std::vector<SynthTensor>> synth_tensors(const GgufWriter& w, bool rope_freqs);

// Reads an integer key of w (any integer type); def when absent.
int64_t synth_int(const GgufWriter& w, std::string_view key, int64_t def);

}  // namespace ds::cli
