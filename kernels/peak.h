// Register-resident int8 dot-product loops that measure how many int8 multiply-adds a
// core can retire per second (the compute roofline that `ds-cli bench` and `ds-cli
// doctor` report prefill against), float32 FMA loops (attention's roofline) and bf16 dot
// product loops (attention's roofline over a bf16 cache).
// Independent accumulator chains hide the instruction latency, so the loop is bound by
// throughput alone; nothing touches memory.
// One file per ISA (avx512/peak_vnni.cpp, avx2/peak_avx2.cpp); the caller picks one
// after checking CPUID (src/tools/machine_limits.cpp).
#pragma once
#include <cstdint>

namespace ds::peak {

// Each runs n_iter iterations and returns the number of int8 x int8 multiply-adds done
// (one multiply-add = 2 ops). *sink receives a value derived from every accumulator so
// the work cannot be optimized away.
uint64_t int8_madds_avx512_vnni(uint64_t n_iter, int32_t* sink);  // vpdpbusd zmm
uint64_t int8_madds_avx2(uint64_t n_iter, int32_t* sink);         // vpmaddubsw + vpmaddwd + vpaddd

// The float32 counterpart (the roofline of attention, which runs in float): returns the
// number of fused multiply-adds done (2 flops each); every chain computes c = c * 1 + 0.5.
uint64_t f32_fmas_avx512(uint64_t n_iter, float* sink);  // 16 vfmadd132ps zmm chains
uint64_t f32_fmas_avx2(uint64_t n_iter, float* sink);    // 12 vfmadd132ps ymm chains

// bf16 dot products (the roofline of attention over a bf16 cache on CPUs with
// AVX512_BF16): returns the bf16 x bf16 multiply-adds done (2 flops each); every lane
// computes c = c + (1 * 0.5 + 1 * 0.5), one vdpbf16ps of 16 lanes x 2 pairs.
uint64_t bf16_madds_avx512(uint64_t n_iter, float* sink);  // 16 vdpbf16ps zmm chains

}  // namespace ds::peak
