// The tokenizer of a synth model: all tokenizer.* keys copied from a GGUF (--vocab FILE),
// or a small byte-level BPE vocabulary trained on synth_corpus (bpe_trainer.h) with the
// DeepSeek-V3 special tokens and chat template.
#pragma once
#include <cstdint>
#include <string>

#include "ds/status.h"
#include "gguf/gguf_writer.h"

namespace ds::cli {

// Adds the tokenizer.* keys to w and returns the number of tokens. With no vocab_path
// the trained vocabulary is padded with unused "[PAD<i>]" tokens up to pad_to (0: none).
Result<int64_t> synth_tokenizer(GgufWriter* w, const std::string& vocab_path, int64_t pad_to);

}  // namespace ds::cli
