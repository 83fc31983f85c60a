// Load-time repacking of the quantized matrices (repack_supported) into 16-row panels (docs/repack.md,
// kernels/quant/repack.h).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/quant/repack.h"
#include "model/weights.h"
#include "runtime/thread_pool.h"

namespace ds {

namespace {

// count matrices of one shape, matrix i at first.data + i * stride.
struct PackJob {
  Mat* first;
  int count;
  size_t stride;
};

// Releases the pages lying wholly inside [p, p + bytes) from this process and records them
// in w.released: they stay mapped and valid (a later read faults them back in from the page
// cache). Best effort: madvise only fails on locked pages, and --mlock locks after packing.
void release_pages(Weights& w, const uint8_t* p, size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = (a + page - 1) / page * page, e = (a + bytes) / page * page;
  if (e <= b) return;
  (void)madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  w.released.emplace_back(reinterpret_cast<const uint8_t*>(b), e - b);
}

}  // namespace

Result<size_t> repack_weights(Weights& w, int n_expert, ThreadPool& pool, NumaMode mode) {
  std::vector<PackJob> jobs;
  auto add = [&](Mat& m, int count = 1, size_t stride = 0) {
    if (m && repack_supported(m.type) && m.n_out >= kPanelRows && !m.panels) jobs.push_back({&m, count, stride});
  };
  add(w.output);
  for (LayerWeights& l : w.layers) {
    for (Mat* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.wq_a, &l.wq_b, &l.wkv_a, &l.ffn_gate, &l.ffn_up, &l.ffn_down,
                   &l.gate_shexp, &l.up_shexp, &l.down_shexp})
      add(*m);
    for (Mat& m : l.k_b) add(m);
    for (Mat& m : l.v_b) add(m);
    // Expert tensors: all experts in one buffer, expert i at i * expert_stride as in the file.
    for (ExpertMats* e : {&l.gate_exps, &l.up_exps, &l.down_exps})
      if (*e) add(e->first, n_expert, e->expert_stride);
  }
  size_t total = 0;
  for (const PackJob& j : jobs) {
    Mat& m = *j.first;
    const int64_t n_panels = m.n_out / kPanelRows;
    const size_t span = j.count > 1
                            ? j.stride * static_cast<size_t>(j.count - 1) + static_cast<size_t>(m.n_out) * m.row_stride
                            : static_cast<size_t>(m.n_out) * m.row_stride;
    auto buf = NumaBuffer::allocate(span + 64, mode);
    if (!buf)
      return Status::error("cannot allocate " + std::to_string(span) + " bytes for repacked weights: " + buf.message());
    uint8_t* dst = buf->data() + (64 - reinterpret_cast<uintptr_t>(buf->data()) % 64) % 64;
    const int64_t n_items = n_panels * j.count;
    pool.parallel_for(n_items, 64, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1;) {  // runs of panels within one matrix
        const int64_t e = i / n_panels, p0 = i % n_panels, p1 = std::min(n_panels, p0 + (i1 - i));
        const size_t off = static_cast<size_t>(e) * j.stride;
        repack_panels(m.type, m.n_in, m.row_stride, m.data + off, dst + off, p0, p1);
        i += p1 - p0;
      }
    });
    for (int e = 0; e < j.count; ++e)
      release_pages(w, m.data + static_cast<size_t>(e) * j.stride,
                    static_cast<size_t>(n_panels * kPanelRows) * m.row_stride);
    m.panels = dst;
    total += static_cast<size_t>(n_items * kPanelRows) * m.row_stride;
    w.packed.push_back(std::move(*buf));
  }
  return total;
}

}  // namespace ds
