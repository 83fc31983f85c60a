// Scheduler tests with a fake executor: no model, no threads. The fake "model" derives each
// next token from the whole history it reads back through the sequence's KV block table, so
// a wrong position, a wrong shared block or a lost chunk changes the generated text.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "fake_kv.h"
#include "sched/scheduler.h"

namespace ds::test {
namespace {

constexpr int kVocab = 1000;

struct Job {
  std::vector<int32_t> prompt;
  int n_new = 0;
};

// Drives the scheduler the way the engine loop does: schedule, run the fake step, commit,
// sample, append or finish. Records every step's plan for budget checks.
class Driver {
 public:
  Driver(int n_blocks, int bs, SchedOptions o) : kv(n_blocks, bs), sched(kv, o), opts(o) {}

  void submit(int64_t id, const Job& j, bool use_cache = true) {
    ASSERT_EQ(sched.submit(id, j.prompt, use_cache), SubmitResult::kOk);
    jobs[id] = j;
  }

  // One engine-loop iteration; returns false when there was nothing to do.
  bool step() {
    StepPlan plan = sched.schedule();
    for (int64_t id : plan.out_of_memory) {
      oom.push_back(id);
      sched.finish(id);
    }
    if (plan.grants.empty()) return false;
    EXPECT_LE(plan.n_tokens, opts.batch_tokens);
    plans.push_back(plan);
    std::vector<std::pair<int64_t, int32_t>> sampled;
    for (const Grant& g : plan.grants) {
      RequestView v = sched.view(g.req_id);
      EXPECT_EQ(v.n_computed, g.pos0);
      kv.write(g.seq_id, g.pos0, v.tokens.subspan(g.pos0, g.n_tokens));
      computed_tokens += g.n_tokens;
      if (g.wants_logits) {
        auto hist = kv.read(g.seq_id, g.pos0 + g.n_tokens);
        EXPECT_TRUE(std::equal(hist.begin(), hist.end(), v.tokens.begin()))
            << "request " << g.req_id << " reads a history that is not its own";
        sampled.push_back({g.req_id, fake_next_token(hist, kVocab)});
      }
    }
    sched.commit(plan);
    for (auto [id, tok] : sampled) {
      out[id].push_back(tok);
      if (static_cast<int>(out[id].size()) >= jobs[id].n_new) {
        cached[id] = sched.view(id).n_cached;
        sched.finish(id);
      } else {
        sched.append_token(id, tok);
      }
    }
    return true;
  }

  void run(int max_steps = 100000) {
    for (int i = 0; i < max_steps && !sched.idle(); ++i) {
      if (!step() && !sched.idle() && sched.n_running() == 0) {
        ADD_FAILURE() << "scheduler stalled with " << sched.n_waiting() << " waiting";
        return;
      }
    }
    EXPECT_TRUE(sched.idle());
  }

  FakeKv kv;
  Scheduler sched;
  SchedOptions opts;
  std::map<int64_t, Job> jobs;
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, int> cached;
  std::vector<StepPlan> plans;
  std::vector<int64_t> oom;
  int64_t computed_tokens = 0;
};

// What a request generates alone: the fake model applied token by token.
std::vector<int32_t> solo(const Job& j) {
  std::vector<int32_t> hist = j.prompt, gen;
  for (int i = 0; i < j.n_new; ++i) {
    gen.push_back(fake_next_token(hist, kVocab));
    hist.push_back(gen.back());
  }
  return gen;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % kVocab);
  return t;
}

TEST(Scheduler, ChunkedPrefillThenDecode) {
  Driver d(64, 16, {.n_slots = 2, .batch_tokens = 16, .max_queue = 4, .n_ctx = 256});
  Job j{.prompt = std::vector<int32_t>(40, 7), .n_new = 5};
  j.prompt[3] = 11;
  d.submit(1, j);
  d.run();
  EXPECT_EQ(d.out[1], solo(j));
  ASSERT_GE(d.plans.size(), 3u);
  EXPECT_EQ(d.plans[0].grants[0].n_tokens, 16);
  EXPECT_FALSE(d.plans[0].grants[0].wants_logits);
  EXPECT_EQ(d.plans[1].grants[0].pos0, 16);
  EXPECT_EQ(d.plans[2].grants[0].n_tokens, 8);
  EXPECT_TRUE(d.plans[2].grants[0].wants_logits);
  EXPECT_EQ(d.plans[3].grants[0].n_tokens, 1);
}

TEST(Scheduler, DecodeIsGrantedBeforePrefill) {
  Driver d(256, 16, {.n_slots = 4, .batch_tokens = 32, .max_queue = 8, .n_ctx = 1024});
  std::mt19937 rng(1);
  d.submit(1, {random_tokens(rng, 10), 40});
  for (int i = 0; i < 3; ++i) d.step();  // request 1 is decoding now
  d.submit(2, {random_tokens(rng, 300), 3});
  bool saw_mixed = false;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(d.step());
    const StepPlan& p = d.plans.back();
    ASSERT_EQ(p.grants[0].req_id, 1) << "the decoding stream must come first";
    EXPECT_EQ(p.grants[0].n_tokens, 1);
    if (p.grants.size() == 2) {
      saw_mixed = true;
      EXPECT_EQ(p.grants[1].n_tokens, 31);  // the prompt gets the rest of the budget
    }
  }
  EXPECT_TRUE(saw_mixed);
  d.run();
  EXPECT_EQ(d.out[1], solo(d.jobs[1]));
  EXPECT_EQ(d.out[2], solo(d.jobs[2]));
}

TEST(Scheduler, ConcurrentRequestsMatchSoloRuns) {
  Driver d(512, 16, {.n_slots = 4, .batch_tokens = 48, .max_queue = 64, .n_ctx = 512});
  std::mt19937 rng(2);
  for (int64_t id = 1; id <= 20; ++id) d.submit(id, {random_tokens(rng, 1 + rng() % 90), 1 + int(rng() % 30)});
  d.run();
  for (auto& [id, j] : d.jobs) EXPECT_EQ(d.out[id], solo(j)) << "request " << id;
  EXPECT_EQ(d.kv.blocks_free() + d.sched.n_cache_blocks(), d.kv.blocks_total());
}

TEST(Scheduler, QueueBoundAndTooLong) {
  FakeKv kv(8, 16);
  Scheduler s(kv, {.n_slots = 1, .batch_tokens = 16, .max_queue = 2, .n_ctx = 200});
  EXPECT_EQ(s.submit(1, std::vector<int32_t>(200, 1)), SubmitResult::kTooLong);  // n_ctx
  EXPECT_EQ(s.submit(1, std::vector<int32_t>(130, 1)), SubmitResult::kTooLong);  // > 8 blocks
  EXPECT_EQ(s.submit(1, {}), SubmitResult::kTooLong);
  EXPECT_EQ(s.submit(1, {1, 2}), SubmitResult::kOk);
  EXPECT_EQ(s.submit(1, {1, 2}), SubmitResult::kDuplicate);
  EXPECT_EQ(s.submit(2, {1, 2}), SubmitResult::kOk);
  EXPECT_EQ(s.submit(3, {1, 2}), SubmitResult::kQueueFull);
  s.schedule();  // admits 1: the queue has room again
  EXPECT_EQ(s.n_waiting(), 1);
  EXPECT_EQ(s.submit(3, {1, 2}), SubmitResult::kOk);
}

TEST(Scheduler, CancelFreesBlocksAtOnce) {
  Driver d(64, 16, {.n_slots = 4, .batch_tokens = 64, .max_queue = 8, .n_ctx = 256, .prefix_cache = false});
  std::mt19937 rng(3);
  for (int64_t id = 1; id <= 6; ++id) d.submit(id, {random_tokens(rng, 40), 100});
  for (int i = 0; i < 4; ++i) d.step();
  EXPECT_LT(d.kv.blocks_free(), d.kv.blocks_total());
  for (int64_t id = 1; id <= 6; ++id) d.sched.cancel(id);  // running and waiting alike
  EXPECT_TRUE(d.sched.idle());
  EXPECT_EQ(d.kv.blocks_free(), d.kv.blocks_total());
  d.sched.cancel(42);  // unknown: ignored
}

TEST(Scheduler, PrefixCacheSharesBlocks) {
  Driver d(128, 16, {.n_slots = 2, .batch_tokens = 64, .max_queue = 8, .n_ctx = 512});
  std::mt19937 rng(4);
  Job a{random_tokens(rng, 70), 6};
  d.submit(1, a);
  d.run();
  EXPECT_EQ(d.cached[1], 0);
  const int64_t first = d.computed_tokens;
  d.submit(2, a);  // the same prompt: 4 full blocks (64 tokens) come from the cache
  d.run();
  EXPECT_EQ(d.cached[2], 64);
  EXPECT_EQ(d.out[2], d.out[1]);
  EXPECT_EQ(d.computed_tokens - first, first - 64);
  // A shared system prompt, different tails, running at the same time.
  Job b{a.prompt, 5}, c{a.prompt, 5};
  b.prompt.resize(40);
  c.prompt.resize(40);
  for (int i = 0; i < 30; ++i) b.prompt.push_back(1 + i), c.prompt.push_back(500 + i);
  d.submit(3, b);
  d.submit(4, c);
  d.run();
  // Two full blocks are shared; the third cached block matches their next 8 tokens, which
  // are reused through a private copy of it.
  EXPECT_EQ(d.cached[3], 40);
  EXPECT_EQ(d.cached[4], 40);
  EXPECT_EQ(d.out[3], solo(b));
  EXPECT_EQ(d.out[4], solo(c));
  // cache_prompt=false: no reuse.
  d.submit(5, a, false);
  d.run();
  EXPECT_EQ(d.cached[5], 0);
  EXPECT_EQ(d.out[5], d.out[1]);
}

TEST(Scheduler, RepeatedPromptReusesEveryTokenButTheLast) {
  // 32 tokens = two full blocks. The second one cannot be shared (its last row is computed
  // again for the logits), so its first 15 rows are copied: 31 tokens come from the cache,
  // one is computed, and the output equals a run without any cache.
  Driver d(64, 16, {.n_slots = 2, .batch_tokens = 64, .max_queue = 8, .n_ctx = 512});
  std::mt19937 rng(9);
  Job a{random_tokens(rng, 32), 4};
  d.submit(1, a);
  d.run();
  EXPECT_EQ(d.cached[1], 0);
  const int64_t first = d.computed_tokens;
  d.submit(2, a);
  d.run();
  EXPECT_EQ(d.cached[2], 31);
  EXPECT_EQ(d.computed_tokens - first, first - 31);
  EXPECT_EQ(d.out[2], solo(a));
  EXPECT_EQ(d.out[1], solo(a));
  // A prompt that differs from the cached one inside a block reuses the rows before it.
  Job b = a;
  b.prompt[20] = (b.prompt[20] + 1) % kVocab;
  d.submit(3, b);
  d.run();
  EXPECT_EQ(d.cached[3], 20);
  EXPECT_EQ(d.out[3], solo(b));
  // The cached blocks were never written to: the first prompt still gives its own output.
  d.submit(4, a);
  d.run();
  EXPECT_EQ(d.cached[4], 31);
  EXPECT_EQ(d.out[4], solo(a));
}

TEST(Scheduler, PartialBlockIsGivenUpWhenOnlyItsEvictionMakesRoom) {
  // 3 blocks: after a 32-token prompt both its blocks are cached and one is free. The same
  // prompt again needs 2 blocks besides the shared first one: copying the second cached
  // block would leave no room, so it is evicted instead and 16 tokens come from the cache.
  Driver d(3, 16, {.n_slots = 1, .batch_tokens = 64, .max_queue = 8, .n_ctx = 64});
  std::mt19937 rng(11);
  Job a{random_tokens(rng, 32), 1};
  d.submit(1, a);
  d.run();
  EXPECT_EQ(d.sched.n_cache_blocks(), 2);
  d.submit(2, a);
  d.run();
  EXPECT_EQ(d.cached[2], 16);
  EXPECT_EQ(d.out[2], solo(a));
}

TEST(Scheduler, PrefixCacheEvictsLeastRecentlyUsed) {
  Driver d(12, 16, {.n_slots = 1, .batch_tokens = 64, .max_queue = 8, .n_ctx = 512});
  std::mt19937 rng(5);
  Job a{random_tokens(rng, 64), 1}, b{random_tokens(rng, 64), 1}, c{random_tokens(rng, 64), 1};
  d.submit(1, a);
  d.run();
  d.submit(2, b);
  d.run();
  EXPECT_EQ(d.sched.n_cache_blocks(), 8);  // 4 + 4 full blocks, 4 blocks free
  d.submit(3, a);
  d.run();
  EXPECT_EQ(d.cached[3], 63);  // all but the last prompt token; a's blocks are now the most recently used
  d.submit(4, c);              // needs 5 blocks: evicts from b (least recently used)
  d.run();
  d.submit(5, a);
  d.run();
  EXPECT_EQ(d.cached[5], 63);
  d.submit(6, b);
  d.run();
  EXPECT_LT(d.cached[6], 48);
  for (int64_t id : {1, 3, 5}) EXPECT_EQ(d.out[id], solo(a));
  EXPECT_EQ(d.out[6], solo(b));
}

TEST(Scheduler, PreemptsWhenMemoryRunsOutAndRecomputes) {
  // 10 blocks of 8 tokens; three requests each growing to ~40 tokens (5 blocks) cannot all
  // stay: the newest is preempted and recomputed later, and every output stays exact.
  Driver d(10, 8, {.n_slots = 3, .batch_tokens = 32, .max_queue = 8, .n_ctx = 128, .prefix_cache = false});
  std::mt19937 rng(6);
  for (int64_t id = 1; id <= 3; ++id) d.submit(id, {random_tokens(rng, 12), 28});
  d.run();
  EXPECT_GT(d.sched.n_preemptions_total(), 0);
  EXPECT_TRUE(d.oom.empty());
  for (auto& [id, j] : d.jobs) EXPECT_EQ(d.out[id], solo(j)) << "request " << id;
  EXPECT_EQ(d.kv.blocks_free(), d.kv.blocks_total());
}

TEST(Scheduler, PreemptionWithPrefixCacheStaysExact) {
  Driver d(14, 8, {.n_slots = 4, .batch_tokens = 24, .max_queue = 32, .n_ctx = 128});
  std::mt19937 rng(7);
  const auto sys = random_tokens(rng, 16);
  for (int64_t id = 1; id <= 10; ++id) {
    Job j{sys, 10 + int(rng() % 20)};
    auto tail = random_tokens(rng, 1 + rng() % 20);
    j.prompt.insert(j.prompt.end(), tail.begin(), tail.end());
    d.submit(id, j);
  }
  d.run();
  EXPECT_TRUE(d.oom.empty());
  for (auto& [id, j] : d.jobs) EXPECT_EQ(d.out[id], solo(j)) << "request " << id;
  EXPECT_EQ(d.kv.blocks_free() + d.sched.n_cache_blocks(), d.kv.blocks_total());
}

TEST(Scheduler, AloneAndOutOfMemoryIsReported) {
  Driver d(3, 8, {.n_slots = 1, .batch_tokens = 32, .max_queue = 8, .n_ctx = 128, .prefix_cache = false});
  d.submit(1, {std::vector<int32_t>(10, 3), 100});
  d.run();
  ASSERT_EQ(d.oom.size(), 1u);
  EXPECT_EQ(d.out[1].size(), 24u - 10u + 1u);  // filled all 3 blocks, then stopped
  EXPECT_EQ(d.kv.blocks_free(), 3);
}

}  // namespace
}  // namespace ds::test
