// Batch-parallel row conversion; see quantize_stream.h.
#include "tools/quantize_stream.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/quant/quantize.h"

namespace ds::cli {

Status stream_tensor(GgufWriter* w, const StreamTensor& t, const RowSource& source, int n_threads) {
  if (!quantize_supported(t.type)) {
    return Status::error("tensor '" + t.name + "': cannot quantize to " + ggml_type_name(t.type));
  }
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t row_bytes = ggml_row_size(t.type, t.n_per_row);
  constexpr int64_t kBatchFloats = int64_t{16} << 20;  // 64 MiB of floats
  const int64_t batch_rows = std::clamp<int64_t>(kBatchFloats / t.n_per_row, 1, t.n_rows);
  std::vector<float> f(static_cast<size_t>(batch_rows * t.n_per_row));
  std::vector<uint8_t> q(static_cast<size_t>(batch_rows) * row_bytes);

  for (int64_t r0 = 0; r0 < t.n_rows; r0 += batch_rows) {
    const int64_t nr = std::min(batch_rows, t.n_rows - r0);
    const int nt = static_cast<int>(std::min<int64_t>(n_threads, nr));
    std::vector<Status> status(static_cast<size_t>(nt));
    auto work = [&](int ith) {
      const int64_t a = nr * ith / nt, b = nr * (ith + 1) / nt;
      if (a == b) return;
      float* fr = f.data() + a * t.n_per_row;
      Status s = source(r0 + a, b - a, fr);
      if (!s.is_ok()) {
        status[static_cast<size_t>(ith)] = s;
        return;
      }
      for (int64_t r = a; r < b; ++r, fr += t.n_per_row) {
        for (int64_t i = 0; i < t.n_per_row; ++i) {
          if (!std::isfinite(fr[i])) {
            status[static_cast<size_t>(ith)] =
                Status::error("tensor '" + t.name + "' row " + std::to_string(r0 + r) + " element " +
                              std::to_string(i) + " is not finite (" + std::to_string(fr[i]) + ")");
            return;
          }
        }
        quantize_row(t.type, fr, q.data() + static_cast<size_t>(r) * row_bytes, t.n_per_row);
      }
    };
    std::vector<std::thread> threads;
    for (int ith = 1; ith < nt; ++ith) threads.emplace_back(work, ith);
    work(0);
    for (auto& th : threads) th.join();
    for (const auto& s : status) DS_RETURN_IF_ERROR(s);
    DS_RETURN_IF_ERROR(w->write_data(q.data(), static_cast<size_t>(nr) * row_bytes));
  }
  return Status::ok();
}

}  // namespace ds::cli
