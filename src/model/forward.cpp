// Forward-step plumbing shared by every architecture: the scratch arena, threaded matrix
// products and the once-per-row activation quantization.
#include "model/forward.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace ds {

Result<std::unique_ptr<Arena>> Arena::create(size_t bytes, NumaMode mode) {
  auto buf = NumaBuffer::allocate(bytes + 64, mode);
  if (!buf) return Status::error("cannot allocate " + std::to_string(bytes) + " bytes of scratch: " + buf.message());
  std::unique_ptr<Arena> a(new Arena());
  a->buf_ = std::move(*buf);
  const auto addr = reinterpret_cast<uintptr_t>(a->buf_.data());
  a->base_ = a->buf_.data() + ((64 - addr % 64) % 64);
  a->cap_ = bytes;
  return a;
}

void Arena::overflow(size_t bytes) const {
  std::fprintf(stderr, "ds: scratch arena overflow: %zu + %zu > %zu bytes (Model::scratch_bytes is too small)\n", used_,
               bytes, cap_);
  std::abort();
}

void ForwardCtx::matmul(const Mat& w, const void* act, size_t act_stride, int64_t n_tok, float* out,
                        int64_t out_stride) {
  if (n_tok == 0) return;
  const MatJob job{w, act, act_stride, n_tok, out, out_stride};
  const size_t mark = arena.mark();
  matmul_jobs(&job, 1);
  arena.reset(mark);
}

// Gated jobs (MatJob::up) from this many activation rows on compute gate, up and the
// SiLU product per row block in one pass: the up rows are still in cache and the separate
// SiLU pass with its synchronization goes away (engine, binaries alternated: dense pp512
// +1-3%, MoE pp512 within -1..+3%). Below it (decode, small batches) the gate and up rows of
// a row block are two weight streams one after the other instead of one, which cost dense
// decode ~1.5% (8 alternations, ratios 0.95-1.04, median 0.985), so there they run as two
// plain jobs and a second pass applies the SiLU product.
constexpr int64_t kGatedMinTok = 8;

void ForwardCtx::matmul_jobs(const MatJob* jobs, int n_jobs) {
  int n_split = 0;
  for (int j = 0; j < n_jobs; ++j) n_split += jobs[j].up && jobs[j].n_tok < kGatedMinTok ? 1 : 0;
  if (n_split == 0) return matmul_pass(jobs, n_jobs);
  MatJob* plain = arena.alloc<MatJob>(n_jobs + n_split);
  const MatJob** split = arena.alloc<const MatJob*>(n_split);
  int n = 0, k = 0;
  for (int j = 0; j < n_jobs; ++j) {
    const MatJob& job = jobs[j];
    if (!job.up || job.n_tok >= kGatedMinTok) {
      plain[n++] = job;
      continue;
    }
    plain[n++] = MatJob{job.w, job.act, job.act_stride, job.n_tok, job.out, job.out_stride};
    plain[n++] = MatJob{job.up, job.up_act, job.up_act_stride, job.n_tok, job.up_out, job.out_stride};
    split[k++] = &job;
  }
  matmul_pass(plain, n);
  parallel_for(n_split, [&](int64_t k0, int64_t k1) {
    for (int64_t i = k0; i < k1; ++i) {
      const MatJob& job = *split[i];
      for (int64_t t = 0; t < job.n_tok; ++t) {
        float* g = job.out + t * job.out_stride;
        kt.silu_mul(g, job.up_out + t * job.out_stride, g, job.w.n_out);
      }
    }
  });
}

void ForwardCtx::matmul_pass(const MatJob* jobs, int n_jobs) {
  // Row blocks of rows_of(job) (a multiple of every kernel's row tile); item i of the k-th
  // job in `order` covers rows [(i - first[k]) * rows_of(job), ...). From 8 tokens on
  // (where the AVX-512 kernels switch to 16-row panels) blocks of 32 rows let the panel
  // kernels run two panels per pass; decode keeps 16-row GEMV blocks.
  auto rows_of = [](const MatJob& job) -> int64_t { return job.n_tok >= 8 ? 32 : 16; };
  // An item's cost ~ (tokens + unpack) * row bytes * rows; unpacking a 16-row panel
  // costs about 5 activation rows (kernels/avx512/matmul.cpp).
  constexpr int64_t kUnpackTok = 5;
  auto item_cost = [&](int j) {
    const MatJob& job = jobs[j];
    const auto row_bytes = static_cast<int64_t>(job.w.row_stride + (job.up ? job.up.row_stride : 0));
    return job.n_tok > 0 ? (job.n_tok + kUnpackTok) * row_bytes * rows_of(job) : 0;
  };
  // Costliest items first (longest-processing-time order): MoE steps mix shared-expert
  // items over all T tokens with routed-expert items over ~T*K/X tokens, 10-20x cheaper;
  // left last, a shared job's items kept one thread busy while the other idled.
  int32_t* order = arena.alloc<int32_t>(n_jobs);
  int64_t* first = arena.alloc<int64_t>(n_jobs + 1);
  for (int j = 0; j < n_jobs; ++j) order[j] = j;
  std::sort(order, order + n_jobs, [&](int a, int b) {
    const int64_t ca = item_cost(a), cb = item_cost(b);
    return ca != cb ? ca > cb : a < b;
  });
  int64_t n_items = 0;
  for (int k = 0; k < n_jobs; ++k) {
    first[k] = n_items;
    const MatJob& job = jobs[order[k]];
    if (job.n_tok == 0) continue;
    const int64_t items = (job.w.n_out + rows_of(job) - 1) / rows_of(job);
    n_items += items;
  }
  first[n_jobs] = n_items;
  if (n_items == 0) return;
  // Guided grabs of the shared counter (1/(4 nth) of the items left): a fixed grab of an
  // eighth of a thread's share left the output head's last grab (~10 MB of weights, 0.2
  // ms) to one thread while the other waited. A grab still covers at least ~256 KB of
  // weights in decode: a decode GEMV block streams only ~14 KB, about as long as a
  // contended cache-line round trip, so one grab per block left cores waiting on the counter.
  const int64_t max_cost = n_jobs > 0 ? item_cost(order[0]) : 1;
  const int64_t min_grab =
      std::max<int64_t>(1, (1 + kUnpackTok) * (int64_t{256} << 10) / std::max<int64_t>(max_cost, 1));
  pool.parallel_for_guided(n_items, min_grab, [&](int64_t i0, int64_t i1, int) {
    int k = static_cast<int>(std::upper_bound(first, first + n_jobs + 1, i0) - first) - 1;
    for (int64_t i = i0; i < i1;) {
      while (i >= first[k + 1]) ++k;
      const MatJob& job = jobs[order[k]];
      const int64_t rows = rows_of(job), r0 = (i - first[k]) * rows;
      // Decode: the grab's items of one job go to the kernel as one row range, which the
      // GEMV spreads over 4 sequential streams (kernels/avx512/matmul_gemv.cpp). Prefill
      // items stay one per call (panel kernels keep their activation chunk hot per item).
      const int64_t n_run = job.n_tok < 8 ? std::min(i1, first[k + 1]) - i : 1;
      const int64_t r1 = std::min(r0 + n_run * rows, job.w.n_out);
      auto product = [&](const Mat& w, const void* act, size_t act_stride, float* out) {
        kt.matmul({.wtype = w.type,
                   .w = w.data,
                   .w_row_stride = w.row_stride,
                   .n_in = w.n_in,
                   .row_begin = r0,
                   .row_end = r1,
                   .act = act,
                   .act_row_stride = act_stride,
                   .n_tok = job.n_tok,
                   .out = out,
                   .out_stride = job.out_stride,
                   .w_panels = w.panels});
      };
      product(job.w, job.act, job.act_stride, job.out);
      if (job.up) {  // the gated partner over the same rows, then silu(gate) * up in place
        product(job.up, job.up_act, job.up_act_stride, job.up_out);
        for (int64_t t = 0; t < job.n_tok; ++t) {
          float* g = job.out + t * job.out_stride + r0;
          kt.silu_mul(g, job.up_out + t * job.out_stride + r0, g, r1 - r0);
        }
      }
      i += n_run;
    }
  });
}

void ForwardCtx::quantize_rows(GgmlType type, const float* x, int64_t x_stride, int64_t n_rows, int64_t n, uint8_t* dst,
                               size_t dst_stride) {
  ProfScope ps(prof, Stage::kQuantizeAct);
  parallel_for(n_rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      kt.quantize_act(type, x + t * x_stride, dst + static_cast<size_t>(t) * dst_stride, n);
  });
}

void ForwardCtx::rms_norm_rows(const float* x, int64_t x_stride, const Vec& w, float eps, int64_t n_rows, int64_t n,
                               float* y, int64_t y_stride) {
  ProfScope ps(prof, Stage::kNormsRope);
  parallel_for(n_rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) kt.rms_norm(x + t * x_stride, w.data, y + t * y_stride, n, eps);
  });
}

void ForwardCtx::rope_rows(float* x, int n_head, int64_t head_stride, int64_t tok_stride, const RopeParams& p) {
  ProfScope ps(prof, Stage::kNormsRope);
  parallel_for(batch.n_tok, [&](int64_t t0, int64_t t1) {
    kt.rope(RopeArgs{.x = x + t0 * tok_stride,
                     .n_tok = t1 - t0,
                     .n_head = n_head,
                     .tok_stride = tok_stride,
                     .head_stride = head_stride,
                     .pos = batch.pos + t0},
            p);
  });
}

const void* ActRows::get(GgmlType wtype, size_t* row_bytes) {
  const GgmlType at = vec_dot_type(wtype);
  if (at == GgmlType::F32) {  // f32 weights consume the float rows as they are
    *row_bytes = static_cast<size_t>(x_stride_) * sizeof(float);
    return x_;
  }
  for (int i = 0; i < n_slots_; ++i) {
    if (types_[i] == at) {
      *row_bytes = stride_[i];
      return data_[i];
    }
  }
  assert(n_slots_ < kSlots);
  const size_t stride = ggml_row_size(at, n_);
  uint8_t* dst = ctx_.arena.alloc_bytes(stride * static_cast<size_t>(n_rows_));
  ctx_.quantize_rows(at, x_, x_stride_, n_rows_, n_, dst, stride);
  types_[n_slots_] = at;
  data_[n_slots_] = dst;
  stride_[n_slots_] = stride;
  ++n_slots_;
  *row_bytes = stride;
  return dst;
}

void matmul(ForwardCtx& ctx, const Mat& w, ActRows& a, float* out, int64_t out_stride) {
  size_t stride = 0;
  const void* act = a.get(w.type, &stride);
  ctx.matmul(w, act, stride, a.n_rows(), out, out_stride);
}

void matmul_many(ForwardCtx& ctx, ActRows& a, std::initializer_list<MatOut> outs) {
  constexpr int kMax = 4;
  assert(outs.size() <= kMax);
  MatJob jobs[kMax];
  int n = 0;
  for (const MatOut& o : outs) {
    size_t stride = 0;
    const void* act = a.get(o.w->type, &stride);
    jobs[n++] = MatJob{*o.w, act, stride, a.n_rows(), o.out, o.out_stride};
  }
  if (a.n_rows() == 0 || n == 0) return;
  const size_t mark = ctx.arena.mark();
  ctx.matmul_jobs(jobs, n);
  ctx.arena.reset(mark);
}

}  // namespace ds
