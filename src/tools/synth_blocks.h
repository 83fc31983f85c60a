// Random valid blocks of the i-quant and MXFP4 types for ds-cli synth: the grid types
// (IQ1_*, IQ2_*, IQ3_*) have no quantizer here, so synthetic models of them are random
// bits (every index, sign and sub-scale pattern is legal, ../shared/SPEC-iquants.md) with
// each block's scale chosen so that the dequantized block has a given RMS, like a trained
// tensor's weights. Benchmarks then run the real kernels on real shapes.
#pragma once
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds::cli {

// Fills n elements (a multiple of t's block size; t an i-quant or MXFP4) of blocks at out
// from the seed; the same seed gives the same bytes.
void fill_random_blocks(GgmlType t, uint64_t seed, float rms, uint8_t* out, int64_t n);

}  // namespace ds::cli
