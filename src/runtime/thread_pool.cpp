// ThreadPool: a generation counter and a done counter, each on its own cache line.
// run() publishes the function pointer, bumps the generation and works as thread 0; the
// workers see the new generation, run their share and count themselves done. Waiting on
// either side spins (PAUSE) for spin_us, then sleeps on a futex; a waker issues the wake
// syscall only when someone sleeps (a seq_cst sleeper count, Dekker style: the sleeper
// increments then re-checks the word, the waker changes the word then reads the count).
// The forward pass calls run() many times per step with microseconds in between, so
// workers stay in the spin phase then; idle servers sleep and burn nothing.
#include "runtime/thread_pool.h"

#include <system_error>

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <thread>
#include <vector>

#include "runtime/numa.h"

namespace ds {

namespace {

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

using Clock = std::chrono::steady_clock;

// Spinning pays only while every pool thread owns a CPU. On a shared or oversubscribed
// host a spinner burns its time slice and is then descheduled for milliseconds, which
// is far worse than a futex round trip (measured on a loaded 2-core host: spin 100 us
// -> p50 209 us per run(); futex only -> p50 4 us; idle host: spin -> 1.1 us). A
// spinner that sees a gap between two clock reads much longer than the loop takes has
// lost its CPU; it turns spinning off for the whole pool for kSpinBackoff. The threshold
// sits above the hypervisor's own pauses and below a scheduler time slice: on an idle
// 2-core virtual machine, decode saw ~0.35 gaps per step of 20-200 us and none
// longer; with a 20 us threshold each one cost 20 ms of futex hand-offs (about 100
// context switches per token) and decode was 5-8% slower than with spinning kept on.
struct SpinPolicy {
  static constexpr auto kPreemptedGap = std::chrono::microseconds(500);
  static constexpr auto kSpinBackoff = std::chrono::milliseconds(20);
  std::chrono::microseconds budget{0};
  std::atomic<int64_t> off_until{0};  // Clock ticks

  bool allowed(Clock::time_point now) const {
    return budget.count() > 0 && now.time_since_epoch().count() >= off_until.load(std::memory_order_relaxed);
  }
  void preempted(Clock::time_point now) {
    off_until.store((now + kSpinBackoff).time_since_epoch().count(), std::memory_order_relaxed);
  }
};

// A 32-bit word others wait on until it changes from a value they saw.
struct alignas(64) WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<int> sleepers{0};

  // Returns once value != seen (acquire).
  uint32_t wait_change(uint32_t seen, SpinPolicy& policy) {
    uint32_t v = value.load(std::memory_order_acquire);
    if (v != seen) return v;
    auto last = Clock::now();
    if (policy.allowed(last)) {
      const auto deadline = last + policy.budget;
      for (int i = 1;; ++i) {
        _mm_pause();
        v = value.load(std::memory_order_acquire);
        if (v != seen) return v;
        if ((i & 63) != 0) continue;
        const auto now = Clock::now();
        if (now - last > SpinPolicy::kPreemptedGap) {
          policy.preempted(now);
          break;
        }
        if (now >= deadline) break;
        last = now;
      }
    }
    for (;;) {
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      v = value.load(std::memory_order_seq_cst);
      if (v == seen) futex_wait(&value, seen);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      v = value.load(std::memory_order_acquire);
      if (v != seen) return v;
    }
  }

  void wake_if_sleeping() {
    if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&value);
  }
};

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  bool pin_workers = false;
  bool pin_caller = false;
  SpinPolicy spin;
  std::vector<std::thread> workers;
  std::thread::id pinned_caller;

  WaitWord generation;  // bumped by run(); workers wait on it
  WaitWord done;        // workers finished in this generation; the caller waits on it
  alignas(64) void (*call)(void*, int, int) = nullptr;
  void* ctx = nullptr;
  bool stop = false;           // written before a generation bump, read after seeing it
  int64_t* wait_ns = nullptr;  // set_wait_counter(); the caller's thread only

  void worker_main(int ith) {
    if (pin_workers) pin_current_thread_to_core(ith);
    uint32_t seen = 0;
    for (;;) {
      seen = generation.wait_change(seen, spin);
      if (stop) return;
      call(ctx, ith, n_threads);
      const uint32_t finished = done.value.fetch_add(1, std::memory_order_seq_cst) + 1;
      if (finished == static_cast<uint32_t>(n_threads - 1)) done.wake_if_sleeping();
    }
  }

  void wait_workers() {
    const uint32_t all = static_cast<uint32_t>(n_threads - 1);
    uint32_t d = done.value.load(std::memory_order_acquire);
    while (d != all) d = done.wait_change(d, spin);
  }

  void start_generation() {
    done.value.store(0, std::memory_order_relaxed);
    generation.value.fetch_add(1, std::memory_order_seq_cst);
    generation.wake_if_sleeping();
  }
};

ThreadPool::ThreadPool(ThreadPoolOptions opts) : impl_(std::make_unique<Impl>()) {
  const Topology& topo = topology();
  Impl& p = *impl_;
  p.n_threads = opts.n_threads > 0 ? opts.n_threads : topo.n_cores;
  const unsigned hw = std::thread::hardware_concurrency();
  const int n_hw = hw > 0 ? static_cast<int>(hw) : topo.n_pus;
  // Oversubscribed: a spinning thread would steal the CPU from the one it waits for.
  p.spin.budget = std::chrono::microseconds(p.n_threads <= n_hw ? std::max(0, opts.spin_us) : 0);
  p.pin_workers = opts.pin && p.n_threads <= topo.n_cores;
  p.pin_caller = p.pin_workers && opts.pin_caller;
  p.workers.reserve(p.n_threads - 1);
  try {
    for (int ith = 1; ith < p.n_threads; ++ith) p.workers.emplace_back([&p, ith] { p.worker_main(ith); });
  } catch (const std::system_error&) {  // the system refused a thread: stop the ones started
    p.stop = true;
    p.start_generation();
    for (auto& t : p.workers) t.join();
    throw;
  }
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(ThreadPoolOptions opts) {
  try {
    return std::make_unique<ThreadPool>(opts);
  } catch (const std::system_error& e) {
    return Status::error("cannot start " + std::to_string(opts.n_threads > 0 ? opts.n_threads : topology().n_cores) +
                         " compute threads (" + e.what() +
                         "): lower the thread count or raise the process's thread limit (ulimit -u, TasksMax)");
  }
}

ThreadPool::~ThreadPool() {
  if (!impl_) return;
  impl_->stop = true;
  impl_->start_generation();
  for (auto& t : impl_->workers) t.join();
}

int ThreadPool::n_threads() const {
  return impl_->n_threads;
}

void ThreadPool::run(const std::function<void(int ith, int nth)>& fn) {
  using Fn = std::function<void(int, int)>;
  run_raw([](void* ctx, int ith, int nth) { (*static_cast<const Fn*>(ctx))(ith, nth); },
          const_cast<void*>(static_cast<const void*>(&fn)));
}

void ThreadPool::run_raw(void (*call)(void* ctx, int ith, int nth), void* ctx) {
  Impl& p = *impl_;
  if (p.pin_caller && p.pinned_caller != std::this_thread::get_id()) {
    pin_current_thread_to_core(0);
    p.pinned_caller = std::this_thread::get_id();
  }
  if (p.n_threads == 1) {
    call(ctx, 0, 1);
    return;
  }
  p.call = call;
  p.ctx = ctx;
  p.start_generation();
  call(ctx, 0, p.n_threads);
  if (!p.wait_ns) return p.wait_workers();
  const auto t0 = std::chrono::steady_clock::now();
  p.wait_workers();
  *p.wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

void ThreadPool::set_wait_counter(int64_t* ns) {
  impl_->wait_ns = ns;
}

}  // namespace ds
