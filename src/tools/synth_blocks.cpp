#include "tools/synth_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant/fp16.h"

namespace ds::cli {
namespace {

uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// IQ1_M keeps its half in the top nibbles of the four u16 scale words at byte 48.
constexpr int kIq1mScaleWords = 48;

// Sets the block's scale to v (> 0): the half d (byte 0) of most types, IQ1_M's scattered
// half, MXFP4's exponent 2^(e-128) nearest v.
void set_scale(GgmlType t, uint8_t* blk, float v) {
  if (t == GgmlType::MXFP4) {
    blk[0] = static_cast<uint8_t>(std::clamp(128 + static_cast<int>(std::lround(std::log2(v))), 0, 254));
    return;
  }
  const uint16_t h = f32_to_fp16(std::min(v, 65504.0f));
  if (t == GgmlType::IQ1_M) {
    for (int k = 0; k < 4; ++k) {
      uint8_t& hi = blk[kIq1mScaleWords + 2 * k + 1];
      hi = static_cast<uint8_t>((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
    }
    return;
  }
  std::memcpy(blk, &h, 2);
}

}  // namespace

void fill_random_blocks(GgmlType t, uint64_t seed, float scale, uint8_t* out, int64_t n) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  uint64_t s = seed;
  for (int64_t ib = 0; ib < n / tr.block_size; ++ib) {
    uint8_t* blk = out + static_cast<size_t>(ib) * static_cast<size_t>(tr.type_size);
    for (int k = 0; k < tr.type_size; k += 8) {
      const uint64_t r = splitmix64(&s);
      std::memcpy(blk + k, &r, static_cast<size_t>(std::min(8, tr.type_size - k)));
    }
    set_scale(t, blk, scale);
  }
}

double random_block_unit_rms(GgmlType t) {
  constexpr int kBlocks = 256;
  const GgmlTypeTraits tr = ggml_type_traits(t);
  const int64_t n = int64_t{kBlocks} * tr.block_size;
  std::vector<uint8_t> blocks(static_cast<size_t>(kBlocks) * static_cast<size_t>(tr.type_size));
  std::vector<float> y(static_cast<size_t>(n));
  fill_random_blocks(t, 0x5EED, 1.0f, blocks.data(), n);
  dequantize_row(t, blocks.data(), y.data(), n);
  double ss = 0.0;
  for (float v : y) ss += static_cast<double>(v) * v;
  return std::sqrt(ss / static_cast<double>(n));
}

}  // namespace ds::cli
