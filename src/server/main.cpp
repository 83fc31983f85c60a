// ds-server: parse options, listen at once (/health answers 503 while the model loads),
// load the engine, serve, and on SIGTERM/SIGINT close the listener and the connections
// without a request being handled, let the requests being handled finish for --grace
// seconds, cancel the rest and exit 0. A second signal exits 1 at once.
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <fstream>
#include <iterator>
#include <thread>

#include "ds/version.h"
#include "gguf/gguf_file.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/logging.h"
#include "server/service_notify.h"
#include "server/thread_budget.h"
#include "server/tokenizer_codec.h"

using namespace ds;

namespace {

struct Loaded {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<TokenizerCodec> codec;
  std::unique_ptr<EngineLoop> loop;
};

Result<Loaded> load(const ServerConfig& c) {
  EngineOptions eo;
  eo.model_path = c.model;
  eo.n_ctx = c.ctx_size;
  eo.n_parallel = c.parallel;
  eo.n_threads = c.threads;
  eo.kv_type = c.kv_type;
  eo.numa = c.numa;
  eo.repack = c.repack;
  eo.mlock = c.mlock;
  eo.max_batch_tokens = c.batch_tokens;
  Loaded l;
  auto engine = Engine::create(eo);
  if (!engine) return engine.status();
  l.engine = std::move(*engine);
  auto file = GgufFile::open(c.model);
  if (!file) return file.status();
  auto tmpl = ChatTemplate::from_gguf(**file, l.engine->tokenizer(), c.chat_template);
  if (!c.chat_template_file.empty() && c.chat_template.empty()) {
    std::ifstream f(c.chat_template_file);
    if (!f) return Status::error("--chat-template-file: cannot read " + c.chat_template_file);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const Tokenizer& tok = l.engine->tokenizer();
    tmpl = ChatTemplate::from_text(text, c.chat_template_file, tok.bos() >= 0 ? tok.token_bytes(tok.bos()) : "",
                                   tok.eos() >= 0 ? tok.token_bytes(tok.eos()) : "");
  }
  if (!tmpl && c.chat_template.empty() && !(*file)->has("tokenizer.chat_template")) {
    // A model without a template still serves /completion; chat falls back to the format
    // of its architecture (ChatTemplate::fallback_name).
    const char* fallback = ChatTemplate::fallback_name((*file)->architecture());
    spdlog::warn("{} has no chat template: using {} (choose with --chat-template)", c.model, fallback);
    const Tokenizer& tok = l.engine->tokenizer();
    tmpl = ChatTemplate::from_name(fallback, tok.bos() >= 0 ? tok.token_bytes(tok.bos()) : "",
                                   tok.eos() >= 0 ? tok.token_bytes(tok.eos()) : "");
  }
  if (!tmpl) return tmpl.status();
  if (!tmpl->warning().empty()) spdlog::warn("{}", tmpl->warning());
  l.codec = std::make_unique<TokenizerCodec>(l.engine->tokenizer(), std::move(*tmpl));
  LoopOptions lo;
  lo.sched = {.n_slots = c.parallel,
              .batch_tokens = c.batch_tokens,
              .max_queue = c.max_queue,
              .n_ctx = l.engine->n_ctx(),
              .prefix_cache = c.prefix_cache};
  const Tokenizer& tok = l.engine->tokenizer();
  lo.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
  l.loop = std::make_unique<EngineLoop>(*l.engine, std::move(lo));
  return l;
}

void init_context(const ServerConfig& cfg, ServerContext* ctx) {
  ctx->opts.api_key = cfg.api_key;
  ctx->opts.model_alias = cfg.alias.empty() ? std::filesystem::path(cfg.model).filename().string() : cfg.alias;
  ctx->opts.n_ctx = cfg.ctx_size;
  ctx->opts.n_parallel = cfg.parallel;
  ctx->opts.max_body_bytes = static_cast<size_t>(cfg.max_body_kb) * 1024;
  ctx->opts.chat_template = cfg.chat_template;
  ctx->opts.api_keys = cfg.api_keys;
  ctx->opts.cors_origins = cfg.cors_origins;
  ctx->opts.model_path = cfg.model;
  SamplingParams& d = ctx->opts.sampling;
  if (cfg.temperature > -1e29f) d.temperature = cfg.temperature;
  if (cfg.top_k != -2) d.top_k = cfg.top_k;
  if (cfg.top_p >= 0) d.top_p = cfg.top_p;
  if (cfg.min_p >= 0) d.min_p = cfg.min_p;
  if (cfg.seed >= 0) d.seed = static_cast<uint64_t>(cfg.seed), ctx->opts.random_seed = false;
  if (cfg.n_predict != -2) ctx->opts.n_predict = cfg.n_predict;
  ctx->opts.reasoning_in_content = cfg.reasoning_format == "none";
  ctx->opts.slots_endpoint = cfg.slots_endpoint;
}

HttpServerOptions http_options(const ServerConfig& cfg) {
  return {.host = cfg.host,
          .port = cfg.port,
          .n_threads = cfg.http_threads ? cfg.http_threads : cfg.parallel + cfg.max_queue + 8,
          .max_body_bytes = static_cast<size_t>(cfg.max_body_kb) * 1024,
          .max_header_bytes = static_cast<size_t>(cfg.max_header_kb) * 1024,
          .request_timeout_s = cfg.request_timeout_s,
          .keep_alive_timeout_s = cfg.keep_alive_timeout_s,
          .write_timeout_s = cfg.timeout_s,
          .max_conns_per_client = cfg.max_conns_per_client};
}

}  // namespace

int main(int argc, char** argv) {
  // A fixed mmap threshold (which also turns off glibc's dynamic one): request bodies, prompts
  // and tokenizer scratch of 256 KiB or more get their own mappings and go back to the system
  // when freed, instead of staying in the per-thread arenas of the HTTP threads for good.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  auto parsed = parse_server_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) {
    std::fprintf(stderr, "ds-server: %s\n", parsed.message().c_str());
    return 2;
  }
  const ServerConfig& cfg = parsed->config;
  if (parsed->help) return std::fputs(help_text().c_str(), stdout), 0;
  if (parsed->version) return std::printf("ds-server %s\n", kVersion), 0;
  setup_logging(cfg.log_format);
  for (const std::string& n : parsed->notices) spdlog::info("{}", n);

  // Signals are taken by one thread with sigwait; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  if (Status st = check_thread_budget(cfg, http_options(cfg).n_threads); !st) {
    spdlog::error("{}", st.message());
    return 1;
  }
  ServiceNotifier notifier;
  ServerContext ctx;
  init_context(cfg, &ctx);
  HttpServer http(ctx, http_options(cfg));
  if (Status st = http.bind(); !st) {
    spdlog::error("{}", st.message());
    return 1;
  }
  std::thread http_thread([&] { http.run(); });
  spdlog::info("listening on http://{}:{} (loading {})", cfg.host, http.port(), cfg.model);
  std::atomic<bool> finished{false};  // set before main wakes the signal thread to end it
  std::promise<void> stop_requested;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (finished) return;
    spdlog::info("received {}: stopping (grace {} s)", sig == SIGTERM ? "SIGTERM" : "SIGINT", cfg.grace_s);
    notifier.stopping();
    http.stop();
    stop_requested.set_value();
    sigwait(&sigs, &sig);
    if (finished) return;
    spdlog::warn("received {} again: exiting at once", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    spdlog::default_logger()->flush();
    std::_Exit(1);
  });

  auto loaded = load(cfg);
  if (!loaded) {
    spdlog::error("cannot load the model: {}", loaded.message());
    http.stop();
    http_thread.join();
    finished = true;
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return 1;
  }
  Loaded& l = *loaded;
  l.loop->start();
  ctx.loop = l.loop.get();
  ctx.codec = l.codec.get();
  ctx.model = &l.engine->info();
  ctx.ready = true;
  spdlog::info("model {} ready: {} ({}), ctx {} x {} sequences, {} KV blocks of {} tokens", ctx.opts.model_alias,
               ctx.model->arch, ctx.model->name, l.engine->n_ctx(), cfg.parallel, l.engine->kv_blocks_total(),
               l.engine->kv_block_size());
  notifier.ready("serving " + ctx.opts.model_alias);

  stop_requested.get_future().wait();  // SIGTERM/SIGINT arrived (http.stop() already called)
  l.loop->shutdown(std::chrono::seconds(cfg.grace_s));
  http.abort();  // the grace period is over: writes to clients that do not read fail at once
  http_thread.join();
  finished = true;
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  spdlog::info("stopped");
  return 0;
}
