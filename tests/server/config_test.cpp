// ds-server options: flags, the JSON config file (same names), precedence, errors that name
// the option, and --help documenting every option.
#include <gtest/gtest.h>

#include <fstream>

#include "server/config.h"
#include "server/thread_budget.h"
#include "test_util.h"

namespace ds {
namespace {

TEST(Config, FlagsParse) {
  auto r = parse_server_args({"--model",
                              "m.gguf",
                              "--host",
                              "0.0.0.0",
                              "--port",
                              "9000",
                              "--ctx-size",
                              "8192",
                              "--parallel",
                              "8",
                              "--threads",
                              "16",
                              "--kv-type",
                              "q8_0",
                              "--numa",
                              "distribute",
                              "--api-key",
                              "k",
                              "--log-format",
                              "json",
                              "--batch-tokens",
                              "256",
                              "--max-queue",
                              "5",
                              "--chat-template=deepseek-r1",
                              "--no-prefix-cache"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  const ServerConfig& c = r->config;
  EXPECT_EQ(c.model, "m.gguf");
  EXPECT_EQ(c.host, "0.0.0.0");
  EXPECT_EQ(c.port, 9000);
  EXPECT_EQ(c.ctx_total, 8192);
  EXPECT_EQ(c.ctx_size, 1024);  // --ctx-size is the total over the 8 sequences
  EXPECT_EQ(c.parallel, 8);
  EXPECT_EQ(c.threads, 16);
  EXPECT_EQ(c.kv_type, "q8_0");
  EXPECT_EQ(c.numa, "distribute");
  EXPECT_EQ(c.api_key, "k");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.batch_tokens, 256);
  EXPECT_EQ(c.max_queue, 5);
  EXPECT_EQ(c.chat_template, "deepseek-r1");
  EXPECT_FALSE(c.prefix_cache);
}

TEST(Config, MlockIsASwitchOffByDefault) {
  auto plain = parse_server_args({"--model", "m.gguf"});
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  EXPECT_FALSE(plain->config.mlock);
  auto flag = parse_server_args({"--model", "m.gguf", "--mlock"});
  ASSERT_TRUE(flag.is_ok()) << flag.message();
  EXPECT_TRUE(flag->config.mlock);
  const std::string dir = test::make_temp_dir("cfg_mlock");
  std::ofstream(dir + "/on.json") << R"({"model": "a.gguf", "mlock": true})";
  std::ofstream(dir + "/off.json") << R"({"model": "a.gguf", "mlock": false})";
  auto on = parse_server_args({"--config", dir + "/on.json"});
  ASSERT_TRUE(on.is_ok()) << on.message();
  EXPECT_TRUE(on->config.mlock);
  auto off = parse_server_args({"--config", dir + "/off.json"});
  ASSERT_TRUE(off.is_ok()) << off.message();
  EXPECT_FALSE(off->config.mlock);
  EXPECT_NE(help_text().find("--mlock"), std::string::npos);
}

TEST(Config, ErrorsNameTheOption) {
  auto bad = [](std::vector<std::string> a) {
    auto r = parse_server_args(a);
    EXPECT_FALSE(r.is_ok());
    return r.is_ok() ? std::string() : r.message();
  };
  EXPECT_NE(bad({"--port", "8080"}).find("--model"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--port", "http"}).find("--port"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--port", "70000"}).find("--port"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--kv-type", "q4"}).find("f32|f16|bf16|q8_0"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--log-format", "xml"}).find("--log-format"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--frobnicate"}).find("--frobnicate"), std::string::npos);
  EXPECT_NE(bad({"--model", "m", "--threads"}).find("needs a value"), std::string::npos);
}

TEST(Config, FileThenFlagsOverride) {
  const std::string dir = test::make_temp_dir("cfg");
  std::ofstream(dir + "/c.json") << R"({"model": "a.gguf", "ctx_size": 2048, "port": 1234, "no-prefix-cache": true})";
  auto r = parse_server_args({"--port", "4321", "--config", dir + "/c.json"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->config.model, "a.gguf");
  EXPECT_EQ(r->config.ctx_size, 512);  // "ctx_size" in a file is the total too: 2048 over 4 sequences
  EXPECT_EQ(r->config.port, 4321);     // the flag wins wherever --config appears
  EXPECT_FALSE(r->config.prefix_cache);
  std::ofstream(dir + "/bad.json") << R"({"model": "a.gguf", "ctx-size": "big"})";
  auto b = parse_server_args({"--config", dir + "/bad.json"});
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("ctx-size"), std::string::npos);
  std::ofstream(dir + "/llama.json")
      << R"({"model": "a.gguf", "flash-attn": true, "jinja": true, "temp": 0.3, "top-p": "0.5"})";
  auto l = parse_server_args({"--config", dir + "/llama.json"});
  ASSERT_TRUE(l.is_ok()) << l.message();
  EXPECT_FLOAT_EQ(l->config.temperature, 0.3f);
  EXPECT_FLOAT_EQ(l->config.top_p, 0.5f);
  EXPECT_TRUE(l->notices.empty());
  std::ofstream(dir + "/gpu.json") << R"({"model": "a.gguf", "n-gpu-layers": 99})";
  auto g = parse_server_args({"--config", dir + "/gpu.json"});
  ASSERT_TRUE(g.is_ok()) << g.message();
  ASSERT_EQ(g->notices.size(), 1u);
  EXPECT_NE(g->notices[0].find("n-gpu-layers"), std::string::npos);
  std::ofstream(dir + "/float.json") << R"({"model": "a.gguf", "port": 80.5})";
  EXPECT_NE(parse_server_args({"--config", dir + "/float.json"}).message().find("--port"), std::string::npos);
  std::ofstream(dir + "/unknown.json") << R"({"model": "a.gguf", "colour": 1})";
  EXPECT_NE(parse_server_args({"--config", dir + "/unknown.json"}).message().find("colour"), std::string::npos);
  EXPECT_FALSE(parse_server_args({"--config", dir + "/missing.json"}).is_ok());
}

TEST(Config, HostileValuesAreClearErrors) {
  auto message = [](std::vector<std::string> a) {
    auto r = parse_server_args(a);
    EXPECT_FALSE(r.is_ok());
    return r.is_ok() ? std::string() : r.message();
  };
  EXPECT_NE(message({"--model", "m", "--api-key", ""}).find("--api-key must not be empty"), std::string::npos);
  EXPECT_NE(message({"--model", "m", "--api-key="}).find("--api-key must not be empty"), std::string::npos);
  EXPECT_NE(message({"--model", "m", "--threads", "-1"}).find("--threads"), std::string::npos);
  EXPECT_NE(message({"--model", "m", "--ctx-size", "-5"}).find("--ctx-size"), std::string::npos);
  EXPECT_NE(message({"--model", "m", "--max-queue", "99999999999999999999"}).find("--max-queue"), std::string::npos);
  const std::string dir = test::make_temp_dir("cfg_hostile");
  std::ofstream(dir + "/big.json") << R"({"model": "a.gguf", "port": 1e400})";
  std::string m = message({"--config", dir + "/big.json"});
  EXPECT_NE(m.find("\"port\": the number 1e400 is out of range"), std::string::npos) << m;
  std::ofstream(dir + "/deep.json") << "{\"model\": " + std::string(100000, '[') + "}";
  m = message({"--config", dir + "/deep.json"});
  EXPECT_NE(m.find("nests deeper than"), std::string::npos) << m;
  std::ofstream(dir + "/syntax.json") << R"({"model": "a.gguf",})";
  m = message({"--config", dir + "/syntax.json"});
  EXPECT_NE(m.find("invalid JSON at byte"), std::string::npos) << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  m = message({"--config", dir});
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
}

TEST(Config, ThreadBudgetNamesTheOptionsToLower) {
  const auto limit = thread_limit();
  ASSERT_TRUE(limit.has_value()) << "kernel.threads-max is always readable on Linux";
  ServerConfig cfg;
  cfg.threads = 2;
  EXPECT_TRUE(check_thread_budget(cfg, 16).is_ok());
  const int64_t too_many = limit->available - threads_needed(cfg, 0) + 1;
  ASSERT_LT(too_many, INT32_MAX);
  const Status st = check_thread_budget(cfg, static_cast<int>(too_many));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--max-queue"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(limit->source), std::string::npos) << st.message();
}

TEST(Config, ExampleConfigParses) {
  auto r = parse_server_args({"--config", std::string(DS_SOURCE_DIR) + "/configs/ds-server.json"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->config.parallel, 8);
  EXPECT_EQ(r->config.ctx_size, 8192);  // it says "ctx-per-seq"
}

TEST(Config, LlamaServerCommandLine) {
  const std::string dir = test::make_temp_dir("cfg_llama");
  std::ofstream(dir + "/keys") << "first-key\n\n  second-key  \n";
  auto r = parse_server_args({"-m",
                              "m.gguf",
                              "-c",
                              "4096",
                              "-np",
                              "2",
                              "-t",
                              "8",
                              "-b",
                              "1024",
                              "-ub",
                              "256",
                              "-ctk",
                              "q8_0",
                              "-ctv",
                              "q8_0",
                              "-fa",
                              "on",
                              "--temp",
                              "0.5",
                              "--top-k",
                              "10",
                              "--top-p",
                              "0.9",
                              "--min-p",
                              "0.1",
                              "--seed",
                              "42",
                              "-n",
                              "64",
                              "--jinja",
                              "--chat-template",
                              "chatml",
                              "--chat-template-file",
                              "t.jinja",
                              "--reasoning-format",
                              "none",
                              "--metrics",
                              "--no-slots",
                              "--cont-batching",
                              "--no-webui",
                              "--alias",
                              "tiny",
                              "--api-key-file",
                              dir + "/keys",
                              "--cors-origins",
                              "https://a.example"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  const ServerConfig& c = r->config;
  EXPECT_EQ(c.model, "m.gguf");
  EXPECT_EQ(c.ctx_size, 2048);
  EXPECT_EQ(c.parallel, 2);
  EXPECT_EQ(c.threads, 8);
  EXPECT_EQ(c.batch_tokens, 256);  // the smaller of -b and -ub
  EXPECT_EQ(c.kv_type, "q8_0");
  EXPECT_FLOAT_EQ(c.temperature, 0.5f);
  EXPECT_EQ(c.top_k, 10);
  EXPECT_FLOAT_EQ(c.top_p, 0.9f);
  EXPECT_FLOAT_EQ(c.min_p, 0.1f);
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.n_predict, 64);
  EXPECT_EQ(c.chat_template, "chatml");
  EXPECT_EQ(c.chat_template_file, "t.jinja");
  EXPECT_EQ(c.reasoning_format, "none");
  EXPECT_FALSE(c.slots_endpoint);
  EXPECT_EQ(c.alias, "tiny");
  EXPECT_EQ(c.api_keys, (std::vector<std::string>{"first-key", "second-key"}));
  EXPECT_EQ(c.cors_origins, "https://a.example");
  EXPECT_TRUE(r->notices.empty());
}

TEST(Config, ContextTotalOrPerSequence) {
  auto ctx = [](std::vector<std::string> a) {
    a.insert(a.begin(), {"-m", "m"});
    auto r = parse_server_args(a);
    EXPECT_TRUE(r.is_ok()) << r.message();
    return r.is_ok() ? r->config.ctx_size : -1;
  };
  EXPECT_EQ(ctx({}), 4096);                                  // default: 4096 per sequence
  EXPECT_EQ(ctx({"-c", "6000", "-np", "3"}), 2000);          // total / parallel, as llama-server
  EXPECT_EQ(ctx({"-np", "3", "--ctx-size", "6000"}), 2000);  // wherever -np appears
  EXPECT_EQ(ctx({"--ctx-per-seq", "3000", "-np", "3"}), 3000);
  EXPECT_EQ(ctx({"-c", "6000", "--ctx-per-seq", "100"}), 100);  // the later one wins
  EXPECT_EQ(ctx({"--ctx-per-seq", "100", "-c", "600", "-np", "2"}), 300);
  EXPECT_EQ(ctx({"-fa", "-c", "64", "-np", "1"}), 64);  // -fa without a value
  auto r = parse_server_args({"-m", "m", "-c", "32", "-np", "4"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("fewer than 16"), std::string::npos);
}

TEST(Config, GpuFlagsAreAcceptedWithANoticeUnknownOnesAreErrors) {
  auto r = parse_server_args(
      {"-m", "m", "-ngl", "99", "-sm", "row", "-ts", "1,1", "-mg", "0", "--n-gpu-layers", "5", "-nkvo"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->notices.size(), 6u);
  EXPECT_NE(r->notices[0].find("--n-gpu-layers"), std::string::npos);
  EXPECT_NE(r->notices[1].find("--split-mode"), std::string::npos);
  for (const std::string& n : r->notices) EXPECT_NE(n.find("GPU"), std::string::npos) << n;
  auto bad = [](std::vector<std::string> a) {
    auto x = parse_server_args(a);
    EXPECT_FALSE(x.is_ok());
    return x.is_ok() ? std::string() : x.message();
  };
  EXPECT_NE(bad({"-m", "m", "-xyz"}).find("-xyz"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "--lora", "a"}).find("--lora"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "-ctk", "f16", "-ctv", "q8_0"}).find("one type"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "-fa", "sometimes"}).find("--flash-attn"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "--temp", "warm"}).find("--temp"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "--reasoning-format", "xml"}).find("--reasoning-format"), std::string::npos);
  EXPECT_NE(bad({"-m", "m", "--api-key-file", "/nonexistent/keys"}).find("/nonexistent/keys"), std::string::npos);
}

TEST(Config, HelpShowsBothSpellingsAndTheContextDifference) {
  const std::string h = help_text();
  for (const char* o : {"-c, --ctx-size",
                        "--ctx-per-seq",
                        "-np, --parallel",
                        "-t, --threads",
                        "-b, --batch-size",
                        "-ub, --ubatch-size",
                        "-ctk, --cache-type-k",
                        "-ctv, --cache-type-v",
                        "-fa, --flash-attn",
                        "--temp",
                        "--top-k",
                        "--top-p",
                        "--min-p",
                        "--seed",
                        "-n, --predict, --n-predict",
                        "--jinja",
                        "--chat-template-file",
                        "--reasoning-format",
                        "--metrics",
                        "--no-slots",
                        "--cont-batching",
                        "--no-webui",
                        "-a, --alias",
                        "--api-key-file",
                        "--cors-origins",
                        "-ngl, --gpu-layers, --n-gpu-layers",
                        "-sm, --split-mode",
                        "-m, --model",
                        "TOTAL"}) {
    EXPECT_NE(h.find(o), std::string::npos) << o;
  }
}

TEST(Config, ConnectionLimits) {
  auto r = parse_server_args({"--model", "m.gguf", "--max-header-kb", "16", "--request-timeout", "5",
                              "--keep-alive-timeout", "7", "--max-conns-per-client", "0", "--timeout", "9"});
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->config.max_header_kb, 16);
  EXPECT_EQ(r->config.request_timeout_s, 5);
  EXPECT_EQ(r->config.keep_alive_timeout_s, 7);
  EXPECT_EQ(r->config.max_conns_per_client, 0);
  EXPECT_EQ(r->config.timeout_s, 9);
  for (const char* flag : {"--max-header-kb", "--request-timeout", "--keep-alive-timeout"}) {
    auto bad = parse_server_args({"--model", "m.gguf", flag, "0"});
    ASSERT_FALSE(bad.is_ok()) << flag;
    EXPECT_NE(bad.message().find(flag), std::string::npos) << bad.message();
  }
  EXPECT_FALSE(parse_server_args({"--model", "m.gguf", "--max-conns-per-client", "-1"}).is_ok());
  for (const char* o : {"--max-header-kb", "--request-timeout", "--keep-alive-timeout", "--max-conns-per-client"}) {
    EXPECT_NE(help_text().find(o), std::string::npos) << o;
  }
}

TEST(Config, HelpDocumentsEveryOption) {
  const std::string h = help_text();
  for (const char* o :
       {"--model", "--host", "--port", "--ctx-size", "--parallel", "--threads", "--kv-type", "--numa", "--api-key",
        "--config", "--log-format", "--batch-tokens", "--max-queue", "--chat-template", "--grace", "--help"}) {
    EXPECT_NE(h.find(o), std::string::npos) << o;
  }
  auto r = parse_server_args({"--help"});
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->help);
}

}  // namespace
}  // namespace ds
