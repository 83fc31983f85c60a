// The training text of the self-made BPE vocabulary of `ds-cli synth` (synth_corpus.cpp):
// a few KB of plain English prose, some code and numbers, written for this project.
#pragma once
#include <string_view>

namespace ds::cli {
std::string_view synth_bpe_corpus();
}  // namespace ds::cli
