// Continuous-batching scheduler; see scheduler.h for the policy.
#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>

namespace ds {

Scheduler::Scheduler(KvBlocks& kv, SchedOptions opts) : kv_(kv), opts_(opts) {
  assert(opts_.n_slots > 0 && opts_.batch_tokens > 0);
  if (opts_.prefix_cache) cache_ = std::make_unique<PrefixCache>(kv_);
  for (int32_t s = opts_.n_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

Scheduler::~Scheduler() {
  for (Req* r : std::vector<Req*>(running_)) release_kv(*r);
}

int Scheduler::blocks_for(int n_tokens) const {
  const int bs = kv_.block_size();
  return (n_tokens + bs - 1) / bs;
}

int Scheduler::blocks_available() const {
  return kv_.blocks_free() + (cache_ ? cache_->n_evictable() : 0);
}

SubmitResult Scheduler::submit(int64_t id, std::vector<int32_t> prompt, bool use_cache) {
  if (reqs_.count(id)) return SubmitResult::kDuplicate;
  const int n = static_cast<int>(prompt.size());
  if (n == 0 || n >= opts_.n_ctx || blocks_for(n + 1) > kv_.blocks_total()) {
    return SubmitResult::kTooLong;
  }
  if (n_waiting() >= opts_.max_queue) return SubmitResult::kQueueFull;
  auto r = std::make_unique<Req>();
  r->id = id;
  r->tokens = std::move(prompt);
  r->n_prompt = n;
  r->use_cache = use_cache;
  waiting_.push_back(r.get());
  reqs_.emplace(id, std::move(r));
  return SubmitResult::kOk;
}

void Scheduler::release_kv(Req& r) {
  if (r.seq_id < 0) return;
  if (cache_) cache_->release(r.used);
  r.used.clear();
  r.chain.clear();
  kv_.seq_release(r.seq_id);
  free_slots_.push_back(r.seq_id);
  r.seq_id = -1;
  r.n_blocks = 0;
  r.n_computed = 0;
}

void Scheduler::cancel(int64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Req* r = it->second.get();
  if (r->seq_id >= 0) {
    release_kv(*r);
    running_.erase(std::find(running_.begin(), running_.end(), r));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
  }
  reqs_.erase(it);
}

void Scheduler::preempt(Req& r) {
  release_kv(r);
  running_.erase(std::find(running_.begin(), running_.end(), &r));
  waiting_.push_front(&r);
  ++r.n_preemptions;
  ++n_preemptions_total_;
}

Scheduler::Req* Scheduler::newest_ungranted(const Req* except) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (*it != except && (*it)->granted_step != step_) return *it;
  }
  return nullptr;
}

// Grow r's block table to cover n_tokens, evicting unused cached blocks and then (when
// allowed) preempting newer requests that hold no grant in this step.
bool Scheduler::try_reserve(Req& r, int n_tokens, bool may_preempt) {
  const int need = blocks_for(n_tokens) - r.n_blocks;
  if (need <= 0) return true;
  while (kv_.blocks_free() < need) {
    if (cache_ && cache_->evict(need - kv_.blocks_free()) > 0) continue;
    Req* victim = may_preempt ? newest_ungranted(&r) : nullptr;
    if (!victim) return false;
    preempt(*victim);
    last_preempted_.push_back(victim->id);
  }
  if (!kv_.seq_reserve(r.seq_id, n_tokens).is_ok()) return false;
  r.n_blocks += need;
  return true;
}

void Scheduler::grant(Req& r, int n, StepPlan* plan, int* budget) {
  const int remaining = static_cast<int>(r.tokens.size()) - r.n_computed;
  plan->grants.push_back(
      {.req_id = r.id, .seq_id = r.seq_id, .pos0 = r.n_computed, .n_tokens = n, .wants_logits = n == remaining});
  plan->n_tokens += n;
  *budget -= n;
  r.granted_step = step_;
}

void Scheduler::plan_decode(StepPlan* plan, int* budget) {
  for (Req* r : std::vector<Req*>(running_)) {
    if (*budget < 1) break;
    if (r->seq_id < 0 || static_cast<int>(r->tokens.size()) - r->n_computed != 1) continue;
    if (try_reserve(*r, r->n_computed + 1, true)) {
      grant(*r, 1, plan, budget);
    } else if (running_.size() == 1) {
      plan->out_of_memory.push_back(r->id);  // alone and still no room: cannot continue
    } else {
      preempt(*r);
      plan->preempted.push_back(r->id);
    }
  }
}

void Scheduler::plan_prefill(StepPlan* plan, int* budget) {
  const int bs = kv_.block_size();
  for (Req* r : std::vector<Req*>(running_)) {
    if (*budget < 1) break;
    if (r->seq_id < 0 || r->granted_step == step_) continue;
    int n = std::min(static_cast<int>(r->tokens.size()) - r->n_computed, *budget);
    if (n <= 0) continue;
    if (!try_reserve(*r, r->n_computed + n, false)) {
      // Take what the blocks it holds plus the free ones cover; the rest waits.
      n = (r->n_blocks + kv_.blocks_free()) * bs - r->n_computed;
      if (n <= 0 || !try_reserve(*r, r->n_computed + n, false)) continue;
    }
    grant(*r, n, plan, budget);
  }
}

bool Scheduler::admit(Req& r) {
  const int bs = kv_.block_size();
  const int n = static_cast<int>(r.tokens.size());
  std::vector<int32_t> ids;
  std::vector<uint64_t> hashes;
  // Keep at least one token to compute: its logits start (or resume) generation.
  if (cache_ && r.use_cache) cache_->acquire_prefix(r.tokens, (n - 1) / bs, &ids, &hashes);
  // The next cached block may match the following tokens only in part: its matching rows are
  // reused through a private copy (the tokens after them are computed into that copy).
  const int n_full = static_cast<int>(ids.size()) * bs;
  int32_t partial_src = -1;
  uint64_t partial_hash = 0;
  int n_partial = cache_ && r.use_cache ? cache_->acquire_partial(hashes.empty() ? 0 : hashes.back(),
                                                                  std::span<const int32_t>(r.tokens).subspan(n_full),
                                                                  n - 1 - n_full, &partial_src, &partial_hash)
                                        : 0;
  auto release_partial = [&] {
    if (n_partial > 0) cache_->release(std::span<const uint64_t>(&partial_hash, 1));
    n_partial = 0;
  };
  const int need = blocks_for(n + 1) - static_cast<int>(ids.size());
  // Holding the partial block keeps it from eviction; when that is what leaves too little
  // room, admit without it rather than wait.
  if (n_partial > 0 && blocks_available() < need) release_partial();
  if (blocks_available() < need) {
    if (cache_) cache_->release(hashes);
    release_partial();
    return false;
  }
  if (kv_.blocks_free() < need) cache_->evict(need - kv_.blocks_free());
  r.seq_id = free_slots_.back();
  free_slots_.pop_back();
  bool adopted = true;
  if (!ids.empty() && !kv_.seq_adopt(r.seq_id, ids).is_ok()) {
    cache_->release(hashes);
    ids.clear();
    hashes.clear();
    adopted = false;
  }
  r.n_blocks = static_cast<int>(ids.size());
  r.n_computed = r.n_blocks * bs;
  if (n_partial > 0 && adopted && kv_.seq_copy_block(r.seq_id, partial_src).is_ok()) {
    r.n_blocks += 1;
    r.n_computed += n_partial;
  }
  release_partial();
  if (r.n_preemptions == 0) r.n_cached = r.n_computed;
  r.chain = hashes;
  r.used = std::move(hashes);
  running_.push_back(&r);
  return true;
}

void Scheduler::plan_admission(StepPlan* plan, int* budget) {
  while (*budget > 0 && !free_slots_.empty() && !waiting_.empty()) {
    Req* r = waiting_.front();
    if (!admit(*r)) break;  // first come, first served: no overtaking
    waiting_.pop_front();
    const int n = std::min(static_cast<int>(r->tokens.size()) - r->n_computed, *budget);
    if (try_reserve(*r, r->n_computed + n, false)) grant(*r, n, plan, budget);
  }
}

StepPlan Scheduler::schedule() {
  ++step_;
  StepPlan plan;
  int budget = opts_.batch_tokens;
  last_preempted_.clear();
  plan_decode(&plan, &budget);
  plan_prefill(&plan, &budget);
  plan_admission(&plan, &budget);
  if (plan.grants.empty() && running_.size() > 1) {
    // Every running request is a stuck prefill: make room by preempting the newest.
    preempt(*running_.back());
    plan_prefill(&plan, &budget);
  }
  for (int64_t id : last_preempted_) plan.preempted.push_back(id);
  return plan;
}

void Scheduler::offer_blocks(Req& r) {
  const int bs = kv_.block_size();
  const int n_full = r.n_computed / bs;
  if (!cache_ || static_cast<int>(r.chain.size()) >= n_full) return;
  const std::vector<int32_t> ids = kv_.seq_blocks(r.seq_id);
  for (int ib = static_cast<int>(r.chain.size()); ib < n_full; ++ib) {
    const uint64_t parent = ib ? r.chain[ib - 1] : 0;
    auto blk = std::span<const int32_t>(r.tokens).subspan(static_cast<size_t>(ib) * bs, bs);
    const uint64_t h = PrefixCache::chain_hash(parent, blk);
    r.chain.push_back(h);
    if (cache_->insert(parent, h, blk, ids[ib])) r.used.push_back(h);
  }
}

void Scheduler::commit(const StepPlan& plan) {
  for (const Grant& g : plan.grants) {
    auto it = reqs_.find(g.req_id);
    if (it == reqs_.end()) continue;  // cancelled during the step
    Req& r = *it->second;
    if (r.seq_id != g.seq_id || r.n_computed != g.pos0) continue;
    r.n_computed += g.n_tokens;
    offer_blocks(r);
  }
}

void Scheduler::append_token(int64_t id, int32_t token) {
  auto it = reqs_.find(id);
  if (it != reqs_.end()) it->second->tokens.push_back(token);
}

RequestView Scheduler::view(int64_t id) const {
  const Req& r = *reqs_.at(id);
  return {.id = r.id,
          .seq_id = r.seq_id,
          .n_prompt = r.n_prompt,
          .n_computed = r.n_computed,
          .n_cached = r.n_cached,
          .n_preemptions = r.n_preemptions,
          .tokens = r.tokens};
}

}  // namespace ds
