// Iteration-level continuous batching (STYLE.md habit 5: plain data in, plain data out).
//
// Each request is a token list (prompt, then generated tokens) with n_computed: how many of
// them already sit in the KV cache. schedule() grants each running request a chunk of its
// not-yet-computed tokens within the step's token budget: decode requests (one token left)
// first, then prompt chunks in admission order (chunked prefill), so that a long prompt never
// stalls the streams that are already generating. A chunk that reaches the end of the token
// list asks for logits; the caller samples from them and append_token()s the result.
//
// Memory: a request is admitted (and gets a KV slot = sequence id) only when the free KV
// blocks, counting unused prefix-cache blocks that can be evicted, cover its whole token
// list. When a running request cannot grow, unused cached blocks are evicted first, then the
// most recently admitted request is preempted: its blocks are released and it returns to the
// head of the queue with n_computed = 0, to be recomputed (often from the prefix cache).
// The waiting queue is bounded; submit() refuses beyond it. Nothing here touches tensors or
// threads; the engine loop drives it and the tests drive it with a fake executor.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/kv_blocks.h"
#include "sched/prefix_cache.h"

namespace ds {

struct SchedOptions {
  int n_slots = 4;         // sequences running at once (--parallel)
  int batch_tokens = 512;  // token budget per step (--batch-tokens)
  int max_queue = 64;      // waiting requests beyond which submit() refuses (--max-queue)
  int n_ctx = 4096;        // most tokens one sequence may hold
  bool prefix_cache = true;
};

struct Grant {
  int64_t req_id = 0;
  int32_t seq_id = 0;
  int32_t pos0 = 0;  // first position of the chunk (== n_computed before the step)
  int32_t n_tokens = 0;
  bool wants_logits = false;  // the chunk ends the request's token list: sample after it
};

struct StepPlan {
  std::vector<Grant> grants;  // decode grants first, then prefill chunks
  int n_tokens = 0;
  std::vector<int64_t> preempted;  // requests preempted while planning (for logs/metrics)
  // Requests that cannot continue: alone in the cache and still out of KV blocks. The caller
  // ends them (they stay registered until finish()/cancel()).
  std::vector<int64_t> out_of_memory;
};

enum class SubmitResult { kOk, kQueueFull, kTooLong, kDuplicate };

struct RequestView {
  int64_t id = 0;
  int32_t seq_id = -1;  // -1 while waiting
  int n_prompt = 0;
  int n_computed = 0;
  int n_cached = 0;  // prompt tokens taken from the prefix cache at the last admission
  int n_preemptions = 0;
  std::span<const int32_t> tokens;
};

class Scheduler {
 public:
  Scheduler(KvBlocks& kv, SchedOptions opts);
  ~Scheduler();

  // Queue a request. kTooLong: the prompt cannot fit one sequence (n_ctx) or the whole
  // cache; kQueueFull: max_queue requests already wait. use_cache=false skips reuse (the
  // request's blocks are still offered to the cache for later requests).
  SubmitResult submit(int64_t id, std::vector<int32_t> prompt, bool use_cache = true);
  // Remove a request in any state now, releasing its KV blocks. Unknown ids are ignored.
  void cancel(int64_t id);
  // A request that produced its last token: same as cancel, kept separate for readability.
  void finish(int64_t id) { cancel(id); }

  StepPlan schedule();
  // After the step ran: every granted chunk is now in the KV cache. Full blocks are offered
  // to the prefix cache.
  void commit(const StepPlan& plan);
  // Append a sampled token to a request (after commit of its wants_logits grant).
  void append_token(int64_t id, int32_t token);

  bool has(int64_t id) const { return reqs_.count(id) != 0; }
  RequestView view(int64_t id) const;
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  bool idle() const { return reqs_.empty(); }
  int n_cache_blocks() const { return cache_ ? cache_->size() : 0; }
  int n_cache_evictable() const { return cache_ ? cache_->n_evictable() : 0; }
  const SchedOptions& options() const { return opts_; }
  int64_t n_preemptions_total() const { return n_preemptions_total_; }

 private:
  struct Req {
    int64_t id = 0;
    int32_t seq_id = -1;
    std::vector<int32_t> tokens;
    int n_prompt = 0;
    int n_computed = 0;
    int n_cached = 0;
    int n_preemptions = 0;
    bool use_cache = true;
    int n_blocks = 0;             // KV blocks the sequence holds
    std::vector<uint64_t> chain;  // hash of each leading full block (prefix-cache keys)
    std::vector<uint64_t> used;   // prefix-cache entries this request marks in use
    int64_t granted_step = -1;    // the step that last granted it tokens
    bool stalled = false;         // out of memory and alone: reported, not granted
  };

  int blocks_for(int n_tokens) const;
  int blocks_available() const;
  Req* newest_ungranted(const Req* except) const;
  bool try_reserve(Req& r, int n_tokens, bool may_preempt);
  void preempt(Req& r);
  void release_kv(Req& r);
  void plan_decode(StepPlan* plan, int* budget);
  void plan_prefill(StepPlan* plan, int* budget);
  void plan_admission(StepPlan* plan, int* budget);
  bool admit(Req& r);
  void grant(Req& r, int n, StepPlan* plan, int* budget);
  void offer_blocks(Req& r);

  KvBlocks& kv_;
  SchedOptions opts_;
  std::unique_ptr<PrefixCache> cache_;
  std::unordered_map<int64_t, std::unique_ptr<Req>> reqs_;
  std::deque<Req*> waiting_;
  std::vector<Req*> running_;  // admission order
  std::vector<int32_t> free_slots_;
  int64_t n_preemptions_total_ = 0;
  int64_t step_ = 0;
  std::vector<int64_t> last_preempted_;  // preempted inside try_reserve this step
};

}  // namespace ds
