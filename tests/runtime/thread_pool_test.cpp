// ThreadPool: every ith runs exactly once per run(), writes made inside run() are
// visible to the caller afterwards, and split() tiles [0, n) exactly.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

// Counts every global operator new in this test binary, so a test can prove that run()
// allocates nothing (the decode step must not allocate; STYLE.md).
static std::atomic<long> g_allocations{0};

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace ds {
namespace {

void check_runs(ThreadPool& pool, int n_runs) {
  const int nth = pool.n_threads();
  std::vector<int> calls(nth, 0);  // plain ints: visibility is what run() promises
  std::vector<int> seen_nth(nth, 0);
  std::vector<int64_t> data(4096, 0);
  for (int r = 0; r < n_runs; ++r) {
    pool.run([&](int ith, int n) {
      ++calls[ith];
      seen_nth[ith] = n;
      int64_t b, e;
      ThreadPool::split(static_cast<int64_t>(data.size()), ith, n, &b, &e);
      for (int64_t i = b; i < e; ++i) data[i] += i + r;
    });
    for (int t = 0; t < nth; ++t) ASSERT_EQ(calls[t], r + 1) << "thread " << t << " run " << r;
  }
  for (int t = 0; t < nth; ++t) EXPECT_EQ(seen_nth[t], nth);
  const int64_t sum_r = static_cast<int64_t>(n_runs) * (n_runs - 1) / 2;
  for (size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(data[i], static_cast<int64_t>(i) * n_runs + sum_r) << "element " << i;
  }
}

TEST(ThreadPool, EveryThreadOncePerRunManyRuns) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool({.n_threads = n, .pin = false});
    ASSERT_EQ(pool.n_threads(), n);
    check_runs(pool, 2000);
  }
}

TEST(ThreadPool, DefaultIsOnePerPhysicalCoreAndPinned) {
  ThreadPool pool;
  EXPECT_GE(pool.n_threads(), 1);
  EXPECT_LE(pool.n_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  check_runs(pool, 500);
}

TEST(ThreadPool, WorkersThatSleptWakeUp) {
  // Spin 0: every wait goes through the futex path; pauses let the workers fall asleep.
  ThreadPool pool({.n_threads = 3, .pin = false, .spin_us = 0});
  std::atomic<int> total{0};
  for (int r = 0; r < 20; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pool.run([&](int, int) { total.fetch_add(1); });
  }
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPool, SlowThreadZeroAndSlowWorker) {
  ThreadPool pool({.n_threads = 2, .pin = false});
  std::vector<int> out(2, 0);
  for (int r = 0; r < 50; ++r) {
    pool.run([&](int ith, int) {
      if ((r & 1) == ith) std::this_thread::sleep_for(std::chrono::microseconds(300));
      out[ith] = r;
    });
    ASSERT_EQ(out[0], r);
    ASSERT_EQ(out[1], r);
  }
}

TEST(ThreadPool, RunAllocatesNothing) {
  ThreadPool pool({.n_threads = 3, .pin = false});
  std::vector<double> a(300, 1.0), b(300, 2.0), c(300, 0.0);
  double scale = 3.0;
  int64_t n = 300;
  pool.run([](int, int) {});  // first run: thread start-up is allowed to allocate
  const long before = g_allocations.load();
  for (int r = 0; r < 1000; ++r) {
    // Captures five references: too big for std::function's inline buffer.
    pool.run([&](int ith, int nth) {
      int64_t lo, hi;
      ThreadPool::split(n, ith, nth, &lo, &hi);
      for (int64_t i = lo; i < hi; ++i) c[i] = a[i] * scale + b[i];
    });
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(c[299], 5.0);
  // The std::function overload works too (its allocation, if any, is the caller's).
  const std::function<void(int, int)> f = [&](int ith, int) { c[ith] = -1.0; };
  pool.run(f);
  EXPECT_EQ(c[0], -1.0);
  EXPECT_EQ(c[2], -1.0);
}

TEST(ThreadPool, ParallelForCoversEveryItemOnce) {
  ThreadPool pool({.n_threads = 3, .pin = false});
  for (int64_t n : {0, 1, 5, 1000, 1003}) {
    for (int64_t chunk : {1, 7, 64, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_ith{0};
      pool.parallel_for(n, chunk, [&](int64_t b, int64_t e, int ith) {
        if (ith < 0 || ith >= 3 || e - b > chunk || b >= e) bad_ith.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      EXPECT_EQ(bad_ith.load(), 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " chunk=" << chunk << " i=" << i;
    }
  }
}

TEST(ThreadPool, GuidedParallelForCoversEveryItemOnceInShrinkingGrabs) {
  ThreadPool pool({.n_threads = 3, .pin = false});
  for (int64_t n : {0, 1, 5, 1000, 100003}) {
    for (int64_t min_chunk : {1, 7, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad{0};
      pool.parallel_for_guided(n, min_chunk, [&](int64_t b, int64_t e, int ith) {
        // A grab is 1/12 of what was left at b (3 threads), at least min_chunk, cut at n.
        const int64_t want = std::max(min_chunk, (n - b) / 12);
        if (ith < 0 || ith >= 3 || b >= e || e - b != std::min(want, n - b)) bad.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      EXPECT_EQ(bad.load(), 0) << "n=" << n << " min_chunk=" << min_chunk;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " min=" << min_chunk << " i=" << i;
    }
  }
}

TEST(ThreadPool, SplitTilesRangeExactly) {
  for (int64_t n : {0, 1, 7, 64, 1000, 1001}) {
    for (int nth : {1, 2, 3, 8, 13}) {
      int64_t expect_begin = 0, min_len = n, max_len = 0;
      for (int ith = 0; ith < nth; ++ith) {
        int64_t b, e;
        ThreadPool::split(n, ith, nth, &b, &e);
        ASSERT_EQ(b, expect_begin) << "n=" << n << " nth=" << nth << " ith=" << ith;
        ASSERT_LE(b, e);
        min_len = std::min(min_len, e - b);
        max_len = std::max(max_len, e - b);
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, n);
      EXPECT_LE(max_len - min_len, 1) << "n=" << n << " nth=" << nth;
    }
  }
}

TEST(ThreadPool, RunLatency) {
  ThreadPool pool({.n_threads = 2, .pin = true});
  std::atomic<int64_t> sink{0};
  const int n_runs = 20000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n_runs; ++r) pool.run([&](int ith, int) { sink.fetch_add(ith, std::memory_order_relaxed); });
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(sink.load(), static_cast<int64_t>(n_runs));
  std::printf("thread pool: %d threads, empty run() %.2f us\n", pool.n_threads(), us / n_runs);
}

}  // namespace
}  // namespace ds
