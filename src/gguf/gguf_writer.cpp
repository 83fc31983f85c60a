// GgufWriter implementation: little-endian GGUF v3, streamed through a FILE* with a large
// buffer. Integer payloads are read from whichever of GgufValue::u / ::i is set, so values
// copied from the reader round-trip whatever field it filled.
#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

namespace ds {

GgufValue gguf_u32(uint32_t v) {
  GgufValue r;
  r.type = GgufValueType::kUint32;
  r.u = v;
  r.i = v;
  return r;
}
GgufValue gguf_i32(int32_t v) {
  GgufValue r;
  r.type = GgufValueType::kInt32;
  r.i = v;
  r.u = static_cast<uint64_t>(static_cast<int64_t>(v));
  return r;
}
GgufValue gguf_u64(uint64_t v) {
  GgufValue r;
  r.type = GgufValueType::kUint64;
  r.u = v;
  r.i = static_cast<int64_t>(v);
  return r;
}
GgufValue gguf_f32(float v) {
  GgufValue r;
  r.type = GgufValueType::kFloat32;
  r.f = v;
  return r;
}
GgufValue gguf_bool(bool v) {
  GgufValue r;
  r.type = GgufValueType::kBool;
  r.i = v ? 1 : 0;
  r.u = v ? 1 : 0;
  return r;
}
GgufValue gguf_str(std::string v) {
  GgufValue r;
  r.type = GgufValueType::kString;
  r.str = std::move(v);
  return r;
}
GgufValue gguf_arr_str(std::vector<std::string> v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kString;
  r.arr_str = std::move(v);
  return r;
}
GgufValue gguf_arr_i32(const std::vector<int32_t>& v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kInt32;
  r.arr_int.assign(v.begin(), v.end());
  return r;
}
GgufValue gguf_arr_f32(const std::vector<float>& v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kFloat32;
  r.arr_float.assign(v.begin(), v.end());
  return r;
}

namespace {

bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64 || t == GgufValueType::kBool;
}
uint64_t uint_payload(const GgufValue& v) {
  return v.u != 0 ? v.u : static_cast<uint64_t>(v.i);
}
int64_t int_payload(const GgufValue& v) {
  return v.i != 0 ? v.i : static_cast<int64_t>(v.u);
}
uint64_t array_count(const GgufValue& v) {
  switch (v.elem_type) {
    case GgufValueType::kString:
      return v.arr_str.size();
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return v.arr_float.size();
    case GgufValueType::kArray:
      return v.arr_nested.size();
    default:
      return v.arr_int.size();
  }
}

}  // namespace

bool gguf_value_equal(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return a.f == b.f || (a.f != a.f && b.f != b.f);
    case GgufValueType::kString:
      return a.str == b.str;
    case GgufValueType::kArray: {
      if (a.elem_type != b.elem_type) return false;
      if (a.arr_int != b.arr_int || a.arr_str != b.arr_str) return false;
      if (a.arr_float.size() != b.arr_float.size()) return false;
      for (size_t k = 0; k < a.arr_float.size(); ++k) {
        const double x = a.arr_float[k], y = b.arr_float[k];
        if (x != y && !(x != x && y != y)) return false;
      }
      if (a.arr_nested.size() != b.arr_nested.size()) return false;
      for (size_t k = 0; k < a.arr_nested.size(); ++k) {
        if (!gguf_value_equal(a.arr_nested[k], b.arr_nested[k])) return false;
      }
      return true;
    }
    default:
      return is_unsigned(a.type) ? uint_payload(a) == uint_payload(b) : int_payload(a) == int_payload(b);
  }
}

GgufWriter::~GgufWriter() {
  abort();
}

void GgufWriter::set(std::string_view key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::string(key), std::move(value));
}

void GgufWriter::remove(std::string_view key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it) {
    if (it->first == key) {
      kv_.erase(it);
      return;
    }
  }
}

const GgufValue* GgufWriter::find(std::string_view key) const {
  for (const auto& kv : kv_) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

uint64_t GgufWriter::alignment() const {
  const GgufValue* a = find("general.alignment");
  if (!a || a->is_array() || a->type == GgufValueType::kString || a->is_float()) return 32;
  const uint64_t v = uint_payload(*a);
  return (v != 0 && (v & (v - 1)) == 0 && v <= (1u << 20)) ? v : 32;
}

static uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

Status GgufWriter::add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne) {
  const GgmlTypeTraits tr = ggml_type_traits(type);
  if (!tr.name) return Status::error("gguf writer: tensor '" + std::string(name) + "': unknown type");
  if (ne.empty() || ne.size() > 4) {
    return Status::error("gguf writer: tensor '" + std::string(name) + "': " + std::to_string(ne.size()) +
                         " dims (1..4 allowed)");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return Status::error("gguf writer: duplicate tensor name '" + std::string(name) + "'");
  }
  GgufWriterTensor t;
  t.name = std::string(name);
  t.type = type;
  t.n_dims = static_cast<uint32_t>(ne.size());
  uint64_t n_rows = 1;
  for (size_t k = 0; k < ne.size(); ++k) {
    if (ne[k] <= 0 || ne[k] > (int64_t{1} << 40)) {
      return Status::error("gguf writer: tensor '" + t.name + "': bad dimension " + std::to_string(ne[k]));
    }
    t.ne[k] = ne[k];
    if (k > 0 && __builtin_mul_overflow(n_rows, static_cast<uint64_t>(ne[k]), &n_rows)) {
      return Status::error("gguf writer: tensor '" + t.name + "': element count overflows");
    }
  }
  if (ne[0] % tr.block_size != 0) {
    return Status::error("gguf writer: tensor '" + t.name + "': row length " + std::to_string(ne[0]) +
                         " is not a multiple of " + tr.name + "'s block size " + std::to_string(tr.block_size));
  }
  uint64_t nbytes = 0;
  if (n_rows > (uint64_t{1} << 50) ||
      __builtin_mul_overflow(static_cast<uint64_t>(ggml_row_size(type, ne[0])), n_rows, &nbytes) ||
      nbytes > (uint64_t{1} << 50)) {
    return Status::error("gguf writer: tensor '" + t.name + "' is too large");
  }
  t.nbytes = nbytes;
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufWriter::write_bytes(const void* p, size_t n) {
  if (n == 0) return Status::ok();
  if (std::fwrite(p, 1, n, f_) != n) {
    return Status::error("gguf writer: write to " + tmp_path_ + " failed: " + std::strerror(errno));
  }
  pos_ += n;
  return Status::ok();
}

Status GgufWriter::write_string(std::string_view s) {
  const uint64_t len = s.size();
  DS_RETURN_IF_ERROR(write_bytes(&len, 8));
  return write_bytes(s.data(), s.size());
}

Status GgufWriter::write_value(const GgufValue& v, GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return put<uint8_t>(static_cast<uint8_t>(uint_payload(v)));
    case GgufValueType::kInt8:
      return put<int8_t>(static_cast<int8_t>(int_payload(v)));
    case GgufValueType::kUint16:
      return put<uint16_t>(static_cast<uint16_t>(uint_payload(v)));
    case GgufValueType::kInt16:
      return put<int16_t>(static_cast<int16_t>(int_payload(v)));
    case GgufValueType::kUint32:
      return put<uint32_t>(static_cast<uint32_t>(uint_payload(v)));
    case GgufValueType::kInt32:
      return put<int32_t>(static_cast<int32_t>(int_payload(v)));
    case GgufValueType::kUint64:
      return put<uint64_t>(uint_payload(v));
    case GgufValueType::kInt64:
      return put<int64_t>(int_payload(v));
    case GgufValueType::kFloat32:
      return put<float>(static_cast<float>(v.f));
    case GgufValueType::kFloat64:
      return put<double>(v.f);
    case GgufValueType::kBool:
      return put<uint8_t>(uint_payload(v) ? 1 : 0);
    case GgufValueType::kString:
      return write_string(v.str);
    case GgufValueType::kArray:
      break;
  }
  if (type != GgufValueType::kArray) return Status::error("gguf writer: unknown value type");
  DS_RETURN_IF_ERROR(put<uint32_t>(static_cast<uint32_t>(v.elem_type)));
  const uint64_t n = array_count(v);
  DS_RETURN_IF_ERROR(write_bytes(&n, 8));
  GgufValue e;
  e.type = v.elem_type;
  for (uint64_t k = 0; k < n; ++k) {
    switch (v.elem_type) {
      case GgufValueType::kString:
        DS_RETURN_IF_ERROR(write_string(v.arr_str[k]));
        break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64:
        e.f = v.arr_float[k];
        DS_RETURN_IF_ERROR(write_value(e, v.elem_type));
        break;
      case GgufValueType::kArray:
        DS_RETURN_IF_ERROR(write_value(v.arr_nested[k], GgufValueType::kArray));
        break;
      default:
        e.i = v.arr_int[k];
        e.u = static_cast<uint64_t>(v.arr_int[k]);
        DS_RETURN_IF_ERROR(write_value(e, v.elem_type));
    }
  }
  return Status::ok();
}

Status GgufWriter::pad_to(uint64_t a) {
  static const uint8_t zeros[64] = {};
  uint64_t n = round_up(pos_, a) - pos_;
  while (n > 0) {
    const size_t k = n < sizeof(zeros) ? static_cast<size_t>(n) : sizeof(zeros);
    DS_RETURN_IF_ERROR(write_bytes(zeros, k));
    n -= k;
  }
  return Status::ok();
}

Status GgufWriter::begin(const std::string& path) {
  if (f_) return Status::error("gguf writer: begin() called twice");
  if (const GgufValue* a = find("general.alignment")) {
    const bool integer = !a->is_array() && !a->is_float() && a->type != GgufValueType::kString;
    const uint64_t v = integer ? uint_payload(*a) : 0;
    if (a->type != GgufValueType::kUint32 || v == 0 || (v & (v - 1)) != 0 || v > (1u << 20)) {
      return Status::error("gguf writer: general.alignment must be a u32 power of two (at most 2^20), got " +
                           a->to_string());
    }
  }
  layout();
  path_ = path;
  tmp_path_ = path + ".tmp";
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!f_) return Status::error("gguf writer: cannot create " + tmp_path_ + ": " + std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  pos_ = 0;
  DS_RETURN_IF_ERROR(write_bytes("GGUF", 4));
  DS_RETURN_IF_ERROR(put<uint32_t>(3u));
  DS_RETURN_IF_ERROR(put<uint64_t>(static_cast<uint64_t>(tensors_.size())));
  DS_RETURN_IF_ERROR(put<uint64_t>(static_cast<uint64_t>(kv_.size())));
  for (const auto& kv : kv_) {
    DS_RETURN_IF_ERROR(write_string(kv.first));
    DS_RETURN_IF_ERROR(put<uint32_t>(static_cast<uint32_t>(kv.second.type)));
    DS_RETURN_IF_ERROR(write_value(kv.second, kv.second.type));
  }
  for (const auto& t : tensors_) {
    DS_RETURN_IF_ERROR(write_string(t.name));
    DS_RETURN_IF_ERROR(put<uint32_t>(t.n_dims));
    for (uint32_t k = 0; k < t.n_dims; ++k) {
      DS_RETURN_IF_ERROR(put<uint64_t>(static_cast<uint64_t>(t.ne[k])));
    }
    DS_RETURN_IF_ERROR(put<uint32_t>(static_cast<uint32_t>(t.type)));
    DS_RETURN_IF_ERROR(put<uint64_t>(t.offset));
  }
  DS_RETURN_IF_ERROR(pad_to(alignment()));
  data_start_ = pos_;
  cur_tensor_ = 0;
  cur_written_ = 0;
  return Status::ok();
}

Status GgufWriter::write_data(const void* data, size_t n) {
  if (!f_) return Status::error("gguf writer: write_data() before begin()");
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (cur_tensor_ >= tensors_.size()) {
      return Status::error("gguf writer: " + std::to_string(n) + " bytes of tensor data beyond the last tensor");
    }
    const GgufWriterTensor& t = tensors_[cur_tensor_];
    const uint64_t room = t.nbytes - cur_written_;
    const size_t k = n < room ? n : static_cast<size_t>(room);
    DS_RETURN_IF_ERROR(write_bytes(p, k));
    p += k;
    n -= k;
    cur_written_ += k;
    if (cur_written_ == t.nbytes) {
      DS_RETURN_IF_ERROR(pad_to(alignment()));
      ++cur_tensor_;
      cur_written_ = 0;
    }
  }
  return Status::ok();
}

Status GgufWriter::finish() {
  if (!f_) return Status::error("gguf writer: finish() before begin()");
  // Zero-byte tensors cannot exist (dims are positive), so every tensor needs write_data.
  if (cur_tensor_ != tensors_.size()) {
    const std::string name = tensors_[cur_tensor_].name;
    abort();
    return Status::error("gguf writer: tensor '" + name + "' was not completely written");
  }
  const bool ok = std::fflush(f_) == 0;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) {
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
    return Status::error("gguf writer: writing " + tmp_path_ + " failed: " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_path_, path_, ec);
  if (ec) return Status::error("gguf writer: cannot rename " + tmp_path_ + " to " + path_ + ": " + ec.message());
  return Status::ok();
}

void GgufWriter::abort() {
  if (!f_) return;
  std::fclose(f_);
  f_ = nullptr;
  std::error_code ec;
  std::filesystem::remove(tmp_path_, ec);
}

void GgufWriter::layout() {
  data_size_ = 0;
  for (auto& t : tensors_) {
    t.offset = data_size_;
    data_size_ = round_up(data_size_ + t.nbytes, alignment());
  }
}

uint64_t GgufWriter::file_size() {
  layout();
  return header_size() + data_size_;
}

uint64_t GgufWriter::header_size() const {
  uint64_t n = 4 + 4 + 8 + 8;
  auto value_size = [](const GgufValue& v, GgufValueType t, auto&& self) -> uint64_t {
    if (t == GgufValueType::kString) return 8 + v.str.size();
    if (t != GgufValueType::kArray) return gguf_scalar_bytes(t);
    uint64_t s = 4 + 8;
    if (v.elem_type == GgufValueType::kString) {
      for (const auto& e : v.arr_str) s += 8 + e.size();
    } else if (v.elem_type == GgufValueType::kArray) {
      for (const auto& e : v.arr_nested) s += self(e, GgufValueType::kArray, self);
    } else {
      GgufValue e;
      s += array_count(v) * self(e, v.elem_type, self);
    }
    return s;
  };
  for (const auto& kv : kv_) n += 8 + kv.first.size() + 4 + value_size(kv.second, kv.second.type, value_size);
  for (const auto& t : tensors_) n += 8 + t.name.size() + 4 + 8ull * t.n_dims + 4 + 8;
  return round_up(n, alignment());
}

}  // namespace ds
