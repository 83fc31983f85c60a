// 16-row panel packing (repack.h, docs/repack.md). Scalar: it runs once per matrix at load.
#include "kernels/quant/repack.h"

#include <cstring>

namespace ds {

bool repack_supported(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K || t == GgmlType::Q8_0 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q2_K || t == GgmlType::Q3_K;
}

namespace {

// Calls f(row_offset, packed_offset, n_bytes) for every piece of panels [p0, p1).
template <class F>
void for_each_piece(GgmlType t, int64_t n_in, size_t row_stride, int64_t p0, int64_t p1, F&& f) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  // The fp16 d (and m) of the 32-block types, moved behind the quants.
  const size_t head = t == GgmlType::Q8_0 || t == GgmlType::Q5_0 || t == GgmlType::Q4_0 ? 2
                      : t == GgmlType::Q4_1 || t == GgmlType::Q5_1                       ? 4
                                                                                         : 0;
  const size_t bb = static_cast<size_t>(tr.type_size), nd = (bb - head) / 4, rest = (bb - head) % 4;
  const int64_t nb = n_in / tr.block_size;
  for (int64_t p = p0; p < p1; ++p) {
    const size_t panel = static_cast<size_t>(p) * kPanelRows * row_stride;
    for (int64_t ib = 0; ib < nb; ++ib) {
      const size_t blk = panel + static_cast<size_t>(ib) * kPanelRows * bb;
      for (int r = 0; r < kPanelRows; ++r) {
        const size_t row = panel + static_cast<size_t>(r) * row_stride + static_cast<size_t>(ib) * bb;
        for (size_t k = 0; k < nd; ++k) f(row + head + 4 * k, blk + 64 * k + 4 * static_cast<size_t>(r), size_t{4});
        if (rest) f(row + head + 4 * nd, blk + 64 * nd + rest * static_cast<size_t>(r), rest);
        if (head) f(row, blk + 64 * nd + head * static_cast<size_t>(r), head);
      }
    }
  }
}

}  // namespace

void repack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* src, uint8_t* dst, int64_t p0, int64_t p1) {
  for_each_piece(t, n_in, row_stride, p0, p1, [&](size_t ro, size_t po, size_t n) { std::memcpy(dst + po, src + ro, n); });
}

void unpack_panels(GgmlType t, int64_t n_in, size_t row_stride, const uint8_t* packed, uint8_t* rows, int64_t p0,
                   int64_t p1) {
  for_each_piece(t, n_in, row_stride, p0, p1, [&](size_t ro, size_t po, size_t n) { std::memcpy(rows + ro, packed + po, n); });
}

}  // namespace ds
