// AVX-512 decode GEMV for the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S): one activation row against 4 weight rows per pass (rows rstep apart, one per
// stream: matmul_gemv.cpp). The activation block is loaded and rearranged once for the 4
// rows. The value-table types (IQ4_XS, IQ4_NL, MXFP4) are in matmul_gemv_iq4.cpp.
//
// Products: VNNI dpbusd wants unsigned weights. The grid types multiply their unsigned grid
// bytes with the activation signed by masks (masked subtract from zero); IQ1_S/IQ1_M's grid
// (-1, 0, 1) plus one is unsigned, the one taken back through the activation's lane sums.
// Grid lookups: the grids of up to 512 entries live in registers as level codes (Grid2,
// Grid3: word permutes), the larger ones (IQ1_S, IQ1_M: 2048; IQ2_S: 1024) are gathered 8
// entries per instruction.
//
// [IQUANT_ORDER] (kernels/simd/iquant_blocks.inc): Q8_K types reduce each 256-block to
// the reference's 8 int32 lanes (lane k = elements 4k..4k+3 of every 32, times the
// sub-block scale) and step their 8-lane float chains as the tile loop does. Results are
// bit-identical to kernels/ref and to the tile loop (tests/kernels/iquant_kernels_test.cpp,
// isa_vs_ref_test.cpp).
#include "kernels/avx512/intrinsics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/avx512/dot_blocks.h"
#include "kernels/avx512/gemv_common.h"
#include "kernels/avx512/kernels_avx512.h"

namespace ds::avx512 {
namespace {

using namespace gemv;

// The 8-lane int32 result of a register pair's sum: lanes 0..7 are one sub-block's, 8..15
// the next one's, both belonging to the same 8 lanes.
inline __m256i fold16(__m512i s) {
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}
// Register p of a block's 4 (sub-blocks 2p, 2p+1): the int32 scale of sub-block 2p in
// lanes 0..7, of 2p + 1 in lanes 8..15, from the 8 sub-block scales in dwords 0..7.
inline __m512i scale_pair(__m512i sc8, int p) {
  const __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * p), _mm512_set1_epi32(2 * p + 1));
  return _mm512_permutexvar_epi32(idx, sc8);
}

// The 32 sign bytes of an IQ2_XXS/IQ3_XXS block (byte 4 ib + l: group l of sub-block ib,
// bit j = element 8l + j negative) from the 8 words w holding four 7-bit codes each
// (bits 7l..7l+6): ksigns_iq2xs computed, not looked up: the code plus its parity in bit 7.
// IQ2_XS / IQ2_S sub-scales: 8 bytes of two 4-bit scales -> 16 int32 lanes of 2s + 1, one
// per group of 16 elements.
inline __m512i iq2_scales16(const uint8_t* scales) {
  uint64_t sc64;
  std::memcpy(&sc64, scales, 8);
  const __m128i nib = _mm_set_epi64x(static_cast<long long>(_pdep_u64(sc64 >> 32, 0x0F0F0F0F0F0F0F0Full)),
                                     static_cast<long long>(_pdep_u64(sc64 & 0xFFFFFFFFu, 0x0F0F0F0F0F0F0F0Full)));
  return _mm512_add_epi32(_mm512_slli_epi32(_mm512_cvtepu8_epi32(nib), 1), _mm512_set1_epi32(1));
}

// One 64-element pass p of IQ2_XS / IQ2_S: grid bytes g times the activations x negated where
// the sign mask says, in 16 int32 lanes of 4 products, each times its group's sub-scale.
inline __m512i iq2_scaled_dot(__m512i g, __m512i x, uint64_t signs, __m512i sc16, __m512i idx_sc, int p) {
  const __m512i xs = _mm512_mask_sub_epi8(x, _cvtu64_mask64(signs), _mm512_setzero_si512(), x);
  const __m512i sc = _mm512_permutexvar_epi32(_mm512_add_epi32(idx_sc, _mm512_set1_epi32(4 * p)), sc16);
  return _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g, xs), sc);
}

inline __m256i ksigns_bytes(__m256i w) {
  // bit selects (ternary logic 0xD8: mask ? b : a): bits 0-6 of w, 7-13 of w << 1, ...
  const auto sel = [](__m256i a, __m256i b, int mask) {
    return _mm256_ternarylogic_epi32(a, b, _mm256_set1_epi32(mask), 0xD8);
  };
  const __m256i c = _mm256_and_si256(
      sel(sel(sel(_mm256_slli_epi32(w, 3), _mm256_slli_epi32(w, 2), 0x007FFFFF), _mm256_slli_epi32(w, 1), 0x00007FFF),
          w, 0x7F),
      _mm256_set1_epi32(0x7F7F7F7F));
  __m256i x = _mm256_xor_si256(c, _mm256_srli_epi32(c, 4));  // per byte: bit 0 ends as the parity
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 2));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 1));
  return _mm256_or_si256(c, _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi8(1)), 7));
}

// The Q8_K block as 4 registers of 64 (sub-blocks 2p, 2p + 1).
struct ActQ8K {
  __m512i x[4];
  void load(const BlockQ8_K& a) {
    for (int p = 0; p < 4; ++p) x[p] = _mm512_loadu_si512(a.qs + 64 * p);
  }
};

// Grid entries as 16-bit codes of 2-bit levels (coordinate j in bits 2j..2j+1), expanded
// to bytes in registers: a word permute repeats code g in the 4 words of qword g, a shift
// by 0/4/8/12 per word brings one nibble (two coordinates) to the bottom of each word, and a
// word permute through the nibble values gives the two bytes (level[n & 3], level[n >> 2]).
struct LevelPairs {
  __m512i pairs;
  explicit LevelPairs(const uint8_t* level) {
    // 32 entries, n and n + 16 alike: the permute reads 5 index bits, so the shifted code
    // needs no mask for its bit 4.
    alignas(64) uint16_t pw[32];
    for (int n = 0; n < 32; ++n) pw[n] = static_cast<uint16_t>(level[n & 3] | level[(n >> 2) & 3] << 8);
    pairs = _mm512_load_si512(pw);
  }
  // The bytes of entries 8p..8p+7 of 32 codes (words).
  __m512i bytes(__m512i codes, int p) const {
    const __m512i group = _mm512_setr_epi32(0, 0, 0x00010001, 0x00010001, 0x00020002, 0x00020002, 0x00030003,
                                            0x00030003, 0x00040004, 0x00040004, 0x00050005, 0x00050005, 0x00060006,
                                            0x00060006, 0x00070007, 0x00070007);  // word 4g + w: g
    const __m512i rep =
        _mm512_permutexvar_epi16(_mm512_add_epi16(group, _mm512_set1_epi16(static_cast<short>(8 * p))), codes);
    return _mm512_permutexvar_epi16(
        _mm512_srlv_epi16(rep, _mm512_set4_epi32(0x000C0008, 0x00040000, 0x000C0008, 0x00040000)), pairs);
  }
};

// The code of an 8-byte grid entry whose bytes take the values level[0..2].
inline uint16_t level_code(uint64_t entry, const uint8_t* level) {
  int code = 0;
  for (int j = 0; j < 8; ++j) {
    const uint8_t v = static_cast<uint8_t>(entry >> (8 * j));
    code |= (v == level[0] ? 0 : v == level[1] ? 1 : 2) << (2 * j);
  }
  return static_cast<uint16_t>(code);
}

// The 2-bit grids of IQ2_XXS (256 entries) and IQ2_XS (512), bytes 8, 25, 43, as codes in 8 /
// 16 registers: 32 indices (words) cost 4 / 8 two-table word permutes of 64 entries and a
// blend tree on index bits 6-8 instead of 32 loads.
template <int kEntries>
struct Grid2 {
  static constexpr uint8_t kLevel[4] = {8, 25, 43, 0};
  static constexpr int kRegs = kEntries / 32;
  __m512i t[kRegs];  // codes of entries 32i..32i+31
  LevelPairs expand{kLevel};
  explicit Grid2(const uint64_t* grid) {
    alignas(64) uint16_t c[kEntries];
    for (int e = 0; e < kEntries; ++e) c[e] = level_code(grid[e], kLevel);
    for (int i = 0; i < kRegs; ++i) t[i] = _mm512_load_si512(c + 32 * i);
  }
  [[gnu::always_inline]] __m512i lookup(__m512i idx) const {
    const auto sel = [&](int i) { return _mm512_permutex2var_epi16(t[2 * i], idx, t[2 * i + 1]); };
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64)),
                    b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    const __m512i lo = _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, sel(0), sel(1)),
                                               _mm512_mask_blend_epi16(b6, sel(2), sel(3)));
    if constexpr (kEntries == 256) return lo;
    const __m512i hi = _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, sel(4), sel(5)),
                                               _mm512_mask_blend_epi16(b6, sel(6), sel(7)));
    return _mm512_mask_blend_epi16(_mm512_test_epi16_mask(idx, _mm512_set1_epi16(256)), lo, hi);
  }
};

// The 3-bit grids (IQ3_XXS: 256 entries, IQ3_S: 512, of 4 bytes) the same way: a code holds
// coordinate j's level (0..7, the position of its byte in the level table) in bits
// 3j..3j+2; 32 lookups cost 4 (8) two-table word permutes and 3 (7) blends, and a register
// of 16 entries' bytes a word permute (code e in both words of dword e), a shift by 0/6 per
// word and a two-table word permute through the 64 level pairs.
template <int kEntries>
struct Grid3 {
  static constexpr int kRegs = kEntries / 32;
  __m512i t[kRegs];
  __m512i pairs[2];  // word n (n < 64): bytes level[n & 7], level[n >> 3]
  __m512i rep_idx[2] = {gemv::idx16([](int i) { return i / 2; }), gemv::idx16([](int i) { return 16 + i / 2; })};
  Grid3(const uint32_t* grid, const uint8_t* level) {
    alignas(64) uint16_t c[kEntries];
    for (int e = 0; e < kEntries; ++e) {
      int code = 0;
      for (int j = 0; j < 4; ++j) {
        const int v = iq_grid_byte(grid[e], j);
        int l = 0;
        while (l < 7 && level[l] != v) ++l;
        code |= l << (3 * j);
      }
      c[e] = static_cast<uint16_t>(code);
    }
    for (int i = 0; i < kRegs; ++i) t[i] = _mm512_load_si512(c + 32 * i);
    alignas(64) uint16_t pw[64];
    for (int n = 0; n < 64; ++n) pw[n] = static_cast<uint16_t>(level[n & 7] | level[n >> 3] << 8);
    pairs[0] = _mm512_load_si512(pw);
    pairs[1] = _mm512_load_si512(pw + 32);
  }
  // The codes of 32 entries (idx: 32 words < kEntries): permutes of 64 entries, then a
  // blend tree on index bits 6, 7 (and 8). kEntries is 256 or 512.
  [[gnu::always_inline]] __m512i lookup(__m512i idx) const {
    const auto sel = [&](int i) { return _mm512_permutex2var_epi16(t[2 * i], idx, t[2 * i + 1]); };
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64)),
                    b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    const __m512i lo = _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, sel(0), sel(1)),
                                               _mm512_mask_blend_epi16(b6, sel(2), sel(3)));
    if constexpr (kEntries == 256) return lo;
    const __m512i hi = _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, sel(4), sel(5)),
                                               _mm512_mask_blend_epi16(b6, sel(6), sel(7)));
    return _mm512_mask_blend_epi16(_mm512_test_epi16_mask(idx, _mm512_set1_epi16(256)), lo, hi);
  }
  // The bytes of entries 16h..16h+15 of 32 codes.
  __m512i bytes(__m512i codes, int h) const {
    const __m512i rep = _mm512_permutexvar_epi16(rep_idx[h], codes);
    return _mm512_permutex2var_epi16(pairs[0], _mm512_srlv_epi16(rep, _mm512_set1_epi32(0x00060000)), pairs[1]);
  }
};
constexpr uint8_t kIq3xxsLevels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr uint8_t kIq3sLevels[8] = {1, 3, 5, 7, 9, 11, 13, 15};

// IQ3_XXS: 8 index bytes per sub-block, then per sub-block a word of 4 sign codes and the
// scale (IQ2_XXS's word B), factor 0.25.
void gemv4_iq3xxs(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  static const Grid3<256> grid(kIq3xxsGrid, kIq3xxsLevels);
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ3_XXS& b = reinterpret_cast<const BlockIQ3_XXS*>(w0 + r * ws)[ib];
      const __m512i codes[2] = {
          grid.lookup(_mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)))),
          grid.lookup(_mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32))))};
      const __m256i wb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 64));
      alignas(32) uint64_t sg[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sg), ksigns_bytes(wb));
      const __m512i sc8 = _mm512_castsi256_si512(
          _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(wb, 28), 1), _mm256_set1_epi32(1)));
      __m512i s = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i g = grid.bytes(codes[p / 2], p % 2);
        const __m512i x = _mm512_mask_sub_epi8(av.x[p], _cvtu64_mask64(sg[p]), _mm512_setzero_si512(), av.x[p]);
        s = _mm512_add_epi32(s,
                             _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g, x), scale_pair(sc8, p)));
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
    }
  }
  const __m128 res =
      _mm_setr_ps(0.25f * hsum256(acc[0]), 0.25f * hsum256(acc[1]), 0.25f * hsum256(acc[2]), 0.25f * hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ3_S: 8 index bytes per sub-block with a 9th bit each in qh (bit k of qh[ib]: bit 8 ib + k
// of qh as one 64-bit word, entry 8 ib + k), plain sign bytes, a 4-bit scale per sub-block.
void gemv4_iq3s(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  static const Grid3<512> grid(kIq3sGrid, kIq3sLevels);
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ3_S& b = reinterpret_cast<const BlockIQ3_S*>(w0 + r * ws)[ib];
      uint64_t qh, sg[4];
      uint32_t sc4;
      std::memcpy(&qh, b.qh, 8);
      std::memcpy(sg, b.signs, 32);
      std::memcpy(&sc4, b.scales, 4);
      __m512i codes[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h)));
        codes[h] = grid.lookup(_mm512_mask_add_epi16(lo, _cvtu32_mask32(static_cast<uint32_t>(qh >> (32 * h))), lo,
                                                     _mm512_set1_epi16(256)));
      }
      const __m512i sc8 = _mm512_castsi256_si512(_mm256_add_epi32(
          _mm256_slli_epi32(
              _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(_pdep_u64(sc4, 0x0F0F0F0F0F0F0F0Full)))),
              1),
          _mm256_set1_epi32(1)));
      __m512i s = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i g = grid.bytes(codes[p / 2], p % 2);
        const __m512i x = _mm512_mask_sub_epi8(av.x[p], _cvtu64_mask64(sg[p]), _mm512_setzero_si512(), av.x[p]);
        s = _mm512_add_epi32(s,
                             _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g, x), scale_pair(sc8, p)));
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
    }
  }
  const __m128 res = _mm_setr_ps(hsum256(acc[0]), hsum256(acc[1]), hsum256(acc[2]), hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ2_XXS over all activation rows of a batch, as gemv4_iq4xs_tokens: each 4-row group's
// block is looked up and expanded once (grid bytes, sign masks, scale vectors), then every
// activation row of a chunk of up to 64 meets it with gemv4_iq2xxs's operations.
void gemv4_iq2xxs_chunk(const MatmulArgs& m, int64_t r0, int64_t rstep, int64_t t0, int64_t nt) {
  constexpr int kMaxTok = 64;
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* act = static_cast<const uint8_t*>(m.act) + t0 * m.act_row_stride;
  static const Grid2<256> grid(kIq2xxsGrid);
  const __m512i idx_a = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i idx_b = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc[kMaxTok][kRows];
  for (int64_t t = 0; t < nt; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  struct Row {
    __m512i g[4], sc[4];
    uint64_t sg[4];
    float d;
  } rows[kRows];
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ2_XXS& b = reinterpret_cast<const BlockIQ2_XXS*>(w0 + r * ws)[ib];
      const __m512i q = _mm512_loadu_si512(b.qs);
      const __m256i ia = _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx_a, q));
      const __m256i wb = _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx_b, q));
      const __m512i codes = grid.lookup(_mm512_cvtepu8_epi16(ia));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[r].sg), ksigns_bytes(wb));
      const __m512i sc8 = _mm512_castsi256_si512(
          _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(wb, 28), 1), _mm256_set1_epi32(1)));
      for (int p = 0; p < 4; ++p) {
        rows[r].g[p] = grid.expand.bytes(codes, p);
        rows[r].sc[p] = scale_pair(sc8, p);
      }
      rows[r].d = half_to_float(b.d);
    }
    for (int64_t t = 0; t < nt; ++t) {
      const BlockQ8_K& ab = reinterpret_cast<const BlockQ8_K*>(act + t * m.act_row_stride)[ib];
      ActQ8K av;
      av.load(ab);
      for (int r = 0; r < kRows; ++r) {
        __m512i s = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p) {
          const __m512i x =
              _mm512_mask_sub_epi8(av.x[p], _cvtu64_mask64(rows[r].sg[p]), _mm512_setzero_si512(), av.x[p]);
          s = _mm512_add_epi32(
              s, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), rows[r].g[p], x), rows[r].sc[p]));
        }
        const float d = rows[r].d * ab.d;
        acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[t][r]);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    store_rows4(m.out + (t0 + t) * m.out_stride + r0, rstep,
                _mm_setr_ps(0.125f * hsum256(acc[t][0]), 0.125f * hsum256(acc[t][1]), 0.125f * hsum256(acc[t][2]),
                            0.125f * hsum256(acc[t][3])));
}

void gemv4_iq2xxs_tokens(const MatmulArgs& m, int64_t r0, int64_t rstep) {
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += 64)
    gemv4_iq2xxs_chunk(m, r0, rstep, t0, std::min<int64_t>(64, m.n_tok - t0));
}

// IQ2_XS: a u16 per group (9-bit index, 7-bit sign code: its parity computed as for
// IQ2_XXS), two 4-bit scales per 32 (one per 16 elements: register p's lanes 4j..4j+3 take
// half-sub-block 4p + j's), factor 0.125.
void gemv4_iq2xs(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  static const Grid2<512> grid(kIq2xsGrid);
  const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ2_XS& b = reinterpret_cast<const BlockIQ2_XS*>(w0 + r * ws)[ib];
      const __m512i v = _mm512_loadu_si512(b.qs);
      const __m512i codes = grid.lookup(_mm512_and_si512(v, _mm512_set1_epi16(511)));
      // sign bytes: the 7-bit code plus its parity in bit 7
      const __m512i c = _mm512_srli_epi16(v, 9);
      __m512i x = _mm512_xor_si512(c, _mm512_srli_epi16(c, 4));
      x = _mm512_xor_si512(x, _mm512_srli_epi16(x, 2));
      x = _mm512_xor_si512(x, _mm512_srli_epi16(x, 1));
      alignas(32) uint64_t sg[4];
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(sg),
          _mm512_cvtepi16_epi8(_mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(1)), 7))));
      const __m512i sc16 = iq2_scales16(b.scales);
      __m512i s = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        s = _mm512_add_epi32(s, iq2_scaled_dot(grid.expand.bytes(codes, p), av.x[p], sg[p], sc16, idx_sc, p));
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
    }
  }
  const __m128 res = _mm_setr_ps(0.125f * hsum256(acc[0]), 0.125f * hsum256(acc[1]), 0.125f * hsum256(acc[2]),
                                 0.125f * hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ2_S: 1024 grid entries (2 KB of codes: too many registers), gathered 8 at a time as for
// IQ1_S; index bits 8-9 of group l in bits 2l..2l+1 of qh[ib], plain sign bytes, IQ2_XS's
// scales, factor 0.125.
void gemv4_iq2s(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* grid = reinterpret_cast<const long long*>(kIq2sGrid);
  const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  // group g = 4 ib + l of 16 (half h): qh byte ib in dword g, bits 2l..2l+1 to bits 8-9
  const __m512i idx_h[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                            _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  const __m512i shl = _mm512_set4_epi32(2, 4, 6, 8);  // lane l: 8 - 2l
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ2_S& b = reinterpret_cast<const BlockIQ2_S*>(w0 + r * ws)[ib];
      uint64_t sg[4];
      std::memcpy(sg, b.qs + 32, 32);
      const __m512i sc16 = iq2_scales16(b.scales);
      const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qh)));
      __m512i s = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m512i hi =
            _mm512_and_si512(_mm512_sllv_epi32(_mm512_permutexvar_epi32(idx_h[h], qh), shl), _mm512_set1_epi32(0x300));
        const __m512i gi = _mm512_or_si512(lo, hi);
        for (int k = 0; k < 2; ++k) {
          const int p = 2 * h + k;
          const __m256i gik = k == 0 ? _mm512_castsi512_si256(gi) : _mm512_extracti64x4_epi64(gi, 1);
          const __m512i g = _mm512_i32gather_epi64(gik, grid, 8);
          s = _mm512_add_epi32(s, iq2_scaled_dot(g, av.x[p], sg[p], sc16, idx_sc, p));
        }
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
    }
  }
  const __m128 res = _mm_setr_ps(0.125f * hsum256(acc[0]), 0.125f * hsum256(acc[1]), 0.125f * hsum256(acc[2]),
                                 0.125f * hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ2_XXS: per sub-block a record of 4 index bytes (word A) and a word B of 4 sign codes
// and the scale. The activation is signed by the sign bits as a 64-bit mask.
void gemv4_iq2xxs(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  static const Grid2<256> grid(kIq2xxsGrid);
  const __m512i idx_a = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i idx_b = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ2_XXS& b = reinterpret_cast<const BlockIQ2_XXS*>(w0 + r * ws)[ib];
      const __m512i q = _mm512_loadu_si512(b.qs);
      const __m256i ia = _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx_a, q));  // 32 index bytes
      const __m256i wb = _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx_b, q));
      const __m512i codes = grid.lookup(_mm512_cvtepu8_epi16(ia));
      alignas(32) uint64_t sg[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sg), ksigns_bytes(wb));
      const __m512i sc8 = _mm512_castsi256_si512(
          _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(wb, 28), 1), _mm256_set1_epi32(1)));
      __m512i s = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i g = grid.expand.bytes(codes, p);
        const __m512i x = _mm512_mask_sub_epi8(av.x[p], _cvtu64_mask64(sg[p]), _mm512_setzero_si512(), av.x[p]);
        s = _mm512_add_epi32(s,
                             _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g, x), scale_pair(sc8, p)));
      }
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
    }
  }
  const __m128 res = _mm_setr_ps(0.125f * hsum256(acc[0]), 0.125f * hsum256(acc[1]), 0.125f * hsum256(acc[2]),
                                 0.125f * hsum256(acc[3]));
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ1_S: 11-bit indices (qs byte + 3 bits of qh per group) into the signed grid, gathered
// 8 entries at a time (a 16-dword gather of the entries as 2-bit level codes, expanded in
// registers as for IQ2_XXS, measured slower: 19 vs 16 ns per block and row); the grid
// plus one (0, 1, 2) is unsigned, and the activation's lane sums
// (once per block for the 4 rows) take the one back. The delta term: per sub-block
// +-(2s + 1) times its two bsums.
void gemv4_iq1s(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* grid = reinterpret_cast<const long long*>(kIq1sGrid);
  const __m512i one = _mm512_set1_epi8(1);
  // group g = 4 ib + l of 16 (half h): qh word ib in dword g, shifted right by 3 l - 8
  const __m512i idx_h[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                            _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  const __m512i shl = _mm512_setr_epi32(8, 5, 2, 0, 8, 5, 2, 0, 8, 5, 2, 0, 8, 5, 2, 0);
  const __m512i shr = _mm512_setr_epi32(0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1);
  float acc1[kRows] = {};
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    __m512i neg_sums[4];  // minus the 4-element lane sums: the start of each product
    for (int p = 0; p < 4; ++p)
      neg_sums[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, av.x[p]));
    // bsums of each sub-block (pairs of 16) as 8 int32
    const __m256i bs32 =
        _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums)), _mm256_set1_epi16(1));
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ1_S& b = reinterpret_cast<const BlockIQ1_S*>(w0 + r * ws)[ib];
      const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
      const __m512i qh16 = _mm512_castsi256_si512(qh);
      const __m512i sc8 = _mm512_castsi256_si512(
          _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)), 1),
                           _mm256_set1_epi32(1)));
      __m512i s = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m512i hw = _mm512_permutexvar_epi32(idx_h[h], qh16);
        const __m512i gi = _mm512_or_si512(
            lo, _mm512_and_si512(_mm512_srlv_epi32(_mm512_sllv_epi32(hw, shl), shr), _mm512_set1_epi32(0x700)));
        for (int k = 0; k < 2; ++k) {
          const int p = 2 * h + k;
          const __m256i gik = k == 0 ? _mm512_castsi512_si256(gi) : _mm512_extracti64x4_epi64(gi, 1);
          const __m512i g = _mm512_add_epi8(_mm512_i32gather_epi64(gik, grid, 8), one);
          s = _mm512_add_epi32(s, _mm512_mullo_epi32(_mm512_dpbusd_epi32(neg_sums[p], g, av.x[p]), scale_pair(sc8, p)));
        }
      }
      // delta: (2s + 1) * (-1 if bit 15) * bsums pair
      const __m256i dsc =
          _mm256_mask_sub_epi32(_mm512_castsi512_si256(sc8), _mm256_movepi32_mask(_mm256_slli_epi32(qh, 16)),
                                _mm256_setzero_si256(), _mm512_castsi512_si256(sc8));
      const int sum1 = hsum_epi32(_mm256_mullo_epi32(dsc, bs32));
      const float d = half_to_float(b.d) * ab.d;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[r]);
      acc1[r] = std::fma(d, static_cast<float>(sum1), acc1[r]);
    }
  }
  __m128 res;
  alignas(16) float o[kRows];
  for (int r = 0; r < kRows; ++r) o[r] = hsum256(acc[r]) + kIq1Delta * acc1[r];
  res = _mm_load_ps(o);
  store_rows4(m.out + t * m.out_stride + r0, rstep, res);
}

// IQ1_M: as IQ1_S, with the 3 high index bits and the delta sign in a nibble per group (qh
// byte g / 2, nibble g % 2), a 3-bit scale per 16 elements (word h / 4 of the scales, bits
// 3 (h % 4) for half-sub-block h) and the block's half in the words' top nibbles. The delta
// term has its own 8 lanes: +-1 per group times the activation lane sums (the products'
// start, negated), scaled like the grid part.
void gemv4_iq1m(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(m.act) + t * m.act_row_stride);
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* grid = reinterpret_cast<const long long*>(kIq1sGrid);
  const __m512i one = _mm512_set1_epi8(1);
  // group g of 16 (half h): qh byte g / 2 in dword g, nibble g % 2
  const __m512i idx_h[2] = {_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                            _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)};
  const __m512i nib_shift = _mm512_setr_epi32(8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4);  // to index bits 8-10
  // register p's lanes 4j..4j+3 take half-sub-block 4p + j's scale
  const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m256 acc[kRows], accd[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = accd[r] = _mm256_setzero_ps();
  ActQ8K av;
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    const BlockQ8_K& ab = a[ib];
    av.load(ab);
    __m512i neg_sums[4];
    for (int p = 0; p < 4; ++p)
      neg_sums[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, av.x[p]));
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ1_M& b = reinterpret_cast<const BlockIQ1_M*>(w0 + r * ws)[ib];
      uint16_t sw[4];
      std::memcpy(sw, b.scales, 8);
      const uint16_t dbits =
          static_cast<uint16_t>((sw[0] >> 12) | ((sw[1] >> 8) & 0xF0) | ((sw[2] >> 4) & 0xF00) | (sw[3] & 0xF000));
      // the 16 scales 2 s + 1, half-sub-block h in dword h
      const __m512i w16 = _mm512_permutexvar_epi32(
          _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
          _mm512_castsi128_si512(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales)))));
      const __m512i sc16 = _mm512_add_epi32(
          _mm512_slli_epi32(
              _mm512_and_si512(_mm512_srlv_epi32(w16, _mm512_set4_epi32(9, 6, 3, 0)), _mm512_set1_epi32(7)), 1),
          _mm512_set1_epi32(1));
      const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
      __m512i s = _mm512_setzero_si512(), sd = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m512i hw = _mm512_sllv_epi32(_mm512_permutexvar_epi32(idx_h[h], qh), nib_shift);  // nibble at bits 8-11
        const __m512i gi = _mm512_or_si512(lo, _mm512_and_si512(hw, _mm512_set1_epi32(0x700)));
        const __mmask16 neg = _mm512_test_epi32_mask(hw, _mm512_set1_epi32(0x800));  // delta -0.125 per group
        for (int k = 0; k < 2; ++k) {
          const int p = 2 * h + k;
          const __m256i gik = k == 0 ? _mm512_castsi512_si256(gi) : _mm512_extracti64x4_epi64(gi, 1);
          const __m512i g = _mm512_add_epi8(_mm512_i32gather_epi64(gik, grid, 8), one);
          const __m512i sc = _mm512_permutexvar_epi32(_mm512_add_epi32(idx_sc, _mm512_set1_epi32(4 * p)), sc16);
          s = _mm512_add_epi32(s, _mm512_mullo_epi32(_mm512_dpbusd_epi32(neg_sums[p], g, av.x[p]), sc));
          // lanes 2j, 2j + 1 belong to group 8p + j: its delta sign times the lane sums
          const __mmask16 gneg = static_cast<__mmask16>((neg >> (8 * k)) & 0xFF);
          const __mmask16 lane_neg = static_cast<__mmask16>(_pdep_u32(gneg, 0x5555) | _pdep_u32(gneg, 0xAAAA));
          const __m512i dl =
              _mm512_mask_sub_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), neg_sums[p]), lane_neg,
                                    _mm512_setzero_si512(), _mm512_sub_epi32(_mm512_setzero_si512(), neg_sums[p]));
          sd = _mm512_add_epi32(sd, _mm512_mullo_epi32(dl, sc));
        }
      }
      const __m256 d = _mm256_set1_ps(half_to_float(dbits) * ab.d);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold16(s)), acc[r]);
      accd[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold16(sd)), accd[r]);
    }
  }
  alignas(16) float o[kRows];
  for (int r = 0; r < kRows; ++r) o[r] = hsum256(acc[r]) + kIq1Delta * hsum256(accd[r]);
  store_rows4(m.out + t * m.out_stride + r0, rstep, _mm_load_ps(o));
}

// IQ1_S over all activation rows of a batch (as gemv4_iq2xxs_tokens): each 4-row group's
// block is gathered once (grid + 1, scale vectors, the delta scales), then every activation
// row of a chunk of up to 64 meets it with gemv4_iq1s's operations.
void gemv4_iq1s_chunk(const MatmulArgs& m, int64_t r0, int64_t rstep, int64_t t0, int64_t nt) {
  constexpr int kMaxTok = 64;
  const uint8_t* w0 = static_cast<const uint8_t*>(m.w) + r0 * m.w_row_stride;
  const size_t ws = m.w_row_stride * static_cast<size_t>(rstep);
  const auto* act = static_cast<const uint8_t*>(m.act) + t0 * m.act_row_stride;
  const auto* grid = reinterpret_cast<const long long*>(kIq1sGrid);
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i idx_h[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                            _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  const __m512i shl = _mm512_setr_epi32(8, 5, 2, 0, 8, 5, 2, 0, 8, 5, 2, 0, 8, 5, 2, 0);
  const __m512i shr = _mm512_setr_epi32(0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1);
  float acc1[kMaxTok][kRows];
  __m256 acc[kMaxTok][kRows];
  for (int64_t t = 0; t < nt; ++t)
    for (int r = 0; r < kRows; ++r) {
      acc[t][r] = _mm256_setzero_ps();
      acc1[t][r] = 0.0f;
    }
  struct Row {
    __m512i g[4], sc[4];
    __m256i dsc;
    float d;
  } rows[kRows];
  for (int64_t ib = 0; ib < m.n_in / kQK_K; ++ib) {
    for (int r = 0; r < kRows; ++r) {
      const BlockIQ1_S& b = reinterpret_cast<const BlockIQ1_S*>(w0 + r * ws)[ib];
      const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
      const __m512i qh16 = _mm512_castsi256_si512(qh);
      const __m512i sc8 = _mm512_castsi256_si512(
          _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)), 1),
                           _mm256_set1_epi32(1)));
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m512i hw = _mm512_permutexvar_epi32(idx_h[h], qh16);
        const __m512i gi = _mm512_or_si512(
            lo, _mm512_and_si512(_mm512_srlv_epi32(_mm512_sllv_epi32(hw, shl), shr), _mm512_set1_epi32(0x700)));
        rows[r].g[2 * h] = _mm512_add_epi8(_mm512_i32gather_epi64(_mm512_castsi512_si256(gi), grid, 8), one);
        rows[r].g[2 * h + 1] = _mm512_add_epi8(_mm512_i32gather_epi64(_mm512_extracti64x4_epi64(gi, 1), grid, 8), one);
      }
      for (int p = 0; p < 4; ++p) rows[r].sc[p] = scale_pair(sc8, p);
      rows[r].dsc = _mm256_mask_sub_epi32(_mm512_castsi512_si256(sc8), _mm256_movepi32_mask(_mm256_slli_epi32(qh, 16)),
                                          _mm256_setzero_si256(), _mm512_castsi512_si256(sc8));
      rows[r].d = half_to_float(b.d);
    }
    for (int64_t t = 0; t < nt; ++t) {
      const BlockQ8_K& ab = reinterpret_cast<const BlockQ8_K*>(act + t * m.act_row_stride)[ib];
      ActQ8K av;
      av.load(ab);
      __m512i neg_sums[4];
      for (int p = 0; p < 4; ++p)
        neg_sums[p] =
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, av.x[p]));
      const __m256i bs32 =
          _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums)), _mm256_set1_epi16(1));
      for (int r = 0; r < kRows; ++r) {
        __m512i s = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p)
          s = _mm512_add_epi32(
              s, _mm512_mullo_epi32(_mm512_dpbusd_epi32(neg_sums[p], rows[r].g[p], av.x[p]), rows[r].sc[p]));
        const int sum1 = hsum_epi32(_mm256_mullo_epi32(rows[r].dsc, bs32));
        const float d = rows[r].d * ab.d;
        acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold16(s)), acc[t][r]);
        acc1[t][r] = std::fma(d, static_cast<float>(sum1), acc1[t][r]);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t) {
    alignas(16) float o[kRows];
    for (int r = 0; r < kRows; ++r) o[r] = hsum256(acc[t][r]) + kIq1Delta * acc1[t][r];
    store_rows4(m.out + (t0 + t) * m.out_stride + r0, rstep, _mm_load_ps(o));
  }
}

void gemv4_iq1s_tokens(const MatmulArgs& m, int64_t r0, int64_t rstep) {
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += 64) gemv4_iq1s_chunk(m, r0, rstep, t0, std::min<int64_t>(64, m.n_tok - t0));
}

}  // namespace

GemvTokensFn gemv_tokens_fn_iq(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS:
      return gemv4_iq2xxs_tokens;
    case GgmlType::IQ1_S:
      return gemv4_iq1s_tokens;
    default:
      return gemv_tokens_fn_iq4(t);
  }
}

Gemv4Fn gemv4_fn_iq(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS:
      return gemv4_iq2xxs;
    case GgmlType::IQ2_XS:
      return gemv4_iq2xs;
    case GgmlType::IQ2_S:
      return gemv4_iq2s;
    case GgmlType::IQ3_XXS:
      return gemv4_iq3xxs;
    case GgmlType::IQ3_S:
      return gemv4_iq3s;
    case GgmlType::IQ1_S:
      return gemv4_iq1s;
    case GgmlType::IQ1_M:
      return gemv4_iq1m;
    default:
      return gemv4_fn_iq4(t);
  }
}

}  // namespace ds::avx512
