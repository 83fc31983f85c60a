// See json_parse.h. The SAX pass keeps one frame per open container (bounded by the depth
// limit), so that an error can name the field it occurred in.
#include "server/json_parse.h"

#include <vector>

namespace ds {

namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxQuoted = 48;  // bytes of input or key quoted in an error message

// Printable ASCII of `s`, at most kMaxQuoted bytes; other bytes become '?'.
std::string quote(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxQuoted)) out += (c >= 0x20 && c < 0x7f && c != '"') ? c : '?';
  if (s.size() > kMaxQuoted) out += "...";
  return out;
}

class BoundedSax {
 public:
  explicit BoundedSax(int max_depth) : max_depth_(max_depth) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(size_t) { return open(false); }
  bool start_array(size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    frames_.back().key = quote(k);
    return true;
  }
  bool parse_error(size_t pos, const std::string& last_token, const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {  // out_of_range: number overflow
      error_ = where() + "the number " + quote(last_token) + " is out of range";
    } else if (pos > text_size_) {
      error_ = "invalid JSON: the text ends before the value does";
    } else {
      // The lexer's last token may be a whole unterminated string: quote only its end.
      const std::string_view tok(last_token);
      error_ = "invalid JSON at byte " + std::to_string(pos) + " (near \"" +
               quote(tok.size() > kMaxQuoted ? tok.substr(tok.size() - kMaxQuoted) : tok) + "\")";
    }
    return false;
  }

  void set_text_size(size_t n) { text_size_ = n; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    bool array;
    int64_t index = -1;  // arrays: index of the current element
    std::string key;     // objects: the current key
  };

  bool value() {
    if (!frames_.empty() && frames_.back().array) frames_.back().index++;
    return true;
  }
  bool open(bool array) {
    value();
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      error_ = (frames_.empty() ? std::string("the JSON value") : "\"" + path() + "\"") + " nests deeper than " +
               std::to_string(max_depth_) + " levels";
      return false;
    }
    frames_.push_back({.array = array, .index = -1, .key = {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  // "messages[0].content"; a long path keeps its start and its end.
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.array)
        p += "[" + std::to_string(f.index) + "]";
      else
        p += (p.empty() ? "" : ".") + f.key;
    }
    if (p.size() > 2 * kMaxQuoted) p = p.substr(0, kMaxQuoted) + "..." + p.substr(p.size() - kMaxQuoted / 2);
    return p;
  }
  std::string where() const { return frames_.empty() ? std::string() : "\"" + path() + "\": "; }

  int max_depth_;
  size_t text_size_ = 0;
  std::vector<Frame> frames_;
  std::string error_;
};

}  // namespace

Status parse_json_bounded(std::string_view text, json* out, int max_depth) {
  BoundedSax sax(max_depth);
  sax.set_text_size(text.size());
  if (!json::sax_parse(text, &sax)) {
    return Status::error(sax.error().empty() ? "invalid JSON" : sax.error());
  }
  try {
    *out = json::parse(text);
  } catch (const std::exception&) {  // unreachable after the SAX pass but for memory exhaustion
    return Status::error("invalid JSON");
  }
  return Status::ok();
}

std::string json_preview(const json& j) {
  switch (j.type()) {
    case json::value_t::array:
      return "an array of " + std::to_string(j.size()) + " elements";
    case json::value_t::object:
      return "an object with " + std::to_string(j.size()) + " keys";
    case json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (s.size() <= kMaxQuoted) return j.dump(-1, ' ', false, json::error_handler_t::replace);
      return json(s.substr(0, kMaxQuoted)).dump(-1, ' ', false, json::error_handler_t::replace) + "... (" +
             std::to_string(s.size()) + " bytes)";
    }
    default:
      return j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace ds
