// Random valid blocks of the i-quant and MXFP4 types for ds-cli synth: the grid types
// (IQ1_*, IQ2_*, IQ3_*) have no quantizer here, so synthetic models of them are random
// bits (every index, sign and sub-scale pattern is legal, ../shared/SPEC-iquants.md) with
// one block scale per tensor chosen so that the tensor's values have a given RMS, like a
// trained tensor's weights. Benchmarks then run the real kernels on real shapes. Generating
// costs one random number per 8 bytes, so a V3-sized model is bound by the disk.
#pragma once
#include <cstdint>

#include "kernels/quant/types.h"

namespace ds::cli {

// The RMS of the dequantized values of random blocks of type t at block scale 1 (measured
// once on 256 seeded blocks).
double random_block_unit_rms(GgmlType t);

// Fills n elements (a multiple of t's block size; t an i-quant or MXFP4) of random blocks
// with block scale `scale` (MXFP4: the nearest power of two) at out; the same seed gives
// the same bytes.
void fill_random_blocks(GgmlType t, uint64_t seed, float scale, uint8_t* out, int64_t n);

}  // namespace ds::cli
