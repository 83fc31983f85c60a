// This machine's two rooflines, measured rather than looked up: the read bandwidth all
// threads can pull from memory together, and the int8 multiply-add rate all cores can
// retire. `ds-cli bench` divides decode speed by the first and prefill speed by the
// second; `ds-cli doctor` prints both. Each is the median of several timed repeats, with
// the spread reported so a noisy host is visible.
#pragma once
#include <cstddef>
#include <string>

#include "ds/status.h"
#include "runtime/numa.h"
#include "runtime/thread_pool.h"

namespace ds {

struct Measurement {
  double median = 0;
  double min = 0;
  double max = 0;
};

struct BandwidthOptions {
  size_t bytes = 0;  // buffer size; 0: max(512 MiB, 8 x total L3) capped at 4 GiB and RAM / 4
  int repeats = 7;
  int streams_per_thread = 4;  // independent sequential streams each thread reads at once
};

struct BandwidthResult {
  Measurement gbs;  // 1e9 bytes per second, read by all threads together
  size_t bytes = 0;
  int n_threads = 0;
  int streams_per_thread = 0;
};

// The int8 and float32 peak measurements.
struct PeakOptions {
  double seconds_per_repeat = 0.05;
  int repeats = 5;
  bool allow_avx512 = true;  // false: measure the AVX2 loop even where AVX-512 exists
};

struct Int8PeakResult {
  Measurement gops;  // 1e9 int8 ops per second (a multiply-add counts as 2)
  std::string isa;   // "avx512_vnni" or "avx2"
  int n_threads = 0;
};

// A floating-point peak: float32 FMAs (isa "avx512" or "avx2") or bf16 dot products
// (isa "avx512_bf16", or "none" where the CPU has none).
struct FlopsPeakResult {
  Measurement gflops;  // 1e9 flops per second (a multiply-add counts as 2)
  std::string isa;
  int n_threads = 0;
};

// Memory read bandwidth with every thread of `pool` streaming its own slice.
Result<BandwidthResult> measure_read_bandwidth(ThreadPool& pool, const BandwidthOptions& opts = {});

// The same probe keeping its buffer (allocated and first-touched once), so it can be read
// again right next to each run it is compared with: on shared or virtual hosts the bandwidth
// can swing by 2x within minutes, and a probe taken a minute away from a decode test says
// little about it.
// `ds-cli bench` reads it just before and just after every decode repeat.
class BandwidthProbe {
 public:
  static Result<BandwidthProbe> create(ThreadPool& pool, const BandwidthOptions& opts = {});
  // `repeats` timed passes over the buffer (opts.repeats when <= 0), after one untimed pass.
  BandwidthResult measure(int repeats = 0);

 private:
  BandwidthProbe(ThreadPool& pool, NumaBuffer buf, const BandwidthOptions& opts)
      : pool_(&pool), buf_(std::move(buf)), opts_(opts) {}
  ThreadPool* pool_;
  NumaBuffer buf_;
  BandwidthOptions opts_;
};
// Register-resident int8 dot products on every thread of `pool`, best ISA available.
Int8PeakResult measure_int8_peak(ThreadPool& pool, const PeakOptions& opts = {});
// Register-resident float32 FMAs on every thread of `pool` (the same options).
FlopsPeakResult measure_fp32_peak(ThreadPool& pool, const PeakOptions& opts = {});

// Register-resident bf16 dot products (vdpbf16ps) on every thread of `pool`, the limit of
// attention over a bf16 cache; isa "avx512_bf16", or gflops all 0 and isa "none" on CPUs
// without AVX512_BF16 (or with opts.allow_avx512 false).
FlopsPeakResult measure_bf16_peak(ThreadPool& pool, const PeakOptions& opts = {});

// Whether this CPU (and OS) can run the AVX-512 VNNI loop.
bool cpu_has_avx512_vnni();
// Whether it can run the AVX512_BF16 loop.
bool cpu_has_avx512_bf16();

}  // namespace ds
