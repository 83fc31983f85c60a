// qwen2 (DeepSeek-R1-Distill-Qwen, ../shared/SPEC.md "qwen2"): the llama block plus
// q/k/v biases (loaded as required tensors by weights.cpp) and RoPE that rotates halves
// (x[i], x[i + hd/2]) instead of adjacent pairs (HParams::rope_params sets neox for qwen2).
// No rope_freqs. Everything else is LlamaModel.
#include "model/llama.h"

namespace ds {

std::unique_ptr<Model> make_qwen2_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<LlamaModel>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
