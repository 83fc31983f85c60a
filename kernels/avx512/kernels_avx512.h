// Internal: the AVX-512 kernels (one .cpp per op in this directory), assembled into a
// KernelTable by table.cpp. Signatures are those of kernels.h (kernels/entry_points.inc).
#pragma once
#include "kernels/kernels.h"

namespace ds::avx512 {

#include "kernels/entry_points.inc"

// matmul.cpp: vec_dot and matmul for CPUs without AVX512_BF16 (BF16 weights widened to
// float); every other weight type goes to vec_dot / matmul.
float vec_dot_without_bf16(GgmlType wtype, int64_t n, const void* w, const void* act);
void matmul_without_bf16(const MatmulArgs& m);
// attention.cpp: flash_attn and mla_attn for CPUs with AVX512_BF16: BF16 caches take bf16
// dot products (KernelTable::attn_bf16_dot); other caches as flash_attn and mla_attn.
void flash_attn_bf16(const AttnArgs& a);
void mla_attn_bf16(const MlaArgs& a);
// indexer.cpp: indexer_scores for CPUs with AVX512_BF16 (BF16 keys take vdpbf16ps; without
// the extension indexer_scores widens them to float).
void indexer_scores_bf16(const IndexerScoreArgs& a);

// matmul_panel.cpp: weight rows [r0, r0 + 16), or [r0, r0 + 32) where r0 + 32 <= row_end
// and the type has a two-panel kernel (all but Q6_K), x activation rows [t0, t0 + nt),
// nt <= kPanelMaxTok; returns the rows done (16 or 32). Bit-identical to matmul
// ([KQUANT_EXACT]); only for the types panel_supported() accepts.
constexpr int64_t kPanelMaxTok = 256;
bool panel_supported(GgmlType t);
int64_t panel_matmul(const MatmulArgs& m, int64_t r0, int64_t t0, int64_t nt);

// matmul_packed.cpp: matmul over a matrix with a packed copy (m.w_panels set, type
// repack_supported): packed panels for the 16-aligned rows, matmul() for the rest.
void packed_matmul(const MatmulArgs& m);

// matmul_gemv.cpp: the activation rows against weight rows [row_begin, row_end) in passes
// of 4 rows (decode, a few tokens); returns the first row not computed (fewer than a
// pass remain). A pass takes one row from each quarter of the range, so that a thread
// reads 4 sequential streams (see gemv_rows).
// Bit-identical to matmul ([KQUANT_EXACT]); only for the types gemv_supported() accepts.
bool gemv_supported(GgmlType t);
// Most activation rows for which matmul takes the GEMV passes (1 for most types).
int64_t gemv_max_tok(GgmlType t);
int64_t gemv_rows(const MatmulArgs& m);
// One pass: activation row t against weight rows r0 + k * rstep (k < 4), into
// out[t][r0 + k * rstep].
using Gemv4Fn = void (*)(const MatmulArgs& m, int64_t t, int64_t r0, int64_t rstep);
// matmul_gemv32.cpp: the 4-row pass for Q4_0 and Q5_0, else nullptr.
Gemv4Fn gemv4_fn_32(GgmlType t);
// matmul_iq_gemm.cpp: the 256-element i-quants against 2+ activation rows, weight rows in
// pairs from row_begin; returns the first row not computed (an odd last row). Bit-identical
// to the tile loop ([IQUANT_ORDER]). nullptr for other types.
using IqGemmFn = int64_t (*)(const MatmulArgs& m);
IqGemmFn iq_gemm_fn(GgmlType t);
// matmul_gemv_iq.cpp: the 4-row pass for the i-quants and MXFP4 that have one, else nullptr.
Gemv4Fn gemv4_fn_iq(GgmlType t);
// A pass over all m.n_tok activation rows (<= gemv_max_tok) of weight rows r0 + k * rstep
// (k < 4), unpacking each block once; nullptr where the type has none (then the 4-row pass
// runs per token).
using GemvTokensFn = void (*)(const MatmulArgs& m, int64_t r0, int64_t rstep);
GemvTokensFn gemv_tokens_fn_iq(GgmlType t);
// matmul_gemv_iq4.cpp: the same two for IQ4_XS, IQ4_NL and MXFP4 (gemv4_fn_iq and
// gemv_tokens_fn_iq return them for those types).
Gemv4Fn gemv4_fn_iq4(GgmlType t);
GemvTokensFn gemv_tokens_fn_iq4(GgmlType t);

}  // namespace ds::avx512
