// Streaming tensor conversion for ds-cli quantize and synth: rows of floats come from a
// source callback (dequantized from an mmapped file, or generated), are quantized to the
// output type on a few threads in batches of rows, and are appended to a GgufWriter in
// order. Memory use is one batch (about 64 MiB of floats), whatever the tensor size.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "ds/status.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant/types.h"

namespace ds::cli {

// Fills rows [row_begin, row_begin + n_rows) of n_per_row floats each into out.
// Called concurrently from several threads with disjoint ranges.
using RowSource = std::function<Status(int64_t row_begin, int64_t n_rows, float* out)>;

struct StreamTensor {
  std::string name;
  GgmlType type;      // output type
  int64_t n_per_row;  // ne[0]
  int64_t n_rows;     // product of the other dims
};

// Quantizes every row (rejecting NaN/Inf with an error naming the tensor and row) and
// appends the tensor's bytes to w. n_threads <= 0: use the hardware concurrency.
Status stream_tensor(GgufWriter* w, const StreamTensor& t, const RowSource& source, int n_threads);

}  // namespace ds::cli
