// A fixed pool of worker threads for the forward pass: run(fn) calls fn(ith, nth) on
// every thread (the caller is thread 0) and returns when all are done. Workers are pinned
// to physical cores through hwloc when pinning is requested (see numa.h). run() allocates
// nothing, so the decode step stays allocation-free.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

#include "ds/status.h"

namespace ds {

struct ThreadPoolOptions {
  int n_threads = 0;  // 0: one per physical core
  bool pin = true;    // bind each worker to one core (hwloc); ignored where unsupported
  // Also bind the calling thread (thread 0) to core 0 on its first run(). Off by default:
  // threads the caller creates later inherit its binding.
  bool pin_caller = false;
  // How long an idle worker (and the caller waiting for workers) spins before sleeping
  // on a futex. Forced to 0 when n_threads exceeds the hardware threads available.
  int spin_us = 100;
};

class ThreadPool {
 public:
  // Throws std::system_error when the system refuses a thread (after stopping the ones it
  // started); create() turns that into an error naming the thread count.
  explicit ThreadPool(ThreadPoolOptions opts = {});
  static Result<std::unique_ptr<ThreadPool>> create(ThreadPoolOptions opts = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const;
  // Calls fn(ith, nth) for ith in [0, nth) concurrently; blocks until all return.
  // fn must not throw. Not re-entrant.
  void run(const std::function<void(int ith, int nth)>& fn);

  // The same for any callable (lambdas pick this overload): no std::function is built,
  // so nothing is allocated whatever the lambda captures. (A std::function holding a
  // lambda that captures more than two pointers allocates in libstdc++.)
  template <class Fn>
  requires(!std::is_same_v<std::decay_t<Fn>, std::function<void(int, int)>>) void run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_raw([](void* ctx, int ith, int nth) { (*static_cast<F*>(ctx))(ith, nth); },
            const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
  }

  // What both run() overloads call: call(ctx, ith, nth) on every thread.
  void run_raw(void (*call)(void* ctx, int ith, int nth), void* ctx);

  // Latency attribution: while set, every run() adds to *ns the nanoseconds the calling
  // thread waits for the workers after finishing its own share (load imbalance and wake-up
  // latency: the "sync" profile stage). Set and read from the calling thread only; null
  // (the default) measures nothing.
  void set_wait_counter(int64_t* ns);

  // Dynamic split for uneven work (MoE experts, ragged attention): threads take ranges
  // of `chunk` items from a shared counter until [0, n) is done; fn(begin, end, ith).
  // Which thread computes an item varies between calls, so fn must compute each item
  // the same way on any thread (it does for row-parallel kernels). No allocation.
  template <class Fn>
  void parallel_for(int64_t n, int64_t chunk, Fn&& fn) {
    chunk = std::max<int64_t>(chunk, 1);
    std::atomic<int64_t> next{0};
    run([&](int ith, int) {
      for (int64_t b = next.fetch_add(chunk, std::memory_order_relaxed); b < n;
           b = next.fetch_add(chunk, std::memory_order_relaxed)) {
        fn(b, std::min(b + chunk, n), ith);
      }
    });
  }

  // The same with grabs that shrink as the work runs out (guided): a grab takes 1/(4 nth)
  // of the items left, at least min_chunk, so threads finish within about one small grab
  // of each other while the first grabs stay large (few trips to the shared counter).
  template <class Fn>
  void parallel_for_guided(int64_t n, int64_t min_chunk, Fn&& fn) {
    min_chunk = std::max<int64_t>(min_chunk, 1);
    const int64_t div = 4 * int64_t{n_threads()};
    std::atomic<int64_t> next{0};
    run([&](int ith, int) {
      int64_t b = next.load(std::memory_order_relaxed);
      while (b < n) {
        const int64_t c = std::max(min_chunk, (n - b) / div);
        if (!next.compare_exchange_weak(b, b + c, std::memory_order_relaxed)) continue;  // b reloaded
        fn(b, std::min(b + c, n), ith);
        b = next.load(std::memory_order_relaxed);
      }
    });
  }

  // Splits [0, n) into nth nearly equal contiguous ranges; returns thread ith's range.
  static void split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
    const int64_t per = n / nth, rem = n % nth;
    *begin = ith * per + (ith < rem ? ith : rem);
    *end = *begin + per + (ith < rem ? 1 : 0);
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds
