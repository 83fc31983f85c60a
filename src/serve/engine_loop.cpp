// The engine loop; see engine_loop.h for the design.
#include "serve/engine_loop.h"

#include <algorithm>

namespace ds {

using Clock = std::chrono::steady_clock;

static double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool GenStream::next(GenEvent* ev, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

void GenStream::push(GenEvent ev) {
  {
    std::lock_guard lk(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

EngineLoop::EngineLoop(Engine& engine, LoopOptions opts)
    : engine_(engine), opts_(std::move(opts)), kv_(std::make_unique<EngineKvBlocks>(engine)) {
  opts_.sched.n_ctx = std::min(opts_.sched.n_ctx, engine_.n_ctx());
  sched_ = std::make_unique<Scheduler>(*kv_, opts_.sched);
  // One logits row per chunk; a step carries at most one chunk per slot.
  logits_.resize(static_cast<size_t>(opts_.sched.n_slots) * engine_.info().n_vocab);
  chunks_.reserve(opts_.sched.n_slots);
  totals_.ttft_bucket_bounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  totals_.ttft_bucket_counts.assign(totals_.ttft_bucket_bounds.size() + 1, 0);
}

EngineLoop::~EngineLoop() {
  shutdown(std::chrono::milliseconds(0));
}

void EngineLoop::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

SubmitOutcome EngineLoop::submit(GenParams params) {
  std::lock_guard lk(mu_);
  if (!accepting_) return {SubmitCode::kStopping, nullptr};
  const int n_vocab = engine_.info().n_vocab;
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= n_vocab) return {SubmitCode::kInvalidToken, nullptr};
  }
  const int64_t id = next_id_++;
  switch (sched_->submit(id, params.prompt, params.cache_prompt)) {
    case SubmitResult::kOk:
      break;
    case SubmitResult::kQueueFull:
      ++totals_.requests_rejected;
      return {SubmitCode::kQueueFull, nullptr};
    default:
      return {SubmitCode::kTooLong, nullptr};
  }
  Active a;
  a.stream = std::make_shared<GenStream>(id);
  a.sampler = std::make_unique<Sampler>(params.sampling, n_vocab);
  for (int32_t t : params.prompt) a.sampler->accept(t);
  a.stats.n_prompt = static_cast<int>(params.prompt.size());
  a.params = std::move(params);
  a.t_submit = Clock::now();
  auto stream = a.stream;
  active_.emplace(id, std::move(a));
  ++totals_.requests_total;
  cv_.notify_one();
  return {SubmitCode::kOk, stream};
}

void EngineLoop::end(int64_t id, StopReason why, std::string error) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  GenEvent ev;
  ev.done = true;
  ev.reason = why;
  ev.error = std::move(error);
  ev.stats = it->second.stats;
  it->second.stream->push(std::move(ev));
  sched_->finish(id);
  active_.erase(it);
}

void EngineLoop::end_cancelled(int64_t id, bool by_shutdown) {
  if (by_shutdown) {
    end(id, StopReason::kError, "the server is shutting down");
  } else {
    end(id, StopReason::kCancelled);
  }
}

void EngineLoop::apply_cancellations() {
  std::vector<std::pair<int64_t, bool>> gone;
  for (auto& [id, a] : active_) {
    if (a.stream->cancelled()) gone.push_back({id, a.shutting_down});
  }
  for (auto [id, shutdown] : gone) end_cancelled(id, shutdown);
}

void EngineLoop::run() {
  std::unique_lock lk(mu_);
  while (true) {
    apply_cancellations();
    if (stop_ && active_.empty()) break;
    if (sched_->idle()) {
      cv_.wait(lk, [&] { return stop_ || !sched_->idle(); });
      continue;
    }
    StepPlan plan = sched_->schedule();
    totals_.preemptions += static_cast<int64_t>(plan.preempted.size());
    for (int64_t id : plan.out_of_memory) {
      end(id, StopReason::kError, "the KV cache is full: the request cannot grow further");
    }
    if (plan.grants.empty()) {
      cv_.wait_for(lk, std::chrono::milliseconds(5));
      continue;
    }
    chunks_.clear();
    const auto t0 = Clock::now();
    for (const Grant& g : plan.grants) {
      const RequestView v = sched_->view(g.req_id);
      chunks_.push_back(
          {.seq_id = g.seq_id, .tokens = v.tokens.subspan(g.pos0, g.n_tokens), .pos0 = g.pos0, .all_logits = false});
      Active& a = active_.at(g.req_id);
      if (!a.started) a.started = true, a.t_start = t0;
    }
    // The token lists the chunks point into only change on this thread: safe to unlock.
    lk.unlock();
    const Status st = engine_.step(chunks_, logits_.data());
    lk.lock();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!st.is_ok()) {
      for (const Grant& g : plan.grants) end(g.req_id, StopReason::kError, st.message());
      continue;
    }
    sched_->commit(plan);
    account_step(plan, seconds);
    sample_and_update(plan);
  }
}

void EngineLoop::sample_and_update(const StepPlan& plan) {
  const size_t n_vocab = engine_.info().n_vocab;
  const auto now = Clock::now();
  for (size_t row = 0; row < plan.grants.size(); ++row) {
    const Grant& g = plan.grants[row];
    auto it = active_.find(g.req_id);
    if (!g.wants_logits || it == active_.end()) continue;
    Active& a = it->second;
    if (a.stream->cancelled()) {
      end_cancelled(g.req_id, a.shutting_down);
      continue;
    }
    if (a.stats.n_generated == 0) {
      a.t_first = now;
      a.stats.prompt_ms = ms_between(a.t_start, now);
      a.stats.ttft_ms = ms_between(a.t_submit, now);
      a.stats.n_cached = sched_->view(g.req_id).n_cached;
      a.stats.id_slot = g.seq_id;
      totals_.tokens_cached += a.stats.n_cached;
      observe_ttft(a.stats.ttft_ms / 1000.0);
    }
    const int n_predict = a.params.n_predict;
    if (n_predict >= 0 && a.stats.n_generated >= n_predict) {
      end(g.req_id, StopReason::kLimit);
      continue;
    }
    GenEvent ev;
    ev.token = a.sampler->sample(logits_.data() + row * n_vocab, a.params.sampling.n_probs > 0 ? &ev.probs : nullptr);
    if (a.params.sampling.logprobs) {
      ev.logprob = a.sampler->last_logprob();
      ev.top_logprobs = a.sampler->last_top_logprobs();
    }
    if (ev.token < 0) {  // an output constraint that no token of the vocabulary continues
      end(g.req_id, StopReason::kError, "the output grammar allows no token of the vocabulary here");
      continue;
    }
    if (!a.params.ignore_eos && opts_.is_eog && opts_.is_eog(ev.token)) {
      end(g.req_id, StopReason::kEos);
      continue;
    }
    ++a.stats.n_generated;
    ++totals_.tokens_generated;
    a.t_last = now;
    a.stats.predicted_ms = ms_between(a.t_first, now);
    ev.stats = a.stats;
    const int32_t token = ev.token;
    a.stream->push(std::move(ev));
    const size_t n_tokens = sched_->view(g.req_id).tokens.size();
    if ((n_predict >= 0 && a.stats.n_generated >= n_predict) ||
        n_tokens + 1 >= static_cast<size_t>(opts_.sched.n_ctx)) {  // prompt + output <= n_ctx
      end(g.req_id, StopReason::kLimit);
      continue;
    }
    sched_->append_token(g.req_id, token);
    a.sampler->accept(token);
  }
}

void EngineLoop::account_step(const StepPlan& plan, double seconds) {
  ++totals_.steps;
  int n_prompt = 0;
  for (const Grant& g : plan.grants) {
    auto it = active_.find(g.req_id);
    const int n_prompt_req = it == active_.end() ? 0 : it->second.stats.n_prompt;
    // Tokens before the prompt's end are prompt processing; later ones are decode steps
    // (or recomputation after preemption, which counts as prompt work too).
    if (g.n_tokens > 1 || g.pos0 < n_prompt_req) n_prompt += g.n_tokens;
  }
  totals_.tokens_prompt += n_prompt;
  const double share = plan.n_tokens ? static_cast<double>(n_prompt) / plan.n_tokens : 0.0;
  totals_.prompt_seconds += seconds * share;
  totals_.decode_seconds += seconds * (1.0 - share);
}

void EngineLoop::observe_ttft(double seconds) {
  totals_.ttft_sum += seconds;
  const auto& b = totals_.ttft_bucket_bounds;
  for (size_t i = 0; i < b.size(); ++i) {
    if (seconds <= b[i]) ++totals_.ttft_bucket_counts[i];
  }
  ++totals_.ttft_bucket_counts.back();
}

LoopStats EngineLoop::stats() const {
  std::lock_guard lk(mu_);
  LoopStats s = totals_;
  s.n_running = sched_->n_running();
  s.n_waiting = sched_->n_waiting();
  s.kv_blocks_total = kv_->blocks_total();
  s.kv_blocks_cached = sched_->n_cache_blocks();
  s.kv_blocks_used = s.kv_blocks_total - kv_->blocks_free() - sched_->n_cache_evictable();
  for (const auto& [id, a] : active_) {
    const RequestView v = sched_->view(id);
    s.slots.push_back({id, v.seq_id, v.n_prompt, v.n_computed, a.stats.n_generated, v.n_cached});
  }
  std::sort(s.slots.begin(), s.slots.end(),
            [](const LoopStats::Slot& a, const LoopStats::Slot& b) { return a.request_id < b.request_id; });
  return s;
}

void EngineLoop::shutdown(std::chrono::milliseconds grace) {
  const auto deadline = Clock::now() + grace;
  {
    std::lock_guard lk(mu_);
    accepting_ = false;
  }
  while (Clock::now() < deadline) {
    {
      std::lock_guard lk(mu_);
      if (active_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard lk(mu_);
    for (auto& [id, a] : active_) {
      a.shutting_down = true;
      a.stream->cancel();
    }
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ds
