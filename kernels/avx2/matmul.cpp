// AVX2 vec_dot and matmul, the same tile loop as kernels/avx512/matmul.cpp: each weight block
// is unpacked once and multiplied with NT activation rows (NT a template parameter, so the per-row
// accumulators live in registers). [BATCH_INVARIANT]: output (r, t) is always produced by the same
// sequence of accumulate() calls on its own accumulator followed by the same reduce(), whatever NT,
// n_tok or the row range are; vec_dot is the NT = 1 tile. Other types fall back to the reference.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/avx2/dot_blocks.h"
#include "kernels/avx2/kernels_avx2.h"
#include "kernels/ref/ref.h"

namespace ds::avx2 {
namespace {

constexpr int kMaxTile = 4;        // activation rows per unpacked weight block
constexpr int64_t kTokChunk = 64;  // activation rows kept hot in L2 while rows stream past
// How far ahead of the block being unpacked a one-row tile prefetches its weights. The
// hardware prefetcher alone leaves the stream waiting while the unpacking runs: 2-thread cold
// GEMV (bench_kernels GEMV_COLD/avx2, 1536x8960 x 48 matrices) without / with 2 KB, GB/s:
// Q4_K 8.5 / 9.3, Q6_K 8.2 / 11.0, Q8_0 7.0 / 10.6, IQ4_XS 7.1 / 9.1; 1 KB gave half the gain,
// 1.5-8 KB are within the noise of each other (4 KB had the best medians). Past the row's end
// it reads the next rows, which are the thread's next work.
constexpr size_t kPrefetchBytes = 4096;

[[gnu::always_inline]] inline void prefetch_ahead(const void* block, size_t bytes) {
  const char* q = static_cast<const char*>(block) + kPrefetchBytes;
  for (size_t x = 0; x < bytes; x += 64) _mm_prefetch(q + x, _MM_HINT_T0);
}

template <class Dq>
constexpr bool kIq32 = std::is_base_of_v<IqDot32Base, Dq>;  // fma float step ([IQUANT_ORDER])
template <class Dq>
constexpr bool kAny32 = std::is_base_of_v<Dot32Base, Dq> || kIq32<Dq>;

// Decode of Q4_0, Q5_0 and MXFP4 against unsigned weights: w = u - c with u = the nibble (Q4_0,
// c = 8), nibble | fifth bit (Q5_0, 16) or the value plus 12 (MXFP4, values -12..12), so that
// sum w a = sum u a - c sum a, exactly in integers: maddubs(u, a) needs neither |w| nor a
// signed activation (two instructions fewer per block and row), and c sum a comes from a
// per-call table of the activation's blocks (offset_sums) shared by every row.
template <class Dq>
constexpr int kOffset = std::is_same_v<Dq, DotQ4_0>    ? 8
                        : std::is_same_v<Dq, DotQ5_0>  ? 16
                        : std::is_same_v<Dq, DotMXFP4> ? 12
                                                       : 0;
template <class Dq>
constexpr bool kUnsigned = kOffset<Dq> != 0;
// The same types have |w| <= 16: the maddubs pairs of four blocks (or rows) are folded in
// int16 by two levels of hadd, 8 products of at most 16 x 128 each per lane (16384, no wrap;
// 31 x 128 = 31744 for the unsigned weights), and widened by one madd, instead of a madd per
// block.
template <class Dq>
constexpr bool kFold16 = kUnsigned<Dq>;

// Four blocks' maddubs pairs (kFold16 types) folded to their four lane sums (exact).
[[gnu::always_inline]] inline __m128i fold4_16(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h =
      _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(v0, v1), _mm256_hadd_epi16(v2, v3)), _mm256_set1_epi16(1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Four blocks' int32 lanes folded to their four lane sums (exact integer sums).
[[gnu::always_inline]] inline __m128i fold4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// A 32-block's scale field as bits: MXFP4's E8M0 exponent byte, else the fp16 d.
template <class WB>
constexpr int kScaleBits = std::is_same_v<WB, BlockMxfp4> ? 8 : 16;
template <class WB>
[[gnu::always_inline]] inline uint64_t scale_field(const WB& b) {
  if constexpr (std::is_same_v<WB, BlockMxfp4>) {
    return b.e;
  } else {
    return b.d;
  }
}
// Four scale fields packed kScaleBits apart (field k at bit k * kScaleBits) as float lanes
// 0..3, decoded in the vector unit: the fp16 d fields by one vcvtph2ps, MXFP4's E8M0 exponents
// with iq::mxfp4_scale's bit rule (e >= 2: (e - 1) << 23, else 0x00200000 << e). The same
// floats as scale() block by block; the fields travel in one general register (one transfer).
template <class WB>
[[gnu::always_inline]] inline __m128 scale_lanes4(uint64_t packed) {
  if constexpr (std::is_same_v<WB, BlockMxfp4>) {
    const __m128i ev = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(packed)));
    const __m128i normal = _mm_slli_epi32(_mm_sub_epi32(ev, _mm_set1_epi32(1)), 23);
    const __m128i small = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), ev);
    return _mm_castsi128_ps(_mm_blendv_epi8(small, normal, _mm_cmpgt_epi32(ev, _mm_set1_epi32(1))));
  } else {
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(packed)));
  }
}
// Four consecutive blocks' scales.
template <class WB>
[[gnu::always_inline]] inline __m128 scales4(const WB* b) {
  uint64_t packed = 0;
  for (int k = 0; k < 4; ++k) packed |= scale_field(b[k]) << (kScaleBits<WB> * k);
  return scale_lanes4<WB>(packed);
}

constexpr int64_t kMaxOffsetBlocks = 2048;  // offset_sums on the stack: rows up to 65,536 wide

template <class Dq>
[[gnu::always_inline]] inline __m256i unsigned_weights(const typename Dq::WBlock& b, __m128i mx_table) {
  if constexpr (std::is_same_v<Dq, DotQ4_0>) {
    return nibbles32(b.qs);
  } else if constexpr (std::is_same_v<Dq, DotQ5_0>) {
    return _mm256_or_si256(nibbles32(b.qs), high_bits32(b.qh));
  } else {
    return iq_nibble_values(b.qs, mx_table);
  }
}
// MXFP4's value table plus 12 (unsigned_weights).
[[gnu::always_inline]] inline __m128i mxfp4_unsigned_table() {
  return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)), _mm_set1_epi8(12));
}

// out[ib] = c * (sum of activation block ib's 32 quants), nb blocks.
template <class Dq>
void offset_sums(int64_t nb, const BlockQ8_0* a, int32_t* out) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  auto block = [&](int64_t ib) {
    return _mm256_madd_epi16(
        _mm256_maddubs_epi16(ones8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[ib].qs))), ones16);
  };
  int64_t ib = 0;
  for (; ib + 4 <= nb; ib += 4)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + ib),
        _mm_mullo_epi32(fold4(block(ib), block(ib + 1), block(ib + 2), block(ib + 3)), _mm_set1_epi32(kOffset<Dq>)));
  for (; ib < nb; ++ib) out[ib] = kOffset<Dq> * hsum_epi32(block(ib));
}

// R adjacent rows of a 32-block type against one activation row (decode), four blocks per
// step. The one-block tile pays a horizontal sum (7 instructions) per 32 elements, more than
// the product: here four blocks' int32 lanes are folded by three hadds and one 128-bit add
// (exact integer sums), and the float steps then run block by block in the tile's order, so
// each output has the tile's bits. With R = 2 (the 4- and 5-bit types) two rows' float
// chains, each one dependent add or fma per 32 elements that bounds a single row at its
// latency, overlap, and the activation block's load and scale serve both; the rows are
// adjacent, so prefetching ahead of the last covers the others. One thread, 64 x 1536 from
// L2, ns per block, R = 1 / 2: Q4_0 2.66 / 2.21, IQ4_NL 2.60 / 2.27, MXFP4 2.62 / 2.37;
// GEMV_COLD 2 threads GOPS: Q4_0 37.8-39.0 / 45.6-47.4, MXFP4 42.6-42.9 / 43.6-44.1. Q8_0,
// which reads its bytes at memory speed, stays at R = 1: two interleaved rows read it slower
// cold (1 thread 30 -> 16-25 GOPS).
// With csum (offset_sums, kOffset types) the products take unsigned_weights.
template <class Dq, int R>
void row32(int64_t nb, const typename Dq::WBlock* const* w, const BlockQ8_0* a, float* const* out,
           const int32_t* csum = nullptr) {
  float acc[R] = {};
  const __m256i ones = _mm256_set1_epi16(1);
  [[maybe_unused]] const __m128i mx_table = mxfp4_unsigned_table();
  auto pairs = [&](const typename Dq::WBlock& b, __m256i x) {  // int16 pair products
    if constexpr (kUnsigned<Dq>) {
      if (csum) return _mm256_maddubs_epi16(unsigned_weights<Dq>(b, mx_table), x);
    }
    const __m256i wq = Dq::weights(b);
    return _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(x, wq));
  };
  auto block_sum = [&](const typename Dq::WBlock& b, __m256i x) { return _mm256_madd_epi16(pairs(b, x), ones); };
  auto step = [](float& acc_r, float sumf, float dw, float da) {
    const float dd = dw * da;
    acc_r = kIq32<Dq> ? std::fma(sumf, dd, acc_r) : acc_r + sumf * dd;
  };
  auto load_a = [&](int64_t ib) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[ib].qs)); };
  int64_t ib = 0;
  for (; ib + 4 <= nb; ib += 4) {
    prefetch_ahead(w[R - 1] + ib, 4 * sizeof(typename Dq::WBlock));
    __m256i sums[R][4];
    for (int k = 0; k < 4; ++k) {
      const __m256i x = load_a(ib + k);
      for (int r = 0; r < R; ++r) sums[r][k] = kFold16<Dq> ? pairs(w[r][ib + k], x) : block_sum(w[r][ib + k], x);
    }
    alignas(16) float f[R][4], dd[R][4];  // per block: the sum, d_w * d_a
    const __m128 da = scales4(a + ib);
    for (int r = 0; r < R; ++r) {
      __m128i si = kFold16<Dq> ? fold4_16(sums[r][0], sums[r][1], sums[r][2], sums[r][3])
                               : fold4(sums[r][0], sums[r][1], sums[r][2], sums[r][3]);
      if (csum) si = _mm_sub_epi32(si, _mm_loadu_si128(reinterpret_cast<const __m128i*>(csum + ib)));
      _mm_store_ps(f[r], _mm_cvtepi32_ps(si));
      _mm_store_ps(dd[r], _mm_mul_ps(scales4(w[r] + ib), da));
    }
    for (int k = 0; k < 4; ++k)
      for (int r = 0; r < R; ++r)
        acc[r] = kIq32<Dq> ? std::fma(f[r][k], dd[r][k], acc[r]) : acc[r] + f[r][k] * dd[r][k];
  }
  for (; ib < nb; ++ib) {
    const __m256i x = load_a(ib);
    const float da = half_to_float(a[ib].d);
    for (int r = 0; r < R; ++r)
      step(acc[r], static_cast<float>(hsum_epi32(block_sum(w[r][ib], x)) - (csum ? csum[ib] : 0)), Dq::scale(w[r][ib]),
           da);
  }
  for (int r = 0; r < R; ++r) *out[r] = acc[r];
}

// The K-quants (Q8_K activations, ints() and step()).
template <class Dq>
constexpr bool kKquant = requires(const typename Dq::Unpacked& u, const typename Dq::ABlock& a, __m256i& v,
                                  typename Dq::Acc& acc) {
  Dq::ints(u, a, v, v);
  Dq::step(u, a, 0, 0, acc);
};

// out[t] = dot(weight row w, activation row act + t * act_stride), t < NT.
template <class Dq, int NT>
void tile(int64_t nb, const typename Dq::WBlock* w, const uint8_t* act, size_t act_stride, float* out,
          int64_t out_stride) {
  if constexpr (NT == 1 && kAny32<Dq>) {
    const typename Dq::WBlock* rows[1] = {w};
    float* outs[1] = {out};
    row32<Dq, 1>(nb, rows, reinterpret_cast<const BlockQ8_0*>(act), outs);
    return;
  }
  if constexpr (NT == 1 && requires { Dq::weight_scales(*w); }) {
    const auto* a = reinterpret_cast<const typename Dq::ABlock*>(act);
    typename Dq::Unpacked u;
    __m128 acc = _mm_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
      prefetch_ahead(w + ib, sizeof(typename Dq::WBlock));
      Dq::unpack(w[ib], u);
      Dq::accumulate1(u, Dq::weight_scales(w[ib]), a[ib], acc);
    }
    *out = _mm_cvtss_f32(acc);
    return;
  }
  typename Dq::Acc acc[NT];
  const typename Dq::ABlock* a[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = Dq::zero();
    a[t] = reinterpret_cast<const typename Dq::ABlock*>(act + static_cast<size_t>(t) * act_stride);
  }
  typename Dq::Unpacked u;
  for (int64_t ib = 0; ib < nb; ++ib) {
    if constexpr (NT == 1) prefetch_ahead(w + ib, sizeof(typename Dq::WBlock));  // decode: one row stream
    Dq::unpack(w[ib], u);
    if constexpr (NT % 4 == 0 && kKquant<Dq>) {
      // ints() of the NT tokens with the sub-block loop outside: each unpacked register is
      // read once for all of them (the unpacked block does not fit in the registers, so a
      // token-outer loop reloaded it per token). Per token the same products in the same order.
      __m256i s[NT], m[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i q = u.q[j], sc = u.sc[j];
        for (int t = 0; t < NT; ++t) {
          s[t] = _mm256_add_epi32(
              s[t], dot_scaled(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][ib].qs + 32 * j)), sc));
          asm("" : "+x"(s[t]));  // keeps the running sums (unreassociated, the products unspilled)
        }
      }
      for (int t = 0; t < NT; ++t) m[t] = Dq::min_term(u, a[t][ib]);
      // Four tokens' two lane sums folded together (exact), then each token's float step
      // in the one-token order: the same bits as accumulate().
      for (int t0 = 0; t0 < NT; t0 += 4) {
        alignas(16) int32_t si[4], mi[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(si), fold4(s[t0], s[t0 + 1], s[t0 + 2], s[t0 + 3]));
        _mm_store_si128(reinterpret_cast<__m128i*>(mi), fold4(m[t0], m[t0 + 1], m[t0 + 2], m[t0 + 3]));
        for (int t = 0; t < 4; ++t) Dq::step(u, a[t0 + t][ib], si[t], mi[t], acc[t0 + t]);
      }
    } else if constexpr (NT > 1 && requires(const typename Dq::ABlock* const* ab) {
                           Dq::template accumulate_n<NT>(u, ab, acc);
                         }) {
      const typename Dq::ABlock* ab[NT];
      for (int t = 0; t < NT; ++t) ab[t] = a[t] + ib;
      if constexpr (NT > 8 && NT % 8 == 0) {
        for (int g = 0; g < NT; g += 8) Dq::template accumulate_n<8>(u, ab + g, acc + g);
      } else {
        Dq::template accumulate_n<NT>(u, ab, acc);
      }
    } else {
      for (int t = 0; t < NT; ++t) Dq::accumulate(u, a[t][ib], acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t * out_stride] = Dq::reduce(acc[t]);
}

// The scales of eight weight rows' block ib as float lanes 0..7.
template <class WB>
[[gnu::always_inline]] inline __m256 scales_rows8(const WB* const* w, int64_t ib) {
  if constexpr (std::is_same_v<WB, BlockMxfp4>) {
    uint64_t lo = 0, hi = 0;
    for (int k = 0; k < 4; ++k) {
      lo |= scale_field(w[k][ib]) << (8 * k);
      hi |= scale_field(w[4 + k][ib]) << (8 * k);
    }
    return _mm256_set_m128(scale_lanes4<WB>(hi), scale_lanes4<WB>(lo));
  } else {  // eight fp16 fields inserted into one vector (packing them in a GPR measured slower here)
    return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(w[0][ib].d), static_cast<short>(w[1][ib].d),
                                          static_cast<short>(w[2][ib].d), static_cast<short>(w[3][ib].d),
                                          static_cast<short>(w[4][ib].d), static_cast<short>(w[5][ib].d),
                                          static_cast<short>(w[6][ib].d), static_cast<short>(w[7][ib].d)));
  }
}

// Eight weight rows x NT activation rows of a 32-block type (Q4_0, Q5_0, Q8_0, IQ4_NL,
// MXFP4), one lane per weight row. The one-row tile above pays a horizontal sum, two scale
// conversions and a scalar float step for every (row, token, block): more than the product
// itself. Here the eight rows' int32 partial sums of a block are folded together by two
// levels of hadd and one 128-bit add (integer sums, exact in any order), then the float step
// runs for all 8 rows at once with the same operations in the same order per lane: acc +
// float(sumi) * (d_w * d_a) from 0 ([QUANT_EXACT]), or fma(float(sumi), d_w * d_a, acc) for
// IQ4_NL and MXFP4 ([IQUANT_ORDER]); so every output has the bits of the one-row tile.
// GEMM/avx2 4096x4096, 64 tokens, one thread, GOPS, one-row tile -> eight rows: IQ4_NL
// 28.0 -> 57.5, MXFP4 28.2 -> 58.7.
template <class Dq, int NT>
void tile32_rows8(int64_t nb, const uint8_t* w0, size_t w_stride, const uint8_t* act, size_t act_stride, float* out,
                  int64_t out_stride) {
  using WB = typename Dq::WBlock;
  const BlockQ8_0* a[NT];
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
    acc[t] = _mm256_setzero_ps();
  }
  const WB* w[8];
  for (int r = 0; r < 8; ++r) w[r] = reinterpret_cast<const WB*>(w0 + static_cast<size_t>(r) * w_stride);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t ib = 0; ib < nb; ++ib) {
    if (ib % 2 == 0)  // the 8 row streams, 16 blocks ahead (without: batched decode 0.75x)
      for (int r = 0; r < 8; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + ib + 16), _MM_HINT_T0);
    __m128i quad[NT][2];  // [token][rows 0-3 | 4-7]: the rows' block sums
    for (int q = 0; q < 2; ++q) {
      __m256i pairs[NT][2];
      for (int pr = 0; pr < 2; ++pr) {
        __m256i p[NT][2];
        for (int k = 0; k < 2; ++k) {
          const WB& b = w[4 * q + 2 * pr + k][ib];
          const __m256i wq = Dq::weights(b), aw = _mm256_abs_epi8(wq);
          for (int t = 0; t < NT; ++t) {  // |w| x (a * sign(w)): exact int16 pairs
            const __m256i s = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][ib].qs)), wq);
            p[t][k] = kFold16<Dq> ? _mm256_maddubs_epi16(aw, s) : _mm256_madd_epi16(_mm256_maddubs_epi16(aw, s), ones);
          }
        }
        for (int t = 0; t < NT; ++t)
          pairs[t][pr] = kFold16<Dq> ? _mm256_hadd_epi16(p[t][0], p[t][1]) : _mm256_hadd_epi32(p[t][0], p[t][1]);
      }
      for (int t = 0; t < NT; ++t) {  // [r0..r3 low halves | r0..r3 high halves] -> r0..r3
        const __m256i h = kFold16<Dq> ? _mm256_madd_epi16(_mm256_hadd_epi16(pairs[t][0], pairs[t][1]), ones)
                                      : _mm256_hadd_epi32(pairs[t][0], pairs[t][1]);
        quad[t][q] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      }
    }
    const __m256 dw = scales_rows8(w, ib);
    for (int t = 0; t < NT; ++t) {
      const __m256 sumf = _mm256_cvtepi32_ps(_mm256_set_m128i(quad[t][1], quad[t][0]));
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(half_to_float(a[t][ib].d)));
      acc[t] = kIq32<Dq> ? _mm256_fmadd_ps(sumf, dd, acc[t]) : _mm256_add_ps(acc[t], _mm256_mul_ps(sumf, dd));
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

// Float weights: 8 elements per step; the tail step reads from a zero-padded copy.
inline __m256 load8_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

struct DotF32 {
  using T = float;
  static __m256 load(const T* p) { return _mm256_loadu_ps(p); }
};
struct DotF16 {
  using T = uint16_t;
  static __m256 load(const T* p) { return load8_f16(p); }
};
struct DotBF16 {
  using T = uint16_t;
  static __m256 load(const T* p) { return load8_bf16(p); }
};

template <class F>
__m256 load_tail(const typename F::T* p, int64_t left) {
  typename F::T tmp[8] = {};
  for (int64_t i = 0; i < left; ++i) tmp[i] = p[i];
  return F::load(tmp);
}

template <class F, int NT>
void tile_float(int64_t n, const typename F::T* w, const uint8_t* act, size_t act_stride, float* out,
                int64_t out_stride) {
  __m256 acc[NT];
  const typename F::T* a[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    a[t] = reinterpret_cast<const typename F::T*>(act + static_cast<size_t>(t) * act_stride);
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = F::load(w + i);
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(wv, F::load(a[t] + i), acc[t]);
  }
  if (i < n) {
    const __m256 wv = load_tail<F>(w + i, n - i);
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(wv, load_tail<F>(a[t] + i, n - i), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t * out_stride] = hsum256(acc[t]);
}

// Activation rows per unpacked block: the i-quants' unpack (grid lookups, sign and scale
// vectors) costs several times their per-row products, so IQ1_S and IQ4_XS take 8 rows per
// tile and the grid types and IQ1_M, whose unpack is the heaviest, 16 (two groups of 8
// against one unpacked block). GEMM/avx2 64 tokens, one thread, 8 -> 16 rows, GOPS: IQ2_XXS
// 73-74 -> 80-81, IQ2_XS 52-53 -> 61-65, IQ3_XXS 58 -> 71-72, IQ3_S 55-56 -> 69-70, IQ1_M
// 31-32 -> 35-37; IQ1_S and IQ4_XS level.
template <class Dq>
constexpr int tile_rows() {
  constexpr bool kGrid = std::is_base_of_v<IqGridBase<1, 8>, Dq> || std::is_base_of_v<IqGridBase<1, 4>, Dq> ||
                         std::is_base_of_v<IqGridBase<1, 1>, Dq> || std::is_same_v<Dq, DotIQ1_M>;
  constexpr bool kIq8 = std::is_same_v<Dq, DotIQ1_S> || std::is_same_v<Dq, DotIQ4_XS>;
  return kGrid ? 16 : kIq8 ? 8 : kMaxTile;
}

// The tail of fewer than min(tile_rows<Dq>(), 8) activation rows as one tile of n rows.
template <class Dq, int N = std::min(tile_rows<Dq>(), 8) - 1>
void tile_tail(int n, int64_t nb, const typename Dq::WBlock* w, const uint8_t* act, size_t act_stride, float* out,
               int64_t out_stride) {
  if constexpr (N > 0) {
    if (n == N) return tile<Dq, N>(nb, w, act, act_stride, out, out_stride);
    tile_tail<Dq, N - 1>(n, nb, w, act, act_stride, out, out_stride);
  }
}

// One weight row against activation rows [0, n_tok), NT rows at a time then the tail.
template <class Dq>
struct Quant {
  static void row(const MatmulArgs& m, int64_t r, int64_t t0, int64_t nt) {
    constexpr int kTile = tile_rows<Dq>();
    const auto* w = reinterpret_cast<const typename Dq::WBlock*>(static_cast<const uint8_t*>(m.w) + r * m.w_row_stride);
    const int64_t nb = m.n_in / Dq::kBlock;
    const uint8_t* act = static_cast<const uint8_t*>(m.act);
    int64_t t = t0;
    for (; t + kTile <= t0 + nt; t += kTile)
      tile<Dq, kTile>(nb, w, act + t * m.act_row_stride, m.act_row_stride, m.out + t * m.out_stride + r, m.out_stride);
    if constexpr (kTile > 8) {
      if (t + 8 <= t0 + nt) {
        tile<Dq, 8>(nb, w, act + t * m.act_row_stride, m.act_row_stride, m.out + t * m.out_stride + r, m.out_stride);
        t += 8;
      }
    }
    tile_tail<Dq>(static_cast<int>(t0 + nt - t), nb, w, act + t * m.act_row_stride, m.act_row_stride,
                  m.out + t * m.out_stride + r, m.out_stride);
  }
  static float dot(int64_t n, const void* w, const void* a) {
    float out;
    tile<Dq, 1>(n / Dq::kBlock, static_cast<const typename Dq::WBlock*>(w), static_cast<const uint8_t*>(a), 0, &out, 0);
    return out;
  }
  // Rows [r0, r1): for 2+ activation rows, 32-block types eight at a time through
  // tile32_rows8, the rest by row(). One activation row (decode) stays on row(): one
  // sequential stream, where the 8 row streams, prefetched, read no faster from memory
  // (dense Q8_0 decode 15.2 vs 15.3 t/s; 11.3 without the prefetch).
  static void rows(const MatmulArgs& m, int64_t r0, int64_t r1, int64_t t0, int64_t nt) {
    int64_t r = r0;
    if constexpr (kAny32<Dq>) {
      const int64_t nb = m.n_in / Dq::kBlock;
      const uint8_t* act = static_cast<const uint8_t*>(m.act);
      for (; nt > 1 && r + 8 <= r1; r += 8) {
        const uint8_t* w = static_cast<const uint8_t*>(m.w) + r * m.w_row_stride;
        int64_t t = t0;
        for (; t + kMaxTile <= t0 + nt; t += kMaxTile)
          tile32_rows8<Dq, kMaxTile>(nb, w, m.w_row_stride, act + t * m.act_row_stride, m.act_row_stride,
                                     m.out + t * m.out_stride + r, m.out_stride);
        const uint8_t* at = act + t * m.act_row_stride;
        float* o = m.out + t * m.out_stride + r;
        switch (t0 + nt - t) {  // < kMaxTile left
          case 3:
            tile32_rows8<Dq, 3>(nb, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
            break;
          case 2:
            tile32_rows8<Dq, 2>(nb, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
            break;
          case 1:
            tile32_rows8<Dq, 1>(nb, w, m.w_row_stride, at, m.act_row_stride, o, m.out_stride);
            break;
          default:
            break;
        }
      }
    }
    if constexpr (kAny32<Dq> && !std::is_same_v<Dq, DotQ8_0>) {
      if (nt == 1) {  // decode: rows in pairs (row32)
        const auto* act =
            reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(m.act) + t0 * m.act_row_stride);
        const int64_t nb = m.n_in / Dq::kBlock;
        alignas(16) int32_t csum_buf[kUnsigned<Dq> ? kMaxOffsetBlocks : 1];
        const int32_t* csum = nullptr;
        if constexpr (kUnsigned<Dq>) {
          if (nb <= kMaxOffsetBlocks && r1 - r >= 4) {
            offset_sums<Dq>(nb, act, csum_buf);
            csum = csum_buf;
          }
        }
        for (; r + 2 <= r1; r += 2) {
          const auto* w = static_cast<const uint8_t*>(m.w) + r * m.w_row_stride;
          const typename Dq::WBlock* rows[2] = {reinterpret_cast<const typename Dq::WBlock*>(w),
                                                reinterpret_cast<const typename Dq::WBlock*>(w + m.w_row_stride)};
          float* outs[2] = {m.out + t0 * m.out_stride + r, m.out + t0 * m.out_stride + r + 1};
          row32<Dq, 2>(nb, rows, act, outs, csum);
        }
      }
    }
    for (; r < r1; ++r) row(m, r, t0, nt);
  }
};

template <class F>
struct Float {
  static void rows(const MatmulArgs& m, int64_t r0, int64_t r1, int64_t t0, int64_t nt) {
    for (int64_t r = r0; r < r1; ++r) row(m, r, t0, nt);
  }
  static void row(const MatmulArgs& m, int64_t r, int64_t t0, int64_t nt) {
    const auto* w = reinterpret_cast<const typename F::T*>(static_cast<const uint8_t*>(m.w) + r * m.w_row_stride);
    const uint8_t* act = static_cast<const uint8_t*>(m.act);
    int64_t t = t0;
    for (; t + kMaxTile <= t0 + nt; t += kMaxTile)
      tile_float<F, kMaxTile>(m.n_in, w, act + t * m.act_row_stride, m.act_row_stride, m.out + t * m.out_stride + r,
                              m.out_stride);
    float* o = m.out + t * m.out_stride + r;
    const uint8_t* at = act + t * m.act_row_stride;
    switch (t0 + nt - t) {
      case 3:
        tile_float<F, 3>(m.n_in, w, at, m.act_row_stride, o, m.out_stride);
        break;
      case 2:
        tile_float<F, 2>(m.n_in, w, at, m.act_row_stride, o, m.out_stride);
        break;
      case 1:
        tile_float<F, 1>(m.n_in, w, at, m.act_row_stride, o, m.out_stride);
        break;
      default:
        break;
    }
  }
  static float dot(int64_t n, const void* w, const void* a) {
    float out;
    tile_float<F, 1>(n, static_cast<const typename F::T*>(w), static_cast<const uint8_t*>(a), 0, &out, 0);
    return out;
  }
};

using RowFn = void (*)(const MatmulArgs&, int64_t, int64_t, int64_t, int64_t);
using DotFn = float (*)(int64_t, const void*, const void*);

template <class K>
constexpr std::pair<RowFn, DotFn> fns() {
  return {&K::rows, &K::dot};
}

std::pair<RowFn, DotFn> fast_path(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return fns<Float<DotF32>>();
    case GgmlType::F16:
      return fns<Float<DotF16>>();
    case GgmlType::BF16:
      return fns<Float<DotBF16>>();
    case GgmlType::Q4_0:
      return fns<Quant<DotQ4_0>>();
    case GgmlType::Q5_0:
      return fns<Quant<DotQ5_0>>();
    case GgmlType::Q8_0:
      return fns<Quant<DotQ8_0>>();
    case GgmlType::Q4_K:
      return fns<Quant<DotQ4K>>();
    case GgmlType::Q5_K:
      return fns<Quant<DotQ5K>>();
    case GgmlType::Q6_K:
      return fns<Quant<DotQ6K>>();
    case GgmlType::IQ1_S:
      return fns<Quant<DotIQ1_S>>();
    case GgmlType::IQ1_M:
      return fns<Quant<DotIQ1_M>>();
    case GgmlType::IQ2_XXS:
      return fns<Quant<DotIQ2_XXS>>();
    case GgmlType::IQ2_XS:
      return fns<Quant<DotIQ2_XS>>();
    case GgmlType::IQ2_S:
      return fns<Quant<DotIQ2_S>>();
    case GgmlType::IQ3_XXS:
      return fns<Quant<DotIQ3_XXS>>();
    case GgmlType::IQ3_S:
      return fns<Quant<DotIQ3_S>>();
    case GgmlType::IQ4_NL:
      return fns<Quant<DotIQ4_NL>>();
    case GgmlType::IQ4_XS:
      return fns<Quant<DotIQ4_XS>>();
    case GgmlType::MXFP4:
      return fns<Quant<DotMXFP4>>();
    default:
      return {nullptr, nullptr};
  }
}

}  // namespace

float vec_dot(GgmlType wtype, int64_t n, const void* w, const void* act) {
  const DotFn dot = fast_path(wtype).second;
  return dot ? dot(n, w, act) : ref::vec_dot(wtype, n, w, act);
}

void matmul(const MatmulArgs& m) {
  const RowFn row = fast_path(m.wtype).first;
  if (!row) return ref::matmul(m);
  // Token chunks stay in L2 while the weight rows of [row_begin, row_end) stream past.
  for (int64_t t0 = 0; t0 < m.n_tok; t0 += kTokChunk) {
    const int64_t nt = std::min(kTokChunk, m.n_tok - t0);
    row(m, m.row_begin, m.row_end, t0, nt);
  }
}

}  // namespace ds::avx2
