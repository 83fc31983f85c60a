// Turning generated token bytes into text that is safe to send: StopTextStream holds back
// (1) the bytes of a UTF-8 character that is not complete yet and (2) any tail that could be
// the start of a stop string, until the next tokens resolve it. Nothing it returns is ever
// taken back, so a streaming client sees exactly the non-streaming content, piece by piece.
// Bytes that can never form a character are replaced by U+FFFD, so every output is valid
// UTF-8 (and JSON-encodable).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ds {

// Replaces each invalid byte, with the continuation bytes after it, by one U+FFFD.
std::string utf8_sanitize(std::string_view s);
bool utf8_valid(std::string_view s);

class StopTextStream {
 public:
  explicit StopTextStream(std::vector<std::string> stops);
  // Adds bytes; returns the text that can be sent now.
  std::string push(std::string_view bytes);
  // The generation ended: everything held back (incomplete characters become U+FFFD).
  std::string flush();
  bool stopped() const { return !stop_word_.empty(); }
  const std::string& stop_word() const { return stop_word_; }

 private:
  std::string release(bool final);
  std::vector<std::string> stops_;
  std::string raw_;      // bytes of an unfinished UTF-8 character
  std::string pending_;  // valid text not sent yet
  std::string stop_word_;
};

}  // namespace ds
