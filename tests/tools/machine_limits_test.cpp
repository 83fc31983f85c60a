// machine_limits: the peak loops really execute the multiply-adds they claim (their
// accumulators are checked against closed forms), and the measurements return sane,
// ordered statistics. Speeds themselves depend on the host's load and are printed only.
#include "tools/machine_limits.h"

#include <gtest/gtest.h>

#include "kernels/peak.h"

namespace ds {
namespace {

TEST(MachineLimits, Avx2PeakLoopComputesWhatItCounts) {
  ASSERT_TRUE(__builtin_cpu_supports("avx2")) << "ds-server's baseline ISA is AVX2";
  for (uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{12345}}) {
    int32_t sink = 0;
    EXPECT_EQ(peak::int8_madds_avx2(n, &sink), n * 8 * 32);
    // 8 chains k = 0..7 of 8 int32 lanes starting at k; per iteration each lane adds
    // 4 * (3 * -2) (two u8*s8 pairs to int16, two int16 to int32).
    EXPECT_EQ(static_cast<int64_t>(sink), 8 * 28 - 8 * 8 * 24 * static_cast<int64_t>(n)) << "n=" << n;
  }
}

TEST(MachineLimits, VnniPeakLoopComputesWhatItCounts) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  for (uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{12345}}) {
    int32_t sink = 0;
    EXPECT_EQ(peak::int8_madds_avx512_vnni(n, &sink), n * 16 * 64);
    // 16 chains k of 16 lanes starting at k; each vpdpbusd adds 4 * (3 * -2) per lane.
    EXPECT_EQ(static_cast<int64_t>(sink), 16 * 120 - 16 * 16 * 24 * static_cast<int64_t>(n)) << "n=" << n;
  }
}

// c = c * 1 + 0.5 from c = k in every lane of chain k: k + 0.5 n after n iterations, and
// the sum over chains and lanes is exact in float for these n.
double fma_closed_form(int chains, int lanes, uint64_t n) {
  return lanes * (chains * (chains - 1) / 2.0 + chains * 0.5 * static_cast<double>(n));
}

TEST(MachineLimits, Fp32PeakLoopsComputeWhatTheyCount) {
  for (uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{12345}}) {
    float sink = 0.0f;
    EXPECT_EQ(peak::f32_fmas_avx2(n, &sink), n * 12 * 8);
    EXPECT_EQ(static_cast<double>(sink), fma_closed_form(12, 8, n)) << "avx2 n=" << n;
    if (!__builtin_cpu_supports("avx512f")) continue;
    EXPECT_EQ(peak::f32_fmas_avx512(n, &sink), n * 16 * 16);
    EXPECT_EQ(static_cast<double>(sink), fma_closed_form(16, 16, n)) << "avx512 n=" << n;
  }
}

TEST(MachineLimits, Bf16PeakLoopComputesWhatItCounts) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{12345}}) {
    float sink = 0.0f;
    EXPECT_EQ(peak::bf16_madds_avx512(n, &sink), n * 16 * 32);
    // 16 chains k of 16 lanes starting at k, each vdpbf16ps adding 1 * 0.5 + 1 * 0.5.
    EXPECT_EQ(static_cast<double>(sink), 16 * (120 + 16 * static_cast<double>(n))) << "n=" << n;
  }
}

void expect_ordered(const Measurement& m) {
  EXPECT_GT(m.min, 0);
  EXPECT_LE(m.min, m.median);
  EXPECT_LE(m.median, m.max);
}

TEST(MachineLimits, BandwidthMeasurement) {
  ThreadPool pool({.n_threads = 2});
  auto bw = measure_read_bandwidth(pool, {.bytes = size_t{64} << 20, .repeats = 3, .streams_per_thread = 4});
  ASSERT_TRUE(bw.is_ok()) << bw.message();
  expect_ordered(bw->gbs);
  EXPECT_EQ(bw->n_threads, 2);
  EXPECT_EQ(bw->streams_per_thread, 4);
  EXPECT_GE(bw->bytes, (size_t{64} << 20) - 2 * 4 * 64);
  EXPECT_LE(bw->bytes, size_t{64} << 20);
  std::printf("read bandwidth (64 MiB, 2 threads x 4 streams): %.1f GB/s [%.1f..%.1f]\n", bw->gbs.median, bw->gbs.min,
              bw->gbs.max);
}

// The kept-buffer probe that ds-cli bench reads around each decode repeat: created once,
// measured again and again over the same buffer.
TEST(MachineLimits, BandwidthProbeMeasuresRepeatedly) {
  ThreadPool pool({.n_threads = 2, .spin_us = 0});
  auto probe = BandwidthProbe::create(pool, {.bytes = size_t{32} << 20, .repeats = 2, .streams_per_thread = 3});
  ASSERT_TRUE(probe.is_ok()) << probe.message();
  const BandwidthResult a = probe->measure(), b = probe->measure(4);
  for (const BandwidthResult* r : {&a, &b}) {
    expect_ordered(r->gbs);
    EXPECT_EQ(r->n_threads, 2);
    EXPECT_EQ(r->streams_per_thread, 3);
    EXPECT_EQ(r->bytes % (64 * 3 * 2), 0u);  // whole lines per stream per thread
  }
  EXPECT_EQ(a.bytes, b.bytes);
  // Out-of-range stream counts are clamped, as measure_read_bandwidth does.
  auto wide = BandwidthProbe::create(pool, {.bytes = size_t{8} << 20, .repeats = 1, .streams_per_thread = 99});
  ASSERT_TRUE(wide.is_ok()) << wide.message();
  EXPECT_EQ(wide->measure().streams_per_thread, 8);
}

TEST(MachineLimits, Int8PeakMeasurement) {
  ThreadPool pool({.n_threads = 2});
  const Int8PeakResult best = measure_int8_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3});
  expect_ordered(best.gops);
  EXPECT_EQ(best.isa, cpu_has_avx512_vnni() ? "avx512_vnni" : "avx2");
  EXPECT_EQ(best.n_threads, 2);
  const Int8PeakResult avx2 =
      measure_int8_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3, .allow_avx512 = false});
  expect_ordered(avx2.gops);
  EXPECT_EQ(avx2.isa, "avx2");
  std::printf("int8 peak, 2 threads: %s %.0f GOPS, avx2 %.0f GOPS\n", best.isa.c_str(), best.gops.median,
              avx2.gops.median);
}

TEST(MachineLimits, Fp32PeakMeasurement) {
  ThreadPool pool({.n_threads = 2});
  const FlopsPeakResult best = measure_fp32_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3});
  expect_ordered(best.gflops);
  EXPECT_EQ(best.isa, __builtin_cpu_supports("avx512f") ? "avx512" : "avx2");
  EXPECT_EQ(best.n_threads, 2);
  // An FMA does 2 flops per lane, a VNNI dpbusd 8 ops per lane (AVX2's int8 idiom: 64 per
  // 3 instructions of 8 lanes): on the same core the int8 rate is the higher one.
  const Int8PeakResult int8 = measure_int8_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3});
  EXPECT_LT(best.gflops.median, int8.gops.median);
  std::printf("fp32 FMA peak, 2 threads: %s %.0f GFLOPS\n", best.isa.c_str(), best.gflops.median);
}

TEST(MachineLimits, Bf16PeakMeasurement) {
  ThreadPool pool({.n_threads = 2});
  const FlopsPeakResult off =
      measure_bf16_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3, .allow_avx512 = false});
  EXPECT_EQ(off.isa, "none");
  EXPECT_EQ(off.gflops.median, 0);
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const FlopsPeakResult best = measure_bf16_peak(pool, {.seconds_per_repeat = 0.02, .repeats = 3});
  expect_ordered(best.gflops);
  EXPECT_EQ(best.isa, "avx512_bf16");
  std::printf("bf16 dot peak, 2 threads: %.0f GFLOPS\n", best.gflops.median);
}

}  // namespace
}  // namespace ds
