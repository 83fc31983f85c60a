// Bandwidth: each thread reads its slice of a buffer far larger than the caches as
// several interleaved sequential streams (one stream per thread leaves the prefetchers
// and the memory controller idle part of the time; real GEMV kernels read several weight
// rows at once). The buffer is first-touched by the thread that later reads each slice,
// so on a NUMA machine its pages sit on that thread's node. The timed region is one
// pool.run(), so barrier cost (microseconds) is included but negligible next to the
// milliseconds a pass takes.
// Int8 and float32 peaks: kernels/peak.h loops, timed the same way, after a warm-up so the
// clock has settled at its AVX-512 frequency.
#include "tools/machine_limits.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/peak.h"
#include "runtime/numa.h"

namespace ds {

namespace {

using Clock = std::chrono::steady_clock;

Measurement summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Measurement m;
  m.min = v.front();
  m.max = v.back();
  const size_t n = v.size();
  m.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return m;
}

// Reads [p, p + bytes) as `n_streams` equal sequential streams advanced together.
// Returns a value depending on every byte so the loads cannot be dropped.
uint64_t read_streams(const uint8_t* p, size_t bytes, int n_streams) {
  constexpr size_t kStep = 64;  // one cache line per stream per iteration
  const size_t per = bytes / n_streams / kStep * kStep;
  __m256i acc[8];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const int ns = std::min(n_streams, 8);
  for (size_t off = 0; off < per; off += kStep) {
    for (int s = 0; s < ns; ++s) {
      const uint8_t* q = p + s * per + off;
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32));
      acc[s] = _mm256_add_epi64(acc[s], _mm256_xor_si256(lo, hi));
    }
  }
  __m256i sum = acc[0];
  for (int s = 1; s < 8; ++s) sum = _mm256_add_epi64(sum, acc[s]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

size_t default_bandwidth_bytes() {
  const Topology& t = topology();
  size_t bytes = std::max<size_t>(size_t{512} << 20, 8 * t.l3_bytes);
  bytes = std::min<size_t>(bytes, size_t{4} << 30);
  if (t.total_memory_bytes > 0) bytes = std::min<size_t>(bytes, t.total_memory_bytes / 4);
  return std::max<size_t>(bytes, size_t{64} << 20);
}

}  // namespace

bool cpu_has_avx512_vnni() {
  // libgcc's cpu model also checks XCR0, i.e. that the OS saves the zmm state.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

bool cpu_has_avx512_bf16() {
  // The dispatcher's CPUID decision (the AVX-512 table takes the bf16 products exactly then).
  const KernelTable* t = kernel_table(Isa::kAvx512);
  return t && t->attn_bf16_dot;
}

Result<BandwidthProbe> BandwidthProbe::create(ThreadPool& pool, const BandwidthOptions& opts) {
  const int nth = pool.n_threads();
  BandwidthOptions o = opts;
  o.streams_per_thread = std::clamp(opts.streams_per_thread, 1, 8);
  const size_t unit = size_t{64} * o.streams_per_thread * nth;  // whole cache lines per stream per thread
  const size_t bytes = opts.bytes ? opts.bytes : default_bandwidth_bytes();
  o.bytes = std::max(bytes / unit, size_t{1}) * unit;
  auto buf = NumaBuffer::allocate(o.bytes, nth > 1 ? NumaMode::kDistribute : NumaMode::kNone);
  if (!buf) return Status::error("bandwidth test: " + buf.message());
  uint8_t* base = buf->data();
  const size_t slice = o.bytes / nth;
  pool.run([&](int ith, int) {
    // First touch by the reader; varied bytes so nothing is a shared zero page.
    uint8_t* s = base + ith * slice;
    for (size_t i = 0; i < slice; i += 64) std::memset(s + i, static_cast<int>((i >> 6) + ith), 64);
  });
  return BandwidthProbe(pool, std::move(*buf), o);
}

BandwidthResult BandwidthProbe::measure(int repeats) {
  const int nth = pool_->n_threads(), ns = opts_.streams_per_thread;
  const uint8_t* base = buf_.data();
  const size_t slice = opts_.bytes / nth;
  std::atomic<uint64_t> sink{0};
  auto pass = [&] {
    const auto t0 = Clock::now();
    pool_->run([&](int ith, int) { sink.fetch_add(read_streams(base + ith * slice, slice, ns)); });
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  pass();  // warm-up: TLB and page-table walks, clock ramp
  std::vector<double> gbs;
  const int n = repeats > 0 ? repeats : std::max(1, opts_.repeats);
  for (int r = 0; r < n; ++r) gbs.push_back(static_cast<double>(opts_.bytes) / pass() / 1e9);
  BandwidthResult res;
  res.gbs = summarize(gbs);
  res.bytes = opts_.bytes;
  res.n_threads = nth;
  res.streams_per_thread = ns;
  return res;
}

Result<BandwidthResult> measure_read_bandwidth(ThreadPool& pool, const BandwidthOptions& opts) {
  auto probe = BandwidthProbe::create(pool, opts);
  if (!probe) return probe.status();
  return probe->measure();
}

namespace {

// Runs loop (returning multiply-adds done) on every thread for about
// opts.seconds_per_repeat per repeat; 1e9 ops per second (2 per multiply-add).
template <class Sink>
Measurement measure_peak(ThreadPool& pool, const PeakOptions& opts, uint64_t (*loop)(uint64_t, Sink*)) {
  const int nth = pool.n_threads();
  std::vector<uint64_t> madds(nth, 0);
  std::vector<Sink> sinks(nth, Sink{});
  auto pass = [&](uint64_t n_iter) {
    const auto t0 = Clock::now();
    pool.run([&](int ith, int) { madds[ith] = loop(n_iter, &sinks[ith]); });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t total = 0;
    for (uint64_t m : madds) total += m;
    return std::pair<double, double>(s, 2.0 * static_cast<double>(total));
  };
  // Calibrate the iteration count to the requested duration (also the warm-up).
  uint64_t n_iter = 1 << 14;
  for (;;) {
    const double s = pass(n_iter).first;
    if (s >= 0.2 * opts.seconds_per_repeat || n_iter > (uint64_t{1} << 40)) {
      n_iter = std::max<uint64_t>(1, static_cast<uint64_t>(n_iter * opts.seconds_per_repeat / std::max(s, 1e-9)));
      break;
    }
    n_iter *= 4;
  }
  std::vector<double> gops;
  for (int r = 0; r < std::max(1, opts.repeats); ++r) {
    const auto [s, ops] = pass(n_iter);
    gops.push_back(ops / s / 1e9);
  }
  return summarize(gops);
}

}  // namespace

Int8PeakResult measure_int8_peak(ThreadPool& pool, const PeakOptions& opts) {
  const bool vnni = opts.allow_avx512 && cpu_has_avx512_vnni();
  Int8PeakResult res;
  res.gops = measure_peak(pool, opts, vnni ? &peak::int8_madds_avx512_vnni : &peak::int8_madds_avx2);
  res.isa = vnni ? "avx512_vnni" : "avx2";
  res.n_threads = pool.n_threads();
  return res;
}

FlopsPeakResult measure_fp32_peak(ThreadPool& pool, const PeakOptions& opts) {
  const bool avx512 = opts.allow_avx512 && __builtin_cpu_supports("avx512f");
  FlopsPeakResult res;
  res.gflops = measure_peak(pool, opts, avx512 ? &peak::f32_fmas_avx512 : &peak::f32_fmas_avx2);
  res.isa = avx512 ? "avx512" : "avx2";
  res.n_threads = pool.n_threads();
  return res;
}

FlopsPeakResult measure_bf16_peak(ThreadPool& pool, const PeakOptions& opts) {
  FlopsPeakResult res;
  res.n_threads = pool.n_threads();
  if (!opts.allow_avx512 || !cpu_has_avx512_bf16()) {
    res.isa = "none";
    return res;
  }
  res.gflops = measure_peak(pool, opts, &peak::bf16_madds_avx512);
  res.isa = "avx512_bf16";
  return res;
}

}  // namespace ds
