// GGUF parsing and validation. The file is mmapped read-only and parsed by a bounds-checked
// cursor: every read checks the remaining bytes first, every count is checked against what
// the remaining bytes could possibly hold before anything is allocated, and every tensor's
// extent is checked against the file size with overflow-safe arithmetic. Errors name the
// file, the field and the byte offset.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <limits>

#include "kernels/quant/validate.h"
#include "util/files.h"
#include "util/strings.h"

namespace ds {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxKeyBytes = 1 << 16;
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;

}  // namespace

struct GgufFile::Shard {
  std::string path;
  int fd = -1;
  const uint8_t* base = nullptr;
  size_t size = 0;
  ~Shard() {
    if (base) munmap(const_cast<uint8_t*>(base), size);
    if (fd >= 0) close(fd);
  }
};

// Reads one shard's header, metadata and tensor infos.
struct GgufParser {
  const std::string& path;
  const uint8_t* base;
  size_t size;
  size_t pos = 0;

  Status fail(const std::string& what, size_t at) const {
    return Status::error(str_format("%s: %s (at byte offset %zu)", path.c_str(), what.c_str(), at));
  }
  Status need(size_t n, const char* field) const {
    if (n > size - pos) {
      return fail(str_format("file truncated while reading %s (need %zu bytes, %zu left)", field, n, size - pos), pos);
    }
    return Status::ok();
  }
  template <class T>
  Status read(T* out, const char* field) {
    DS_RETURN_IF_ERROR(need(sizeof(T), field));
    std::memcpy(out, base + pos, sizeof(T));
    pos += sizeof(T);
    return Status::ok();
  }
  Status read_string(std::string* out, const char* field, uint64_t max_len) {
    const size_t at = pos;
    uint64_t len = 0;
    DS_RETURN_IF_ERROR(read(&len, field));
    if (len > size - pos) {
      return fail(str_format("%s: string length %" PRIu64 " runs past the end of the file", field, len), at);
    }
    if (len > max_len) return fail(str_format("%s: string length %" PRIu64 " is too long", field, len), at);
    out->assign(reinterpret_cast<const char*>(base + pos), len);
    pos += len;
    return Status::ok();
  }

  static size_t min_value_bytes(GgufValueType t) {
    if (t == GgufValueType::kString) return 8;
    if (t == GgufValueType::kArray) return 12;
    size_t n = gguf_scalar_bytes(t);
    return n ? n : 1;
  }

  Status read_scalar(GgufValueType t, GgufValue* v, const std::string& key) {
    const char* f = key.c_str();
    switch (t) {
      case GgufValueType::kUint8: {
        uint8_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->u = x;
        v->i = x;
        break;
      }
      case GgufValueType::kInt8: {
        int8_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->i = x;
        v->u = static_cast<uint64_t>(x);
        break;
      }
      case GgufValueType::kUint16: {
        uint16_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->u = x;
        v->i = x;
        break;
      }
      case GgufValueType::kInt16: {
        int16_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->i = x;
        v->u = static_cast<uint64_t>(x);
        break;
      }
      case GgufValueType::kUint32: {
        uint32_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->u = x;
        v->i = x;
        break;
      }
      case GgufValueType::kInt32: {
        int32_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->i = x;
        v->u = static_cast<uint64_t>(x);
        break;
      }
      case GgufValueType::kUint64: {
        uint64_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->u = x;
        v->i = static_cast<int64_t>(x);
        break;
      }
      case GgufValueType::kInt64: {
        int64_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->i = x;
        v->u = static_cast<uint64_t>(x);
        break;
      }
      case GgufValueType::kFloat32: {
        float x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->f = x;
        break;
      }
      case GgufValueType::kFloat64: {
        double x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        v->f = x;
        break;
      }
      case GgufValueType::kBool: {
        const size_t at = pos;
        uint8_t x = 0;
        DS_RETURN_IF_ERROR(read(&x, f));
        if (x > 1) return fail(str_format("%s: bool value %u is neither 0 nor 1", f, x), at);
        v->i = x;
        v->u = x;
        break;
      }
      case GgufValueType::kString:
        DS_RETURN_IF_ERROR(read_string(&v->str, f, size));
        break;
      case GgufValueType::kArray:
        break;  // handled by read_value
    }
    return Status::ok();
  }

  Status read_type(GgufValueType* t, const std::string& key) {
    const size_t at = pos;
    uint32_t raw = 0;
    DS_RETURN_IF_ERROR(read(&raw, key.c_str()));
    if (raw > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return fail(str_format("%s: unknown metadata value type %u", key.c_str(), raw), at);
    }
    *t = static_cast<GgufValueType>(raw);
    return Status::ok();
  }

  Status read_value(GgufValueType t, GgufValue* v, const std::string& key, int depth) {
    v->type = t;
    if (t != GgufValueType::kArray) return read_scalar(t, v, key);
    if (depth >= kMaxArrayDepth) return fail(key + ": arrays nested too deeply", pos);
    DS_RETURN_IF_ERROR(read_type(&v->elem_type, key));
    const size_t at = pos;
    uint64_t n = 0;
    DS_RETURN_IF_ERROR(read(&n, key.c_str()));
    const size_t min_bytes = min_value_bytes(v->elem_type);
    if (n > (size - pos) / min_bytes) {
      return fail(
          str_format("%s: array count %" PRIu64 " cannot fit in the %zu bytes left", key.c_str(), n, size - pos), at);
    }
    GgufValue elem;
    switch (v->elem_type) {
      case GgufValueType::kString:
        v->arr_str.resize(n);
        for (uint64_t k = 0; k < n; ++k) DS_RETURN_IF_ERROR(read_string(&v->arr_str[k], key.c_str(), size));
        break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64:
        v->arr_float.resize(n);
        for (uint64_t k = 0; k < n; ++k) {
          DS_RETURN_IF_ERROR(read_scalar(v->elem_type, &elem, key));
          v->arr_float[k] = elem.f;
        }
        break;
      case GgufValueType::kArray:
        v->arr_nested.resize(n);
        // Each element is itself {u32 element type, u64 count, values}: no per-element tag.
        for (uint64_t k = 0; k < n; ++k) {
          DS_RETURN_IF_ERROR(read_value(GgufValueType::kArray, &v->arr_nested[k], key, depth + 1));
        }
        break;
      default:
        v->arr_int.resize(n);
        for (uint64_t k = 0; k < n; ++k) {
          DS_RETURN_IF_ERROR(read_scalar(v->elem_type, &elem, key));
          v->arr_int[k] = elem.i;
        }
        break;
    }
    return Status::ok();
  }

  Status parse_header(GgufFile* f, std::vector<GgufTensorInfo>* tensors, size_t* data_start) {
    uint32_t magic = 0;
    DS_RETURN_IF_ERROR(read(&magic, "magic"));
    if (magic != kMagic) return fail("not a GGUF file (bad magic)", 0);
    uint32_t version = 0;
    DS_RETURN_IF_ERROR(read(&version, "version"));
    if (version == 1) return fail("GGUF version 1 is obsolete and not supported; re-convert the model", 4);
    if (version != 2 && version != 3) return fail(str_format("unsupported GGUF version %u", version), 4);
    f->version_ = version;
    uint64_t n_tensors = 0, n_kv = 0;
    DS_RETURN_IF_ERROR(read(&n_tensors, "tensor count"));
    DS_RETURN_IF_ERROR(read(&n_kv, "metadata count"));
    if (n_kv > (size - pos) / 13)
      return fail(str_format("metadata count %" PRIu64 " is impossible for this file size", n_kv), 16);
    if (n_tensors > (size - pos) / 32)
      return fail(str_format("tensor count %" PRIu64 " is impossible for this file size", n_tensors), 8);

    for (uint64_t k = 0; k < n_kv; ++k) {
      const size_t at = pos;
      std::string key;
      DS_RETURN_IF_ERROR(read_string(&key, "metadata key", kMaxKeyBytes));
      if (key.empty()) return fail("empty metadata key", at);
      if (f->kv_index_.count(key)) return fail("duplicate metadata key '" + key + "'", at);
      GgufValueType t;
      DS_RETURN_IF_ERROR(read_type(&t, key));
      GgufValue v;
      DS_RETURN_IF_ERROR(read_value(t, &v, key, 0));
      f->kv_index_.emplace(key, f->kv_.size());
      f->kv_.emplace_back(std::move(key), std::move(v));
    }

    if (const GgufValue* a = f->find("general.alignment")) {
      if (a->type != GgufValueType::kUint32 || a->u == 0 || (a->u & (a->u - 1)) != 0) {
        return fail("general.alignment must be a u32 power of two, got " + a->to_string(), 0);
      }
      f->alignment_ = a->u;
    }

    tensors->reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
      GgufTensorInfo ti;
      DS_RETURN_IF_ERROR(parse_tensor_info(&ti));
      tensors->push_back(std::move(ti));
    }
    const uint64_t align = f->alignment_;
    const uint64_t start = (pos + align - 1) / align * align;
    if (start > size && n_tensors > 0) return fail("file truncated before the tensor data", pos);
    *data_start = start;
    return Status::ok();
  }

  Status parse_tensor_info(GgufTensorInfo* ti) {
    const size_t at = pos;
    DS_RETURN_IF_ERROR(read_string(&ti->name, "tensor name", kMaxKeyBytes));
    const std::string field = "tensor '" + ti->name + "'";
    DS_RETURN_IF_ERROR(read(&ti->n_dims, "tensor n_dims"));
    if (ti->n_dims == 0 || ti->n_dims > kMaxDims) {
      return fail(str_format("%s: n_dims %u is not in 1..4", field.c_str(), ti->n_dims), pos - 4);
    }
    int64_t n_el = 1;
    for (uint32_t d = 0; d < ti->n_dims; ++d) {
      uint64_t ne = 0;
      DS_RETURN_IF_ERROR(read(&ne, "tensor dims"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(n_el, static_cast<int64_t>(ne), &n_el)) {
        return fail(field + ": dimensions overflow", pos - 8);
      }
      ti->ne[d] = static_cast<int64_t>(ne);
    }
    uint32_t type = 0;
    DS_RETURN_IF_ERROR(read(&type, "tensor type"));
    const GgmlTypeTraits tr = ggml_type_traits(type);
    if (!tr.name || type == static_cast<uint32_t>(GgmlType::Q8_1)) {
      const std::string hint = ggml_unsupported_type_hint(type);
      return fail(str_format("%s: unknown or unsupported tensor type %u%s (supported: %s)", field.c_str(), type,
                             hint.empty() ? "" : (" = " + hint).c_str(), ggml_supported_type_names().c_str()),
                  pos - 4);
    }
    ti->type = static_cast<GgmlType>(type);
    if (ti->ne[0] % tr.block_size != 0) {
      return fail(str_format("%s: row length %" PRId64 " is not a multiple of the %s block size %d", field.c_str(),
                             ti->ne[0], tr.name, tr.block_size),
                  at);
    }
    uint64_t nbytes = 0;
    const uint64_t blocks = static_cast<uint64_t>(n_el) / static_cast<uint64_t>(tr.block_size);
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(tr.type_size), &nbytes)) {
      return fail(field + ": byte size overflows", at);
    }
    ti->nbytes = nbytes;
    DS_RETURN_IF_ERROR(read(&ti->offset, "tensor offset"));
    return Status::ok();
  }
};

// ---------------------------------------------------------------------------

size_t gguf_scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      break;
  }
  return 0;
}

const char* gguf_value_type_name(GgufValueType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return false;
    default:
      return true;
  }
}

size_t GgufValue::array_size() const {
  return arr_int.size() + arr_float.size() + arr_str.size() + arr_nested.size();
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type) {
    case GgufValueType::kString: {
      std::string s = str.size() > 80 ? str.substr(0, 77) + "..." : str;
      return "\"" + escape_for_display(s) + "\"";
    }
    case GgufValueType::kBool:
      return i ? "true" : "false";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return str_format("%g", f);
    case GgufValueType::kUint64:
    case GgufValueType::kUint32:
    case GgufValueType::kUint16:
    case GgufValueType::kUint8:
      return std::to_string(u);
    case GgufValueType::kArray: {
      std::string s = str_format("[%s x %zu]", gguf_value_type_name(elem_type), array_size());
      if (max_items == 0) return s;
      s += " {";
      const size_t n = std::min(max_items, array_size());
      for (size_t k = 0; k < n; ++k) {
        if (k) s += ", ";
        if (!arr_int.empty())
          s += std::to_string(arr_int[k]);
        else if (!arr_float.empty())
          s += str_format("%g", arr_float[k]);
        else if (!arr_str.empty())
          s += "\"" + escape_for_display(arr_str[k]) + "\"";
        else
          s += arr_nested[k].to_string(0);
      }
      if (n < array_size()) s += ", ...";
      return s + "}";
    }
    default:
      return std::to_string(i);
  }
}

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

std::optional<GgufSplitName> gguf_parse_split_name(const std::string& path) {
  // prefix-NNNNN-of-MMMMM.gguf
  const std::string suffix = ".gguf";
  if (path.size() < suffix.size() + 15 || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const size_t end = path.size() - suffix.size();
  const size_t start = end - 15;  // "-NNNNN-of-MMMMM"
  const std::string mid = path.substr(start, 15);
  if (mid[0] != '-' || mid.compare(6, 4, "-of-") != 0) return std::nullopt;
  for (int k : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14}) {
    if (mid[k] < '0' || mid[k] > '9') return std::nullopt;
  }
  GgufSplitName s{path.substr(0, start), std::stoi(mid.substr(1, 5)), std::stoi(mid.substr(10, 5))};
  if (s.index < 1 || s.count < 1 || s.index > s.count) return std::nullopt;
  return s;
}

std::string gguf_split_path(const std::string& prefix, int index, int count) {
  return prefix + str_format("-%05d-of-%05d.gguf", index, count);
}

static Result<std::unique_ptr<GgufFile::Shard>> map_file(const std::string& path) {
  auto sh = std::make_unique<GgufFile::Shard>();
  sh->path = path;
  auto fd = open_regular_file(path);  // a FIFO or directory is an error, never a hang
  if (!fd) return fd.status();
  sh->fd = *fd;
  struct stat st {};
  if (fstat(sh->fd, &st) != 0) return Status::error(path + ": cannot stat: " + std::strerror(errno));
  if (st.st_size < 24)
    return Status::error(
        str_format("%s: file too small to be GGUF (%lld bytes)", path.c_str(), static_cast<long long>(st.st_size)));
  sh->size = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, sh->size, PROT_READ, MAP_PRIVATE, sh->fd, 0);
  if (p == MAP_FAILED) return Status::error(path + ": mmap failed: " + std::strerror(errno));
  sh->base = static_cast<const uint8_t*>(p);
  return sh;
}

GgufFile::~GgufFile() = default;

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, GgufOpenOptions opts) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  std::vector<std::string> paths{path};
  const auto split = gguf_parse_split_name(path);
  if (opts.load_all_shards && split && split->count > 1) {
    if (split->index != 1) {
      return Status::error(path + ": this is shard " + std::to_string(split->index) + " of a split model; open " +
                           gguf_split_path(split->prefix, 1, split->count) + " instead");
    }
    for (int k = 2; k <= split->count; ++k) paths.push_back(gguf_split_path(split->prefix, k, split->count));
  }
  for (size_t si = 0; si < paths.size(); ++si) {
    if (si > 0 && access(paths[si].c_str(), F_OK) != 0) {
      return Status::error(str_format("%s: split model shard %zu of %zu is missing: %s", path.c_str(), si + 1,
                                      paths.size(), paths[si].c_str()));
    }
    auto shard = map_file(paths[si]);
    if (!shard) return shard.status();
    DS_RETURN_IF_ERROR(f->add_shard(std::move(*shard), static_cast<int>(si)));
  }
  f->paths_ = std::move(paths);
  DS_RETURN_IF_ERROR(f->check_split_keys());
  if (opts.check_data) DS_RETURN_IF_ERROR(f->check_tensor_data());
  return f;
}

Status GgufFile::add_shard(std::unique_ptr<Shard> sh, int index) {
  // Each shard is a complete GGUF; model metadata comes from the first.
  GgufFile tmp;
  GgufFile* meta = index == 0 ? this : &tmp;
  GgufParser p{sh->path, sh->base, sh->size};
  std::vector<GgufTensorInfo> tensors;
  size_t data_start = 0;
  DS_RETURN_IF_ERROR(p.parse_header(meta, &tensors, &data_start));

  // Extents: aligned, inside the file, not overlapping each other.
  std::vector<std::pair<uint64_t, size_t>> extents;  // (offset, tensor index)
  for (size_t k = 0; k < tensors.size(); ++k) {
    GgufTensorInfo& ti = tensors[k];
    if (ti.offset % meta->alignment_ != 0) {
      return p.fail(str_format("tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                               ti.name.c_str(), ti.offset, meta->alignment_),
                    data_start);
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(static_cast<uint64_t>(data_start), ti.offset, &end) ||
        __builtin_add_overflow(end, static_cast<uint64_t>(ti.nbytes), &end) || end > sh->size) {
      return p.fail(str_format("tensor '%s': data [%" PRIu64 ", +%zu) runs past the end of the file (%zu bytes)",
                               ti.name.c_str(), ti.offset, ti.nbytes, sh->size),
                    data_start);
    }
    ti.data = sh->base + data_start + ti.offset;
    ti.shard = index;
    extents.emplace_back(ti.offset, k);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t k = 1; k < extents.size(); ++k) {
    const GgufTensorInfo& prev = tensors[extents[k - 1].second];
    const GgufTensorInfo& cur = tensors[extents[k].second];
    if (prev.nbytes > 0 && prev.offset + prev.nbytes > cur.offset) {
      return p.fail("tensor '" + cur.name + "' overlaps the data of tensor '" + prev.name + "'", data_start);
    }
  }
  for (auto& ti : tensors) {
    if (tensor_index_.count(ti.name)) return p.fail("duplicate tensor name '" + ti.name + "'", data_start);
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }
  if (index == 0) version_ = meta->version_;
  shards_.push_back(std::move(sh));
  return Status::ok();
}

Status GgufFile::check_tensor_data(const GgufTensorInfo& t) const {
  const GgmlTypeTraits tr = ggml_type_traits(t.type);
  std::string why;
  if (!validate_blocks(t.type, t.data, t.n_elements() / tr.block_size, &why)) {
    return Status::error(str_format("%s: tensor '%s' (%s): %s", shard_paths()[static_cast<size_t>(t.shard)].c_str(),
                                    t.name.c_str(), tr.name, why.c_str()));
  }
  return Status::ok();
}

Status GgufFile::check_tensor_data() const {
  for (const auto& t : tensors_) DS_RETURN_IF_ERROR(check_tensor_data(t));
  return Status::ok();
}

Status GgufFile::check_split_keys() const {
  auto count = get_int_or("split.count", 1);
  if (!count) return count.status();
  if (*count != static_cast<int64_t>(shards_.size()) && shards_.size() > 1) {
    return Status::error(str_format("%s: split.count says %lld shards but %zu were opened", path().c_str(),
                                    static_cast<long long>(*count), shards_.size()));
  }
  if (shards_.size() > 1) {
    auto n = get_int_or("split.tensors.count", static_cast<int64_t>(tensors_.size()));
    if (!n) return n.status();
    if (*n != static_cast<int64_t>(tensors_.size())) {
      return Status::error(str_format("%s: split.tensors.count says %lld tensors but the shards hold %zu",
                                      path().c_str(), static_cast<long long>(*n), tensors_.size()));
    }
  }
  return Status::ok();
}

uint64_t GgufFile::total_file_bytes() const {
  uint64_t n = 0;
  for (const auto& s : shards_) n += s->size;
  return n;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string GgufFile::architecture() const {
  const GgufValue* v = find("general.architecture");
  return v && v->type == GgufValueType::kString ? v->str : std::string();
}

Status GgufFile::type_error(std::string_view key, const GgufValue& v, const char* want) const {
  return Status::error(str_format("%s: metadata key '%.*s' has type %s, expected %s", path().c_str(),
                                  static_cast<int>(key.size()), key.data(), gguf_value_type_name(v.type), want));
}

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<int64_t>();
  if (!v->is_integer() || v->type == GgufValueType::kBool) return type_error(key, *v, "an integer");
  if (v->type == GgufValueType::kUint64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::error(path() + ": metadata key '" + std::string(key) + "' value is out of range");
  }
  return std::optional<int64_t>(v->i);
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<double>();
  if (v->is_float()) return std::optional<double>(v->f);
  if (v->is_integer() && v->type != GgufValueType::kBool) return std::optional<double>(static_cast<double>(v->i));
  return type_error(key, *v, "a number");
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<bool>();
  if (v->type != GgufValueType::kBool) return type_error(key, *v, "a bool");
  return std::optional<bool>(v->i != 0);
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::string>();
  if (v->type != GgufValueType::kString) return type_error(key, *v, "a string");
  return std::optional<std::string>(v->str);
}

// The *_or getters: the default when absent, the typed value when present, an error otherwise.
template <class T, class Get>
static Result<T> value_or(Get&& got, T def) {
  if (!got) return got.status();
  return got->has_value() ? **got : def;
}

Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t def) const {
  return value_or(get_int(key), def);
}
Result<double> GgufFile::get_float_or(std::string_view key, double def) const {
  return value_or(get_float(key), def);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool def) const {
  return value_or(get_bool(key), def);
}
Result<std::string> GgufFile::get_string_or(std::string_view key, std::string def) const {
  return value_or(get_string(key), std::move(def));
}

}  // namespace ds
