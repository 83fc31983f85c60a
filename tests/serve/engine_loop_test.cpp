// Engine loop tests on the fake engine: greedy output equals the model applied alone,
// concurrency does not change any request's text (greedy or seeded), cancellation frees the
// KV cache within a step, the queue bound holds, and a failing step ends its requests.
#include <gtest/gtest.h>

#include <future>

#include "serve/engine_loop.h"
#include "fake_engine.h"

namespace ds::test {
namespace {

using namespace std::chrono_literals;

LoopOptions loop_opts(int n_slots, int batch_tokens, int max_queue = 64) {
  LoopOptions o;
  o.sched = {.n_slots = n_slots, .batch_tokens = batch_tokens, .max_queue = max_queue, .n_ctx = 512};
  o.is_eog = [](int32_t t) { return t == kFakeEos; };
  return o;
}

GenParams greedy_params(std::vector<int32_t> prompt, int n_predict) {
  GenParams p;
  p.prompt = std::move(prompt);
  p.sampling.temperature = 0.0f;
  p.n_predict = n_predict;
  return p;
}

struct Collected {
  std::vector<int32_t> tokens;
  GenEvent last;
};

Collected collect(GenStream& s, int max_events = 100000) {
  Collected c;
  for (int i = 0; i < max_events; ++i) {
    GenEvent ev;
    if (!s.next(&ev, 10s)) {
      ADD_FAILURE() << "no event within 10 s";
      return c;
    }
    if (ev.done) {
      c.last = ev;
      return c;
    }
    c.tokens.push_back(ev.token);
  }
  ADD_FAILURE() << "stream did not end";
  return c;
}

std::vector<int32_t> bytes(const std::string& s) {
  std::vector<int32_t> t{kFakeBos};
  for (unsigned char c : s) t.push_back(c);
  return t;
}

void wait_idle(EngineLoop& loop) {
  for (int i = 0; i < 500 && (loop.stats().n_running || loop.stats().n_waiting); ++i) {
    std::this_thread::sleep_for(2ms);
  }
}

TEST(EngineLoop, GreedyEqualsModelAlone) {
  FakeEngine eng({.eos_percent = 0});
  EngineLoop loop(eng, loop_opts(4, 64));
  loop.start();
  auto out = loop.submit(greedy_params(bytes("hello world"), 40));
  ASSERT_EQ(out.code, SubmitCode::kOk);
  Collected c = collect(*out.stream);
  EXPECT_EQ(c.tokens, FakeEngine::greedy(bytes("hello world"), 40, 0));
  EXPECT_EQ(c.last.reason, StopReason::kLimit);
  EXPECT_EQ(c.last.stats.n_generated, 40);
  EXPECT_EQ(c.last.stats.n_prompt, 12);
}

TEST(EngineLoop, SixteenConcurrentStreamsMatchSoloGreedyAndSeeded) {
  FakeEngine eng({.n_blocks = 96, .eos_percent = 1});  // tight: preemption happens
  EngineLoop loop(eng, loop_opts(6, 40));
  loop.start();
  std::vector<GenParams> ps;
  for (int i = 0; i < 16; ++i) {
    GenParams p = greedy_params(bytes("prompt number " + std::to_string(i) + std::string(i * 7, 'x')), 60);
    if (i % 2) {
      p.sampling = SamplingParams{};
      p.sampling.temperature = 0.9f;
      p.sampling.seed = static_cast<uint64_t>(1000 + i);
    }
    ps.push_back(p);
  }
  // Alone, one after another.
  std::vector<Collected> solo;
  for (const auto& p : ps) solo.push_back(collect(*loop.submit(p).stream));
  // All at once.
  std::vector<std::shared_ptr<GenStream>> streams;
  for (const auto& p : ps) {
    auto o = loop.submit(p);
    ASSERT_EQ(o.code, SubmitCode::kOk);
    streams.push_back(o.stream);
  }
  for (int i = 0; i < 16; ++i) {
    Collected c = collect(*streams[i]);
    EXPECT_EQ(c.tokens, solo[i].tokens) << "request " << i;
    EXPECT_EQ(c.last.reason, solo[i].last.reason);
    if (i % 2 == 0) {
      EXPECT_EQ(solo[i].tokens, FakeEngine::greedy(ps[i].prompt, 60, 1));
    }
  }
  wait_idle(loop);
  EXPECT_EQ(loop.stats().kv_blocks_used, 0);
}

TEST(EngineLoop, RepeatedPromptUsesPrefixCache) {
  FakeEngine eng({.eos_percent = 0});
  EngineLoop loop(eng, loop_opts(2, 64));
  loop.start();
  const auto prompt = bytes(std::string(70, 's') + "tail");
  Collected a = collect(*loop.submit(greedy_params(prompt, 5)).stream);
  const int64_t computed = eng.tokens_computed;
  Collected b = collect(*loop.submit(greedy_params(prompt, 5)).stream);
  EXPECT_EQ(a.last.stats.n_cached, 0);
  EXPECT_EQ(b.last.stats.n_cached, 64);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(eng.tokens_computed - computed, computed - 64);
}

TEST(EngineLoop, CancelEndsWithinAStepAndFreesKv) {
  FakeEngine eng({.eos_percent = 0, .step_delay = 1ms});
  EngineLoop loop(eng, loop_opts(2, 64));
  loop.start();
  auto s = loop.submit(greedy_params(bytes("cancel me"), 10000)).stream;
  GenEvent ev;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->next(&ev, 5s));
  s->cancel();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(s->next(&ev, 5s));
    if (ev.done) break;
  }
  EXPECT_TRUE(ev.done);
  EXPECT_EQ(ev.reason, StopReason::kCancelled);
  wait_idle(loop);
  LoopStats st = loop.stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.n_running, 0);
}

TEST(EngineLoop, QueueFullAndTooLong) {
  FakeEngine eng({.eos_percent = 0, .step_delay = 2ms});
  EngineLoop loop(eng, loop_opts(1, 64, 2));
  loop.start();
  std::vector<std::shared_ptr<GenStream>> keep;
  int n_full = 0;
  for (int i = 0; i < 6; ++i) {
    auto o = loop.submit(greedy_params(bytes("q"), 1000));
    if (o.code == SubmitCode::kQueueFull)
      ++n_full;
    else
      keep.push_back(o.stream);
  }
  EXPECT_GE(n_full, 3);  // 1 running + 2 waiting at most
  EXPECT_EQ(loop.submit(greedy_params(std::vector<int32_t>(600, 'a'), 1)).code, SubmitCode::kTooLong);
  EXPECT_EQ(loop.submit(greedy_params({1, 5000}, 1)).code, SubmitCode::kInvalidToken);
  for (auto& s : keep) s->cancel();
  wait_idle(loop);
  EXPECT_EQ(loop.stats().kv_blocks_used, 0);
}

TEST(EngineLoop, NPredictZeroAndEosAndContextLimit) {
  FakeEngine eng({.n_ctx = 40, .eos_percent = 0});
  EngineLoop loop(eng, loop_opts(2, 64));
  loop.start();
  Collected z = collect(*loop.submit(greedy_params(bytes("abc"), 0)).stream);
  EXPECT_TRUE(z.tokens.empty());
  EXPECT_EQ(z.last.reason, StopReason::kLimit);
  Collected c = collect(*loop.submit(greedy_params(bytes("abc"), -1)).stream);
  EXPECT_EQ(c.tokens.size(), 40u - 4u);  // the context is full
  EXPECT_EQ(c.last.reason, StopReason::kLimit);
}

TEST(EngineLoop, FailedStepEndsRequestsWithError) {
  FakeEngine eng({.eos_percent = 0, .step_delay = 1ms});
  EngineLoop loop(eng, loop_opts(2, 64));
  loop.start();
  eng.fail_next_step = true;
  Collected c = collect(*loop.submit(greedy_params(bytes("x"), 5)).stream);
  EXPECT_EQ(c.last.reason, StopReason::kError);
  EXPECT_NE(c.last.error.find("step failed"), std::string::npos);
  Collected ok = collect(*loop.submit(greedy_params(bytes("x"), 5)).stream);
  EXPECT_EQ(ok.tokens.size(), 5u);  // keeps serving
}

TEST(EngineLoop, ShutdownFinishesWithinGraceThenCancels) {
  FakeEngine eng({.eos_percent = 0, .step_delay = 1ms});
  auto loop = std::make_unique<EngineLoop>(eng, loop_opts(2, 64));
  loop->start();
  auto quick = loop->submit(greedy_params(bytes("a"), 3)).stream;
  auto slow = loop->submit(greedy_params(bytes("b"), 100000)).stream;
  loop->shutdown(200ms);
  EXPECT_EQ(collect(*quick).last.reason, StopReason::kLimit);
  Collected c = collect(*slow);
  EXPECT_EQ(c.last.reason, StopReason::kError);
  EXPECT_EQ(c.last.error, "the server is shutting down");
  EXPECT_EQ(loop->submit(greedy_params(bytes("c"), 3)).code, SubmitCode::kStopping);
}

}  // namespace
}  // namespace ds::test
