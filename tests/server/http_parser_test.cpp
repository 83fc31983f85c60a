// RequestParser (src/server/http_parser.h) without sockets: complete, partial and pipelined
// input, chunked bodies, every refusal with its status, keep-alive rules. The socket-level
// behaviour is in test_hostile_http.cpp.
#include <gtest/gtest.h>

#include <string>

#include "server/http_parser.h"

namespace ds {
namespace {

HttpLimits small_limits() {
  return {.max_header_bytes = 1024, .max_header_fields = 10, .max_target_bytes = 100, .max_body_bytes = 64};
}

ParseOutcome parse(const std::string& in, ParsedRequest* out = nullptr, HttpLimits limits = small_limits()) {
  RequestParser p(limits);
  ParseOutcome o = p.parse(in);
  if (out && o.state == ParseOutcome::kComplete) *out = p.request();
  return o;
}

void expect_refused(const std::string& in, int status, const std::string& needle) {
  const ParseOutcome o = parse(in);
  EXPECT_EQ(o.state, ParseOutcome::kError) << in;
  EXPECT_EQ(o.status, status) << in << " -> " << o.message;
  EXPECT_NE(o.message.find(needle), std::string::npos) << o.message;
}

TEST(HttpParser, CompleteRequestWithBody) {
  ParsedRequest r;
  const std::string in = "POST /completion?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhello";
  ASSERT_EQ(parse(in, &r).state, ParseOutcome::kComplete);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/completion?x=1");
  EXPECT_EQ(r.path, "/completion");
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.consumed, in.size());
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(r.headers.size(), 3u);
  EXPECT_EQ(r.headers[2].first, "x-a");
  EXPECT_EQ(r.headers[2].second, "b");
}

TEST(HttpParser, ByteByByteNeedsMoreUntilTheLastByte) {
  const std::string in = "POST /t HTTP/1.1\nHost: h\nContent-Length: 3\n\nabc";  // bare LF line ends
  RequestParser p(small_limits());
  for (size_t n = 1; n < in.size(); ++n) ASSERT_EQ(p.parse(in.substr(0, n)).state, ParseOutcome::kNeedMore) << n;
  ASSERT_EQ(p.parse(in).state, ParseOutcome::kComplete);
  EXPECT_EQ(p.request().body, "abc");
}

TEST(HttpParser, PipelinedRequestsAreFramedOneByOne) {
  const std::string a = "GET /health HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string b = "POST /t HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
  const std::string in = "\r\n" + a + b + "GET /x";
  RequestParser p(small_limits());
  ASSERT_EQ(p.parse(in).state, ParseOutcome::kComplete);
  EXPECT_EQ(p.request().path, "/health");
  const size_t used = p.request().consumed;
  EXPECT_EQ(used, 2 + a.size());
  p.reset();
  ASSERT_EQ(p.parse(std::string_view(in).substr(used)).state, ParseOutcome::kComplete);
  EXPECT_EQ(p.request().body, "hi");
  EXPECT_EQ(p.request().consumed, b.size());
  p.reset();
  EXPECT_EQ(p.parse("GET /x").state, ParseOutcome::kNeedMore);
}

TEST(HttpParser, ChunkedBodies) {
  ParsedRequest r;
  const std::string head = "POST /t HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string in = head + "3;ext=1\r\nabc\r\n1\r\nd\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  ASSERT_EQ(parse(in, &r).state, ParseOutcome::kComplete);
  EXPECT_EQ(r.body, "abcd0123456789");
  EXPECT_EQ(r.consumed, in.size() - 4);
  EXPECT_EQ(parse(head + "3\r\nab").state, ParseOutcome::kNeedMore);
  expect_refused(head + "zz\r\nabc\r\n", 400, "chunk size");
  expect_refused(head + "3\r\nabcX\r\n", 400, "CRLF");
  expect_refused(head + "41\r\n", 413, "too large");
  expect_refused(head + "40\r\n" + std::string(64, 'a') + "\r\n1\r\n", 413, "too large");
}

TEST(HttpParser, LimitsAndFramingRefusals) {
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 10; ++i) many += "X" + std::to_string(i) + ": v\r\n";
  expect_refused(many + "\r\n", 431, "more than 10 header fields");
  expect_refused("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'), 431, "larger than 1024 bytes");
  expect_refused("GET /" + std::string(200, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", 414, "longer than 100");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n", 413, "too large");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\n\r\n", 411, "Content-Length");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "conflicting");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n", 400, "Content-Length");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                 "Transfer-Encoding and Content-Length");
  expect_refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "only chunked");
  expect_refused("GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505, "not supported");
  expect_refused("GET / HTTP/1.1\r\n\r\n", 400, "Host");
  expect_refused("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "folding");
  expect_refused("GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", 400, "header line");
  expect_refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n", 400, "control character");
  expect_refused("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "request line");
  expect_refused("GET / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n", 417, "Expect");
  // Identical duplicates frame the same way everywhere: accepted.
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx").state,
            ParseOutcome::kComplete);
}

TEST(HttpParser, KeepAliveAndExpectContinue) {
  ParsedRequest r;
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &r).state, ParseOutcome::kComplete);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r).state, ParseOutcome::kComplete);
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", &r).state, ParseOutcome::kComplete);
  EXPECT_FALSE(r.keep_alive);
  RequestParser p(small_limits());
  EXPECT_EQ(p.parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n").state,
            ParseOutcome::kNeedMore);
  EXPECT_TRUE(p.head_done());
  EXPECT_TRUE(p.request().expect_continue);
}

}  // namespace
}  // namespace ds
