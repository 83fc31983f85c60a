// A byte-level GGUF builder for tests: writes exactly the bytes we ask for, including
// wrong ones, so the reader can be fed hand-made broken files.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ds::test {

class GgufBuilder {
 public:
  std::vector<uint8_t> bytes;

  template <class T>
  GgufBuilder& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBuilder& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  GgufBuilder& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return put(version).put(n_tensors).put(n_kv);
  }
  GgufBuilder& kv_u32(const std::string& k, uint32_t v) { return str(k).put<uint32_t>(4).put(v); }
  GgufBuilder& kv_str(const std::string& k, const std::string& v) { return str(k).put<uint32_t>(8).str(v); }
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (auto n : ne) put(n);
    return put(type).put(offset);
  }
  GgufBuilder& pad(size_t align) {
    while (bytes.size() % align) bytes.push_back(0);
    return *this;
  }
  GgufBuilder& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
};

}  // namespace ds::test
