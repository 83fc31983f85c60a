// GgufFile: a read-only, validated view of a GGUF model (one file or all shards of a
// split model). The whole file is mmapped; tensor data is never copied. Every count,
// length, offset and dimension read from the file is checked (overflow, bounds, alignment,
// known type) before use, so a corrupt file yields a Status naming the file, the field and
// the byte offset, never a crash or a huge allocation. Format: ../shared/SPEC.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"
#include "kernels/quant/types.h"

namespace ds {

// Metadata value type ids (GGUF), 0..12 in this order.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);
// Bytes of one value of a fixed-size type (1, 2, 4 or 8); 0 for kString and kArray.
size_t gguf_scalar_bytes(GgufValueType t);

// One metadata value. Scalars keep their declared type; arrays keep their element type
// and store elements in the vector that fits (ints, floats, strings, or nested arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType elem_type = GgufValueType::kUint8;  // arrays only

  // Scalar payload: integers (and bool) in i or u, floats in f, strings in str.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string str;

  // Array payload (exactly one is used, by elem_type).
  std::vector<int64_t> arr_int;       // all integer element types and bool (u64 > INT64_MAX stored wrapped)
  std::vector<double> arr_float;      // FLOAT32, FLOAT64
  std::vector<std::string> arr_str;   // STRING
  std::vector<GgufValue> arr_nested;  // ARRAY of ARRAY

  bool is_array() const { return type == GgufValueType::kArray; }
  bool is_integer() const;  // any integer scalar type or bool
  bool is_float() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
  size_t array_size() const;
  // Human-readable short form (arrays summarized), for ds-cli inspect.
  std::string to_string(size_t max_items = 8) const;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is contiguous: a row
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // relative to its shard's data blob
  size_t nbytes = 0;
  int shard = 0;                  // which shard file holds it
  const uint8_t* data = nullptr;  // into the mmap

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return ggml_row_size(type, ne[0]); }
  std::string shape_string() const;  // "[256, 32256]"
};

struct GgufOpenOptions {
  bool load_all_shards = true;  // false: open just this file even if it says it is a shard
  // Also validate every tensor's blocks (check_tensor_data); reads all tensor data.
  bool check_data = false;
};

class GgufFile {
 public:
  struct Shard;  // one mmapped file (defined in the .cpp)

  // Opens and validates. Given the first shard of a split model ("-00001-of-0000N.gguf")
  // it opens every shard and presents one model; a missing shard is an error naming it.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, GgufOpenOptions opts = {});
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return paths_.front(); }
  const std::vector<std::string>& shard_paths() const { return paths_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t total_file_bytes() const;  // all shards

  // Metadata (from the first shard; keys in file order).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: nullopt when absent; a Status error when present with the wrong type
  // (integers of any width convert when the value fits).
  Result<std::optional<int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_float(std::string_view key) const;  // accepts ints too
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<std::string>> get_string(std::string_view key) const;
  // Convenience for optional keys with a default (wrong type is still an error).
  Result<int64_t> get_int_or(std::string_view key, int64_t def) const;
  Result<double> get_float_or(std::string_view key, double def) const;
  Result<bool> get_bool_or(std::string_view key, bool def) const;
  Result<std::string> get_string_or(std::string_view key, std::string def) const;

  std::string architecture() const;  // general.architecture or ""

  // Tensors of all shards, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(std::string_view name) const;

  // Validates the blocks of one tensor (or of all) with the reference toolchain's rules
  // (kernels/quant/validate.h: finite scales, no MXFP4 exponent byte 255). Touches every
  // byte of the data, so opening does not do it unless GgufOpenOptions::check_data is set.
  Status check_tensor_data(const GgufTensorInfo& t) const;
  Status check_tensor_data() const;

 private:
  GgufFile() = default;
  Status add_shard(std::unique_ptr<Shard> shard, int index);
  Status check_split_keys() const;
  Status type_error(std::string_view key, const GgufValue& v, const char* want) const;

  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<Shard>> shards_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend struct GgufParser;
};

// Split-name helpers: "x-00001-of-00009.gguf" -> {"x", 1, 9}; nullopt when not split-named.
struct GgufSplitName {
  std::string prefix;
  int index = 0;
  int count = 0;
};
std::optional<GgufSplitName> gguf_parse_split_name(const std::string& path);
std::string gguf_split_path(const std::string& prefix, int index, int count);

}  // namespace ds
