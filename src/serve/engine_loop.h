// The engine loop: one thread that drives a ds::Engine with the continuous-batching
// scheduler. Each iteration: apply cancellations -> Scheduler::schedule() -> Engine::step()
// over the granted chunks -> sample one token per finished chunk (each request has its own
// Sampler) -> Scheduler::commit()/append_token()/finish() -> events to the requests' streams.
//
// Request threads talk to the loop only through submit() and GenStream (a small mutex-guarded
// event queue with a cancel flag), so a client that disconnects or hits a stop string ends
// its request within one step and its KV blocks are freed at once. Only token ids cross this
// boundary; text (detokenizing, stop strings, UTF-8) is the API layer's business.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ds/engine.h"
#include "runtime/sampler.h"
#include "sched/scheduler.h"
#include "serve/engine_kv_blocks.h"

namespace ds {

struct GenParams {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int n_predict = -1;  // -1: until end of generation or the context is full
  bool ignore_eos = false;
  bool cache_prompt = true;
};

enum class StopReason { kNone, kEos, kLimit, kCancelled, kError };

// Counters of one request, copied into every event.
struct GenStats {
  int n_prompt = 0;
  int n_cached = 0;  // prompt tokens reused from the prefix cache
  int n_generated = 0;
  double prompt_ms = 0;     // first grant -> first token
  double predicted_ms = 0;  // first token -> latest token
  double ttft_ms = 0;       // submit -> first token
  int id_slot = -1;         // the sequence slot that served the request (-1 before its first token)
};

struct GenEvent {
  bool done = false;
  int32_t token = -1;  // when !done
  std::vector<TokenProb> probs;
  float logprob = 0;                      // with sampling.logprobs
  std::vector<TokenProb> top_logprobs;    // prob holds a log-probability
  StopReason reason = StopReason::kNone;  // when done
  std::string error;                      // when reason == error
  GenStats stats;
};

class GenStream {
 public:
  explicit GenStream(int64_t id) : id_(id) {}
  int64_t id() const { return id_; }
  // Waits up to `timeout` for the next event; false when none arrived.
  bool next(GenEvent* ev, std::chrono::milliseconds timeout);
  // Ends the request within one step (client gone, stop string found). No more events.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class EngineLoop;
  void push(GenEvent ev);
  int64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  std::atomic<bool> cancelled_{false};
};

struct LoopOptions {
  SchedOptions sched;
  std::function<bool(int32_t)> is_eog;  // tokens that end generation (EOS, EOT, ...)
};

enum class SubmitCode { kOk, kQueueFull, kTooLong, kInvalidToken, kStopping };

struct SubmitOutcome {
  SubmitCode code = SubmitCode::kOk;
  std::shared_ptr<GenStream> stream;  // when ok
};

// What /metrics, /slots and /health read. Counters are totals since start.
struct LoopStats {
  int n_running = 0;
  int n_waiting = 0;
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;    // held by live requests
  int kv_blocks_cached = 0;  // held only by the prefix cache (evictable)
  int64_t requests_total = 0;
  int64_t requests_rejected = 0;
  int64_t tokens_prompt = 0;  // prompt tokens computed (cache hits excluded)
  int64_t tokens_cached = 0;  // prompt tokens taken from the prefix cache
  int64_t tokens_generated = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  double prompt_seconds = 0;  // wall time of steps weighted by their prompt share
  double decode_seconds = 0;
  std::vector<double> ttft_bucket_bounds;   // seconds, ascending
  std::vector<int64_t> ttft_bucket_counts;  // cumulative, one per bound, plus +Inf last
  double ttft_sum = 0;
  struct Slot {
    int64_t request_id;
    int32_t seq_id;
    int n_prompt, n_computed, n_generated, n_cached;
  };
  std::vector<Slot> slots;
};

class EngineLoop {
 public:
  EngineLoop(Engine& engine, LoopOptions opts);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void start();
  SubmitOutcome submit(GenParams params);
  // Stop accepting; let running requests finish for up to `grace`, cancel the rest, join.
  void shutdown(std::chrono::milliseconds grace);
  LoopStats stats() const;
  const SchedOptions& sched_options() const { return opts_.sched; }

 private:
  struct Active {
    std::shared_ptr<GenStream> stream;
    GenParams params;
    std::unique_ptr<Sampler> sampler;
    GenStats stats;
    std::chrono::steady_clock::time_point t_submit, t_start, t_first, t_last;
    bool started = false;
    bool shutting_down = false;  // cancelled by shutdown(), not by its client
  };
  void run();
  void apply_cancellations();
  void end_cancelled(int64_t id, bool by_shutdown);
  void sample_and_update(const StepPlan& plan);
  void end(int64_t id, StopReason why, std::string error = {});
  void account_step(const StepPlan& plan, double seconds);
  void observe_ttft(double seconds);

  Engine& engine_;
  LoopOptions opts_;
  std::unique_ptr<EngineKvBlocks> kv_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<Scheduler> sched_;
  std::unordered_map<int64_t, Active> active_;
  std::vector<float> logits_;
  std::vector<SeqChunk> chunks_;
  std::thread thread_;
  bool stop_ = false;
  bool accepting_ = true;
  int64_t next_id_ = 1;
  LoopStats totals_;
};

}  // namespace ds
