// ds-server options: flags, the JSON config file (same names), precedence, errors that name
// the option, and --help documenting every option the issue lists.
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
  EXPECT_EQ(c.ctx_size, 8192);
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
  EXPECT_EQ(r->config.ctx_size, 2048);
  EXPECT_EQ(r->config.port, 4321);  // the flag wins wherever --config appears
  EXPECT_FALSE(r->config.prefix_cache);
  std::ofstream(dir + "/bad.json") << R"({"model": "a.gguf", "ctx-size": "big"})";
  auto b = parse_server_args({"--config", dir + "/bad.json"});
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("ctx-size"), std::string::npos);
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
