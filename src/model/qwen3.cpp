// qwen3 (DeepSeek-R1-0528-Qwen3-8B, ../shared/SPEC-deepseek32-deepseek4.md section 8): the
// llama block with RoPE that rotates halves over the whole head (HParams::rope_params sets
// neox for qwen3) and a per-head RMSNorm of q and of k between the projections and RoPE
// (LayerWeights::q_norm / k_norm, applied by LlamaModel::attention when present). No
// biases (loaded if a file has them), no rope_freqs. The cache holds the normed, rotated k
// and the plain v, exactly as for llama. Everything else is LlamaModel.
#include "model/llama.h"

namespace ds {

std::unique_ptr<Model> make_qwen3_model(std::unique_ptr<GgufFile> file, HParams hp, std::unique_ptr<Weights> w) {
  return std::make_unique<LlamaModel>(std::move(file), std::move(hp), std::move(w));
}

}  // namespace ds
