// AVX-512 flash attention (GQA) and absorbed MLA: the shared driver
// (kernels/simd/attention_driver.h: KV tiles, online softmax, head groups) instantiated
// with 16-lane float vectors, masked loads for row tails, and this ISA's KV row converter.
#include "kernels/avx512/intrinsics.h"

#include "kernels/avx512/kernels_avx512.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/simd/attention_driver.h"

namespace ds::avx512 {
namespace {

struct Vec16 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kRegs = 32;
  static constexpr bool kBf16Dot = false;  // Vec16Bf16 below
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float f) { return _mm512_set1_ps(f); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T load_tail(const float* p, int64_t i, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(i, n), p + i); }
  static void store_tail(float* p, int64_t i, int64_t n, T v) { _mm512_mask_storeu_ps(p + i, tail_mask(i, n), v); }
  static T zero_tail(T v, int64_t i, int64_t n) { return _mm512_maskz_mov_ps(tail_mask(i, n), v); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T exp(T x) { return exp_ps(x); }
  static float reduce_add(T v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(T v) { return _mm512_reduce_max_ps(v); }
  [[gnu::always_inline]] static T reduce_block(const T* a);
  [[gnu::always_inline]] static void transpose(T* r);
  static void load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n);
  // Elements [i, i + 16) of a KV row of type KT (F32, F16 or BF16) as floats.
  template <GgmlType KT>
  [[gnu::always_inline]] static T load_kv(const uint8_t* row, int i) {
    if constexpr (KT == GgmlType::F32) return _mm512_loadu_ps(row + 4 * i);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i));
    if constexpr (KT == GgmlType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

// Vec16 with AVX512_BF16's dot products for BF16 caches (attention_bf16.h): vectors of
// 32 bf16 held as 16 dwords, each a pair (element 2i in bits 0-15, 2i + 1 in bits 16-31).
// The two AVX512_BF16 instructions are inline assembly, as in matmul.cpp: this file is
// compiled without -mavx512bf16 and only the table of a CPU with the extension
// (table.cpp) calls flash_attn_bf16.
struct Vec16Bf16 : Vec16 {
  static constexpr bool kBf16Dot = true;
  // acc + a.lo * b.lo + a.hi * b.hi per lane (vdpbf16ps: products exact, f32 sums).
  static T dot2(T acc, T a, T b) {
    asm("vdpbf16ps %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
    return acc;
  }
  // The 32 floats lo, hi rounded to bf16 (nearest even, vcvtne2ps2bf16): dword i =
  // (x[2i], x[2i + 1]).
  static T pack_bf16(T lo, T hi) {
    T r;
    asm("vcvtne2ps2bf16 %[lo], %[hi], %[r]" : [r] "=v"(r) : [hi] "v"(hi), [lo] "v"(lo));
    return r;
  }
  // Dwords [i, i + 16) of p, those at n or past it zero.
  static T load_bits(const uint8_t* p, int i, int n) {
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(tail_mask(i, n), p + 4 * i));
  }
  // Elements [i, i + 16) of two bf16 rows as pairs (r0[c], r1[c]); elements at n or past it,
  // and every r1 element when r1 is null, zero.
  static T pair_rows(const uint8_t* r0, const uint8_t* r1, int i, int n) {
    const __mmask16 m = tail_mask(i, n);
    const __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + 2 * i));
    if (!r1) return _mm512_castsi512_ps(a);
    const __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1 + 2 * i));
    return _mm512_castsi512_ps(_mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
  }
  // The pairs with their second element zeroed.
  static T keep_first(T v) { return _mm512_castsi512_ps(_mm512_maskz_mov_epi16(0x55555555u, _mm512_castps_si512(v))); }
};

// Lane k = the sum of the 16 lanes of a[k], by one tree for every lane whatever the other
// inputs: s1[l] = v[l] + v[l + 8], s2[l] = s1[l] + s1[l + 4], s3[l] = s2[l] + s2[l + 2],
// s3[0] + s3[1] (the driver's [BATCH_INVARIANT] scores rely on it). Each step adds pairs of
// inputs' halves side by side; the last permute puts a[k]'s sum in lane k.
inline Vec16::T Vec16::reduce_block(const T* a) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)  // lanes 0-7: a[2i] halves, lanes 8-15: a[2i+1]
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // 128-bit lane k: a[4i + k]
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i) {  // 128-bit lane k: [a[8i + k] (2 lanes), a[8i + k + 4] (2 lanes)]
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(c[2 * i]), _mm512_castps_pd(c[2 * i + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(c[2 * i]), _mm512_castps_pd(c[2 * i + 1]));
    d[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  // 128-bit lane k: [a[k], a[k + 4], a[k + 8], a[k + 12]].
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
}

// r[c] becomes column c of the 16 x 16 block whose row k was r[k] (lane k = old r[k][c]):
// pairs of rows interleaved, then pairs of pairs, then the 128-bit lanes gathered in two
// steps, 16 shuffles each.
inline void Vec16::transpose(T* r) {
  __m512 t[16], u[16], v[16];
  for (int i = 0; i < 8; ++i) {  // 128-bit lane L: [r2i[4L], r2i+1[4L], r2i[4L+1], r2i+1[4L+1]] (lo)
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)  // u[4i + c], 128-bit lane L: column 4L + c of rows 4i..4i+3
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(t[4 * i + h]), b = _mm512_castps_pd(t[4 * i + 2 + h]);
      u[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      u[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int c = 0; c < 4; ++c)  // v[c], v[c + 4]: rows 0-7, lanes L 0-1 / 2-3; v[c + 8], v[c + 12]: rows 8-15
    for (int g = 0; g < 2; ++g) {
      v[c + 8 * g] = _mm512_shuffle_f32x4(u[8 * g + c], u[8 * g + 4 + c], 0x44);
      v[c + 8 * g + 4] = _mm512_shuffle_f32x4(u[8 * g + c], u[8 * g + 4 + c], 0xEE);
    }
  for (int c = 0; c < 4; ++c)
    for (int h = 0; h < 2; ++h) {  // columns 8h + c and 8h + 4 + c
      r[8 * h + c] = _mm512_shuffle_f32x4(v[c + 4 * h], v[c + 8 + 4 * h], 0x88);
      r[8 * h + 4 + c] = _mm512_shuffle_f32x4(v[c + 4 * h], v[c + 8 + 4 * h], 0xDD);
    }
}

// Converts n elements of one KV row to float.
void Vec16::load_kv_row(GgmlType t, const uint8_t* src, float* dst, int n) {
  switch (t) {
    case GgmlType::F32:
      for (int i = 0; i < n; i += 16)
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n), _mm512_maskz_loadu_ps(tail_mask(i, n), src + 4 * i));
      return;
    case GgmlType::F16:
      for (int i = 0; i < n; i += 16) {
        const __m256i h = _mm256_maskz_loadu_epi16(tail_mask(i, n), src + 2 * i);
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n), _mm512_cvtph_ps(h));
      }
      return;
    case GgmlType::BF16:
      for (int i = 0; i < n; i += 16) {
        const __m256i h = _mm256_maskz_loadu_epi16(tail_mask(i, n), src + 2 * i);
        _mm512_mask_storeu_ps(dst + i, tail_mask(i, n),
                              _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
      return;
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (int ib = 0; ib < n / 32; ++ib) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[ib].d));
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[ib].qs));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[ib].qs + 16));
        _mm512_storeu_ps(dst + 32 * ib, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
        _mm512_storeu_ps(dst + 32 * ib + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace

void flash_attn(const AttnArgs& a) {
  simd::flash_attn<Vec16>(a);
}
void flash_attn_bf16(const AttnArgs& a) {
  simd::flash_attn<Vec16Bf16>(a);
}
void mla_attn(const MlaArgs& a) {
  simd::mla_attn<Vec16>(a);
}
void mla_attn_bf16(const MlaArgs& a) {
  simd::mla_attn<Vec16Bf16>(a);
}

}  // namespace ds::avx512
