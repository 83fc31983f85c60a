// GgufWriter round trips through the project's reader: every metadata type, tensor infos,
// alignment padding, data bytes; and the writer's own error paths.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace ds {
namespace {

GgufValue scalar(GgufValueType t, int64_t i, uint64_t u) {
  GgufValue v;
  v.type = t;
  v.i = i;
  v.u = u;
  return v;
}

void fill_all_types(GgufWriter* w) {
  w->set("general.architecture", gguf_str("llama"));
  w->set("t.u8", scalar(GgufValueType::kUint8, 200, 200));
  w->set("t.i8", scalar(GgufValueType::kInt8, -100, static_cast<uint64_t>(-100)));
  w->set("t.u16", scalar(GgufValueType::kUint16, 65535, 65535));
  w->set("t.i16", scalar(GgufValueType::kInt16, -30000, static_cast<uint64_t>(-30000)));
  w->set("t.u32", gguf_u32(4000000000u));
  w->set("t.i32", gguf_i32(-2000000000));
  w->set("t.u64", gguf_u64(0xFFFFFFFFFFFFFFF0ull));
  w->set("t.i64", scalar(GgufValueType::kInt64, -(int64_t{1} << 60), static_cast<uint64_t>(-(int64_t{1} << 60))));
  w->set("t.f32", gguf_f32(0.1f));
  GgufValue f64;
  f64.type = GgufValueType::kFloat64;
  f64.f = 1e300;
  w->set("t.f64", f64);
  w->set("t.bool", gguf_bool(true));
  w->set("t.empty_str", gguf_str(""));
  w->set("t.utf8", gguf_str("<\xEF\xBD\x9C"
                            "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"));
  w->set("t.arr_str", gguf_arr_str({"a", "", "b c", std::string(300, 'x')}));
  w->set("t.arr_i32", gguf_arr_i32({1, -2, 3}));
  w->set("t.arr_f32", gguf_arr_f32({0.5f, -1.25f}));
  GgufValue bools;
  bools.type = GgufValueType::kArray;
  bools.elem_type = GgufValueType::kBool;
  bools.arr_int = {1, 0, 1};
  w->set("t.arr_bool", bools);
  GgufValue u8s = bools;
  u8s.elem_type = GgufValueType::kUint8;
  u8s.arr_int = {0, 255};
  w->set("t.arr_u8", u8s);
  w->set("t.arr_empty", gguf_arr_i32({}));
}

TEST(GgufWriter, RoundTripMetadataAndTensors) {
  const std::string dir = test::make_temp_dir("writer");
  const std::string path = dir + "/rt.gguf";
  GgufWriter w;
  fill_all_types(&w);
  w.set("general.alignment", gguf_u32(64));
  ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, {3}).is_ok());          // 12 bytes: padding follows
  ASSERT_TRUE(w.add_tensor("b", GgmlType::Q8_0, {64, 2, 3}).is_ok());  // 3D
  ASSERT_TRUE(w.add_tensor("c", GgmlType::F16, {5, 7}).is_ok());
  std::vector<std::vector<uint8_t>> data;
  std::mt19937 rng(5);
  for (const auto& t : w.tensors()) {
    std::vector<uint8_t> d(t.nbytes);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    data.push_back(d);
  }
  const uint64_t expect_size = w.file_size();
  ASSERT_TRUE(w.begin(path).is_ok());
  ASSERT_TRUE(w.write_data(data[0].data(), data[0].size()).is_ok());
  // b and c in uneven pieces spanning the tensor boundary
  std::vector<uint8_t> rest(data[1]);
  rest.insert(rest.end(), data[2].begin(), data[2].end());
  ASSERT_TRUE(w.write_data(rest.data(), 100).is_ok());
  ASSERT_TRUE(w.write_data(rest.data() + 100, rest.size() - 100).is_ok());
  const Status st = w.finish();
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(std::filesystem::file_size(path), expect_size);

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), 64u);
  ASSERT_EQ((*f)->metadata().size(), w.metadata().size());
  for (size_t k = 0; k < w.metadata().size(); ++k) {
    EXPECT_EQ((*f)->metadata()[k].first, w.metadata()[k].first);
    EXPECT_TRUE(gguf_value_equal((*f)->metadata()[k].second, w.metadata()[k].second))
        << w.metadata()[k].first << ": " << (*f)->metadata()[k].second.to_string();
  }
  EXPECT_EQ((*f)->get_int("t.u32").value(), std::optional<int64_t>(4000000000));
  EXPECT_EQ((*f)->get_string("t.utf8").value(), std::optional<std::string>(w.find("t.utf8")->str));
  ASSERT_EQ((*f)->tensors().size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const auto& t = (*f)->tensors()[k];
    const auto& d = w.tensors()[k];
    EXPECT_EQ(t.name, d.name);
    EXPECT_EQ(t.type, d.type);
    EXPECT_EQ(t.n_dims, d.n_dims);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(t.ne[j], d.ne[j]) << t.name;
    EXPECT_EQ(t.offset % 64, 0u);
    ASSERT_EQ(t.nbytes, data[k].size());
    EXPECT_EQ(0, std::memcmp(t.data, data[k].data(), t.nbytes)) << t.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(GgufWriter, NoTensorsAndDefaultAlignment) {
  const std::string dir = test::make_temp_dir("writer0");
  GgufWriter w;
  w.set("general.architecture", gguf_str("qwen2"));
  w.set("general.architecture", gguf_str("llama"));  // replaces in place
  ASSERT_EQ(w.metadata().size(), 1u);
  ASSERT_TRUE(w.begin(dir + "/e.gguf").is_ok());
  ASSERT_TRUE(w.finish().is_ok());
  auto f = GgufFile::open(dir + "/e.gguf");
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ((*f)->architecture(), "llama");
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_TRUE((*f)->tensors().empty());
  std::filesystem::remove_all(dir);
}

TEST(GgufWriter, Errors) {
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor("x", GgmlType::Q4_K, {100}).is_ok());  // not a block multiple
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {}).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {0}).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {-4}).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {int64_t{1} << 40, int64_t{1} << 40, 1 << 20}).is_ok());
  ASSERT_TRUE(w.add_tensor("x", GgmlType::F32, {4}).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {4}).is_ok());  // duplicate
  EXPECT_FALSE(w.write_data("abcd", 4).is_ok());                // before begin
  EXPECT_FALSE(w.begin("/nonexistent-dir/x.gguf").is_ok());
  GgufWriter bad_align;
  bad_align.set("general.alignment", gguf_u32(48));
  EXPECT_FALSE(bad_align.begin("/tmp/never-written.gguf").is_ok());
  bad_align.set("general.alignment", gguf_f32(32.0f));
  EXPECT_FALSE(bad_align.begin("/tmp/never-written.gguf").is_ok());

  const std::string dir = test::make_temp_dir("writer-err");
  ASSERT_TRUE(w.begin(dir + "/x.gguf").is_ok());
  const float v[5] = {1, 2, 3, 4, 5};
  EXPECT_FALSE(w.write_data(v, sizeof(v)).is_ok());  // one float too many
  GgufWriter w2;
  ASSERT_TRUE(w2.add_tensor("x", GgmlType::F32, {4}).is_ok());
  ASSERT_TRUE(w2.begin(dir + "/y.gguf").is_ok());
  ASSERT_TRUE(w2.write_data(v, 8).is_ok());
  EXPECT_FALSE(w2.finish().is_ok());  // incomplete tensor
  EXPECT_FALSE(std::filesystem::exists(dir + "/y.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/y.gguf.tmp"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {
// Arrays of arrays: GGUF's array value is {u32 elem type, u64 count, elements}, and an
// element that is itself an array is again {u32 elem type, u64 count, elements}. Checked
// byte by byte against that encoding.
TEST(GgufWriter, NestedArrayEncoding) {
  const std::string dir = test::make_temp_dir("writer-nested");
  GgufWriter w;
  GgufValue inner = gguf_arr_i32({7, 8});
  GgufValue outer;
  outer.type = GgufValueType::kArray;
  outer.elem_type = GgufValueType::kArray;
  outer.arr_nested = {inner};
  w.set("n", outer);
  ASSERT_TRUE(w.begin(dir + "/n.gguf").is_ok());
  ASSERT_TRUE(w.finish().is_ok());
  const auto b = test::read_file_bytes(dir + "/n.gguf");
  // header 24 bytes, key: u64 len 1 + "n", u32 type 9
  size_t p = 24 + 8 + 1;
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    return v;
  };
  EXPECT_EQ(u32(p), 9u);       // value type ARRAY
  EXPECT_EQ(u32(p + 4), 9u);   // element type ARRAY
  EXPECT_EQ(u64(p + 8), 1u);   // one element
  EXPECT_EQ(u32(p + 16), 5u);  // inner element type INT32
  EXPECT_EQ(u64(p + 20), 2u);  // two elements
  EXPECT_EQ(u32(p + 28), 7u);
  EXPECT_EQ(u32(p + 32), 8u);
  EXPECT_EQ(b.size(), 96u);                  // 69 bytes padded to 32
  auto f = GgufFile::open(dir + "/n.gguf");  // and the reader reads the same encoding
  ASSERT_TRUE(f) << f.message();
  const GgufValue* n = (*f)->find("n");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->arr_nested.size(), 1u);
  EXPECT_EQ(n->arr_nested[0].arr_int, (std::vector<int64_t>{7, 8}));
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace ds
