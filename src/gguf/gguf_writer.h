// GgufWriter: writes GGUF version 3 files (../shared/SPEC.md, "GGUF container").
//
// Design: models can be far larger than RAM, so the writer streams. All metadata and all
// tensor infos are declared first (their byte sizes follow from type and shape, so every
// offset is known up front); begin() writes the header, key/values, tensor infos and the
// alignment padding; then the tensor data is appended in declaration order, in pieces of
// any size, with the padding between tensors inserted automatically; finish() checks that
// every tensor got exactly its bytes and renames the temporary file into place, so a
// failed or interrupted write never leaves a truncated file under the final name.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ds/status.h"
#include "gguf/gguf_file.h"
#include "kernels/quant/types.h"

namespace ds {

// Value constructors for the common metadata types.
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_str(std::string v);
GgufValue gguf_arr_str(std::vector<std::string> v);
GgufValue gguf_arr_i32(const std::vector<int32_t>& v);
GgufValue gguf_arr_f32(const std::vector<float>& v);

struct GgufWriterTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 1;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the data blob
  uint64_t nbytes = 0;
};

class GgufWriter {
 public:
  GgufWriter() = default;
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata in insertion order; setting an existing key replaces its value in place.
  void set(std::string_view key, GgufValue value);
  void remove(std::string_view key);
  const GgufValue* find(std::string_view key) const;
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }

  // Declares a tensor (shape in ggml order, ne[0] contiguous). Errors: duplicate name,
  // 0 or > 4 dims, non-positive dims, ne[0] not a multiple of the type's block size.
  Status add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne);
  const std::vector<GgufWriterTensor>& tensors() const { return tensors_; }

  // Opens PATH (written as PATH.tmp until finish()) and writes everything before the data.
  // The alignment is general.alignment when set (a power of two), else 32.
  Status begin(const std::string& path);
  // Appends n bytes of tensor data (the current tensor first, spilling into the next ones).
  Status write_data(const void* data, size_t n);
  // All tensors must be complete. Flushes, closes and renames into place.
  Status finish();
  // Abandons a begun file (removes the temporary file). Also done by the destructor.
  void abort();

  // Total file size once written (valid after all tensors and metadata are declared).
  uint64_t file_size();

 private:
  Status write_bytes(const void* p, size_t n);
  template <class T>
  Status put(T v) {
    return write_bytes(&v, sizeof(v));
  }
  void layout();  // assigns tensor offsets for the current alignment
  Status write_value(const GgufValue& v, GgufValueType type);
  Status write_string(std::string_view s);
  Status pad_to(uint64_t alignment);
  uint64_t alignment() const;
  uint64_t header_size() const;

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufWriterTensor> tensors_;
  uint64_t data_size_ = 0;  // sum of padded tensor sizes

  std::string path_;
  std::string tmp_path_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;          // bytes written to the file
  uint64_t data_start_ = 0;   // file offset of the data blob
  size_t cur_tensor_ = 0;     // tensor being written
  uint64_t cur_written_ = 0;  // bytes of it written so far
};

// True when both values have the same type and contents (signed/unsigned integer
// payloads compared by value), for round-trip checks and metadata copies.
bool gguf_value_equal(const GgufValue& a, const GgufValue& b);

}  // namespace ds
