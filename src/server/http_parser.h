// Incremental HTTP/1.x request framing (RFC 9112) with hard limits, used by the connection
// reader in http_server.cpp. It is fed the bytes a connection has received so far and says
// whether a whole request is there, more bytes are needed, or the request must be refused
// with a status (the connection is then closed: after a framing error the next request's
// start is unknown). Everything that would let a proxy and this server frame a request
// differently is refused: Content-Length headers that disagree, Transfer-Encoding together
// with Content-Length, a Transfer-Encoding other than chunked, folded header lines.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds {

struct HttpLimits {
  size_t max_header_bytes = 64u << 10;  // request line + header fields: larger gets 431
  int max_header_fields = 100;          // more gets 431
  size_t max_target_bytes = 8u << 10;   // request target: longer gets 414
  size_t max_body_bytes = 8u << 20;     // decoded body: larger gets 413
};

struct ParsedRequest {
  std::string method;
  std::string target;  // as sent (path and query)
  std::string path;    // target without the query
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // lowercase names, values trimmed
  std::string body;
  bool keep_alive = true;
  bool expect_continue = false;  // Expect: 100-continue
  size_t head_bytes = 0;         // request line and headers, with the blank line
  size_t consumed = 0;           // bytes of the input this request took (head, body, framing)
};

struct ParseOutcome {
  enum State { kNeedMore, kComplete, kError } state = kNeedMore;
  int status = 0;       // kError: the status to answer (400, 411, 413, 414, 417, 431, 501, 505)
  std::string message;  // kError: what was wrong, for the client and the access log
};

class RequestParser {
 public:
  explicit RequestParser(HttpLimits limits) : limits_(limits) {}
  // `in` holds every byte received since the request began; it may only grow between
  // calls. After kComplete, request() holds the request; reset() before the next one.
  ParseOutcome parse(std::string_view in);
  // True once the request line and headers were read (kNeedMore may still wait for a body).
  bool head_done() const { return head_done_; }
  ParsedRequest& request() { return req_; }
  void reset();

 private:
  ParseOutcome parse_head(std::string_view head);
  ParseOutcome parse_framing();
  ParseOutcome parse_chunked(std::string_view in);

  HttpLimits limits_;
  ParsedRequest req_;
  bool head_done_ = false;
  size_t scanned_ = 0;  // head: bytes already searched for the blank line
  enum class Body { kNone, kLength, kChunked } body_kind_ = Body::kNone;
  uint64_t content_length_ = 0;
  size_t chunk_pos_ = 0;  // chunked: where the next chunk-size line starts
  bool chunks_done_ = false;
};

}  // namespace ds
