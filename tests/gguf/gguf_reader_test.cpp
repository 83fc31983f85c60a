// GGUF reader tests: a valid hand-made file with every metadata type, then one broken file
// per validation rule, each checked for a clear message naming the field; truncation at
// every byte; split models; and every file in ../shared.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_builder.h"
#include "gguf/gguf_file.h"
#include "test_util.h"

namespace ds {
namespace {

using test::GgufBuilder;

std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& name = "t.gguf") {
  static std::string dir = test::make_temp_dir("gguf");
  const std::string path = dir + "/" + name;
  test::write_file_bytes(path, bytes);
  return path;
}

// A valid file: every scalar type, a string array, a nested array, and two tensors.
GgufBuilder valid_file(uint32_t version = 3) {
  GgufBuilder b;
  b.header(version, 2, 17);
  b.str("general.architecture").put<uint32_t>(8).str("llama");
  b.str("k.u8").put<uint32_t>(0).put<uint8_t>(200);
  b.str("k.i8").put<uint32_t>(1).put<int8_t>(-5);
  b.str("k.u16").put<uint32_t>(2).put<uint16_t>(60000);
  b.str("k.i16").put<uint32_t>(3).put<int16_t>(-30000);
  b.kv_u32("k.u32", 4000000000u);
  b.str("k.i32").put<uint32_t>(5).put<int32_t>(-7);
  b.str("k.f32").put<uint32_t>(6).put<float>(1.5f);
  b.str("k.bool").put<uint32_t>(7).put<uint8_t>(1);
  b.str("k.u64").put<uint32_t>(10).put<uint64_t>(1ull << 40);
  b.str("k.i64").put<uint32_t>(11).put<int64_t>(-(1ll << 40));
  b.str("k.f64").put<uint32_t>(12).put<double>(0.25);
  b.str("k.strs").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3).str("a").str("").str("c c");
  b.str("k.ints").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(2).put<int32_t>(3).put<int32_t>(-4);
  // array of 2 arrays: [u8 x2] and [f32 x1]; each element is {elem type, count, values}
  b.str("k.nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2);
  b.put<uint32_t>(0).put<uint64_t>(2).put<uint8_t>(1).put<uint8_t>(2);
  b.put<uint32_t>(6).put<uint64_t>(1).put<float>(2.0f);
  b.kv_u32("general.alignment", 32);
  b.kv_str("k.str", "hello");
  b.tensor("a", {4, 2}, 0, 0);  // F32 4x2 = 32 bytes
  b.tensor("b", {32}, 8, 32);   // Q8_0 one block = 34 bytes
  b.pad(32).zeros(32 + 34);
  return b;
}

Status open_status(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::open(write_temp(bytes));
  return f ? Status::ok() : f.status();
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  Status s = open_status(bytes);
  ASSERT_FALSE(s.is_ok()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("t.gguf"), std::string::npos) << "message must name the file: " << s.message();
}

TEST(GgufReader, ParsesEveryMetadataType) {
  auto f = GgufFile::open(write_temp(valid_file().bytes));
  ASSERT_TRUE(f) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.architecture(), "llama");
  EXPECT_EQ(*g.get_int("k.u8").value(), 200);
  EXPECT_EQ(*g.get_int("k.i8").value(), -5);
  EXPECT_EQ(*g.get_int("k.u16").value(), 60000);
  EXPECT_EQ(*g.get_int("k.i16").value(), -30000);
  EXPECT_EQ(*g.get_int("k.u32").value(), 4000000000ll);
  EXPECT_EQ(*g.get_int("k.i32").value(), -7);
  EXPECT_EQ(*g.get_float("k.f32").value(), 1.5);
  EXPECT_EQ(*g.get_bool("k.bool").value(), true);
  EXPECT_EQ(*g.get_int("k.u64").value(), 1ll << 40);
  EXPECT_EQ(*g.get_int("k.i64").value(), -(1ll << 40));
  EXPECT_EQ(*g.get_float("k.f64").value(), 0.25);
  EXPECT_EQ(*g.get_string("k.str").value(), "hello");
  EXPECT_EQ(g.find("k.strs")->arr_str, (std::vector<std::string>{"a", "", "c c"}));
  EXPECT_EQ(g.find("k.ints")->arr_int, (std::vector<int64_t>{3, -4}));
  const GgufValue* n = g.find("k.nested");
  ASSERT_EQ(n->arr_nested.size(), 2u);
  EXPECT_EQ(n->arr_nested[0].arr_int, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n->arr_nested[1].arr_float, (std::vector<double>{2.0}));
  EXPECT_FALSE(g.get_string("k.u8"));  // wrong type is an error, not a default
  EXPECT_FALSE(g.get_int("k.str"));
  EXPECT_EQ(g.get_int_or("absent", 9).value(), 9);
  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensorInfo* b = g.tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::Q8_0);
  EXPECT_EQ(b->nbytes, 34u);
  EXPECT_EQ(b->data - g.tensor("a")->data, 32);
  EXPECT_EQ(g.tensor("a")->shape_string(), "[4, 2]");
}

TEST(GgufReader, AcceptsVersion2) {
  EXPECT_TRUE(open_status(valid_file(2).bytes).is_ok());
}

TEST(GgufReader, RejectsBadMagicAndVersions) {
  auto b = valid_file();
  b.bytes[0] = 'X';
  expect_error(b.bytes, "bad magic");
  expect_error(valid_file(1).bytes, "version 1 is obsolete");
  expect_error(valid_file(4).bytes, "unsupported GGUF version 4");
}

TEST(GgufReader, TruncationAtEveryByteIsAnError) {
  const auto full = valid_file().bytes;
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_FALSE(open_status(cut).is_ok()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufReader, RejectsDuplicateKey) {
  GgufBuilder b;
  b.header(3, 0, 2).kv_u32("x", 1).kv_u32("x", 2);
  expect_error(b.bytes, "duplicate metadata key 'x'");
}

TEST(GgufReader, RejectsStringPastEof) {
  GgufBuilder b;
  b.header(3, 0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1000).zeros(10);
  expect_error(b.bytes, "runs past the end of the file");
}

TEST(GgufReader, RejectsAbsurdArrayCount) {
  GgufBuilder b;
  b.header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1ull << 60).zeros(64);
  expect_error(b.bytes, "array count");
}

TEST(GgufReader, RejectsAbsurdCounts) {
  GgufBuilder b;
  b.header(3, 1ull << 40, 0).zeros(64);
  expect_error(b.bytes, "tensor count");
  GgufBuilder c;
  c.header(3, 0, ~0ull).zeros(64);
  expect_error(c.bytes, "metadata count");
}

TEST(GgufReader, RejectsUnknownValueType) {
  GgufBuilder b;
  b.header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0);
  expect_error(b.bytes, "unknown metadata value type 13");
}

TEST(GgufReader, RejectsBadBoolAndAlignment) {
  GgufBuilder b;
  b.header(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).zeros(32);
  expect_error(b.bytes, "neither 0 nor 1");
  GgufBuilder c;
  c.header(3, 0, 1).kv_u32("general.alignment", 24).zeros(32);
  expect_error(c.bytes, "general.alignment");
}

GgufBuilder one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes) {
  GgufBuilder b;
  b.header(3, 1, 0).tensor("w", std::move(ne), type, offset).pad(32).zeros(data_bytes);
  return b;
}

TEST(GgufReader, RejectsBadTensorInfos) {
  expect_error(one_tensor({32}, 99, 0, 64).bytes, "unknown or unsupported tensor type 99");
  expect_error(one_tensor({32}, 0, 16, 256).bytes, "not a multiple of the alignment");
  expect_error(one_tensor({64}, 0, 0, 100).bytes, "runs past the end of the file");
  expect_error(one_tensor({1ull << 32, 1ull << 32}, 0, 0, 64).bytes, "dimensions overflow");
  expect_error(one_tensor({1ull << 62, 4}, 0, 0, 64).bytes, "dimensions overflow");
  expect_error(one_tensor({1ull << 62}, 0, 0, 64).bytes, "byte size overflows");
  expect_error(one_tensor({1ull << 61}, 0, 0, 64).bytes, "runs past the end of the file");
  expect_error(one_tensor({33}, 12, 0, 1024).bytes, "not a multiple of the Q4_K block size 256");
  GgufBuilder five;
  five.header(3, 1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32);
  expect_error(five.bytes, "n_dims 5");
}

// The i-quants and MXFP4 (../shared/SPEC-iquants.md, summary table: id, elements per
// block, bytes per block) open with their row-length rule; ids the format does not define
// for this project (ik_llama.cpp's IQ4_K and friends start at 137) name the id and tensor.
TEST(GgufReader, AcceptsIQuantsAndMxfp4WithTheirRowLengthRules) {
  struct Want {
    uint32_t id;
    const char* name;
    int block;
    size_t bytes;
  };
  const Want types[] = {{16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98},
                        {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
                        {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {29, "IQ1_M", 256, 56},
                        {39, "MXFP4", 32, 17}};
  for (const Want& w : types) {
    SCOPED_TRACE(w.name);
    auto f =
        GgufFile::open(write_temp(one_tensor({static_cast<uint64_t>(2 * w.block), 3}, w.id, 0, 6 * w.bytes).bytes));
    ASSERT_TRUE(f) << f.message();
    const GgufTensorInfo& t = (*f)->tensors()[0];
    EXPECT_STREQ(ggml_type_name(t.type), w.name);
    EXPECT_EQ(t.nbytes, 6 * w.bytes);
    EXPECT_EQ(t.row_bytes(), 2 * w.bytes);
    expect_error(one_tensor({static_cast<uint64_t>(w.block + 16), 1}, w.id, 0, 4 * w.bytes).bytes,
                 std::string("not a multiple of the ") + w.name + " block size " + std::to_string(w.block));
  }
  for (uint32_t id : {137u, 140u, 24u, 34u, 40u}) {
    expect_error(one_tensor({256}, id, 0, 1024).bytes,
                 "tensor 'w': unknown or unsupported tensor type " + std::to_string(id));
  }
  expect_error(one_tensor({256}, 137, 0, 1024).bytes, "type 137 = an ik_llama.cpp-only type such as IQ4_K");
  expect_error(one_tensor({256}, 34, 0, 1024).bytes, "type 34 = TQ1_0 (ternary)");
  Status s = open_status(one_tensor({256}, 137, 0, 1024).bytes);
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos) << "the error lists the supported types: " << s.message();
  EXPECT_NE(s.message().find("MXFP4"), std::string::npos) << s.message();
}

// check_data applies the reference validator's rules: finite half scales, no MXFP4
// exponent byte 255; index and sign bits are never checked.
TEST(GgufReader, CheckDataRejectsNonFiniteScalesAndMxfp4Exponent255) {
  auto open_checked = [](const GgufBuilder& b) {
    auto f = GgufFile::open(write_temp(b.bytes), {.check_data = true});
    return f ? Status::ok() : f.status();
  };
  auto with_block = [](uint32_t type, int64_t ne0, std::vector<uint8_t> data) {
    GgufBuilder b;
    b.header(3, 1, 0).tensor("blk.0.ffn_down_exps.weight", {static_cast<uint64_t>(ne0)}, type, 0).pad(32);
    b.bytes.insert(b.bytes.end(), data.begin(), data.end());
    return b;
  };
  // MXFP4: one block of 17 bytes, e first. e = 254 is fine, e = 255 is not.
  std::vector<uint8_t> mx(17, 0x77);
  mx[0] = 254;
  EXPECT_TRUE(open_checked(with_block(39, 32, mx)).is_ok());
  mx[0] = 255;
  Status s = open_checked(with_block(39, 32, mx));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("blk.0.ffn_down_exps.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("exponent byte 255"), std::string::npos) << s.message();
  EXPECT_TRUE(GgufFile::open(write_temp(with_block(39, 32, mx).bytes))) << "unchecked open reads no data";
  // IQ2_XXS: d is the first half; 0x7C00 = inf, 0x7E00 = NaN, 0x7BFF = 65504 (finite).
  std::vector<uint8_t> iq(66, 0xFF);
  iq[0] = 0xFF, iq[1] = 0x7B;
  EXPECT_TRUE(open_checked(with_block(16, 256, iq)).is_ok());
  iq[0] = 0x00, iq[1] = 0x7E;
  s = open_checked(with_block(16, 256, iq));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("block 0: d is"), std::string::npos) << s.message();
  // IQ1_M: the half is the top nibbles of the four u16 scale words (bytes 48..55):
  // 0x7C00 (inf) = nibbles 0, 0, C, 7 from word 0 to word 3.
  std::vector<uint8_t> m(56, 0);
  m[48 + 5] = 0xC0, m[48 + 7] = 0x70;
  s = open_checked(with_block(29, 256, m));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("IQ1_M"), std::string::npos) << s.message();
  m[48 + 7] = 0x30;  // 0x3C00 = 1.0
  EXPECT_TRUE(open_checked(with_block(29, 256, m)).is_ok());
}

TEST(GgufReader, RejectsOverlappingAndDuplicateTensors) {
  GgufBuilder b;
  b.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad(32).zeros(128);
  expect_error(b.bytes, "overlaps");
  GgufBuilder c;
  c.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad(32).zeros(128);
  expect_error(c.bytes, "duplicate tensor name 'a'");
}

TEST(GgufReader, RejectsNonFiles) {
  EXPECT_FALSE(GgufFile::open("/nonexistent/model.gguf"));
  EXPECT_FALSE(GgufFile::open(test::make_temp_dir("gguf-dir")));
  EXPECT_FALSE(open_status({}).is_ok());
}

TEST(GgufReader, OpensSplitModels) {
  const std::string dir = test::make_temp_dir("gguf-split");
  for (int i = 1; i <= 3; ++i) {
    GgufBuilder b;
    b.header(3, 1, i == 1 ? 3 : 1);
    b.str("split.count").put<uint32_t>(2).put<uint16_t>(3);
    if (i == 1) {
      b.str("split.tensors.count").put<uint32_t>(5).put<int32_t>(3);
      b.kv_str("general.architecture", "deepseek2");
    }
    b.tensor("t" + std::to_string(i), {8}, 0, 0).pad(32).zeros(32);
    test::write_file_bytes(gguf_split_path(dir + "/m", i, 3), b.bytes);
  }
  auto f = GgufFile::open(gguf_split_path(dir + "/m", 1, 3));
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ((*f)->shard_paths().size(), 3u);
  EXPECT_EQ((*f)->tensors().size(), 3u);
  EXPECT_EQ((*f)->tensor("t3")->shard, 2);
  EXPECT_EQ((*f)->architecture(), "deepseek2");

  auto second = GgufFile::open(gguf_split_path(dir + "/m", 2, 3));
  ASSERT_FALSE(second);
  EXPECT_NE(second.message().find("-00001-of-00003.gguf"), std::string::npos) << second.message();

  std::filesystem::remove(gguf_split_path(dir + "/m", 3, 3));
  auto missing = GgufFile::open(gguf_split_path(dir + "/m", 1, 3));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("m-00003-of-00003.gguf"), std::string::npos) << missing.message();
}

TEST(GgufReader, SplitNameParsing) {
  auto s = gguf_parse_split_name("/x/DeepSeek-V3-Q4_K_M-00001-of-00009.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->prefix, "/x/DeepSeek-V3-Q4_K_M");
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 9);
  EXPECT_FALSE(gguf_parse_split_name("model.gguf"));
  EXPECT_FALSE(gguf_parse_split_name("m-00010-of-00009.gguf"));
  EXPECT_EQ(gguf_split_path("a", 2, 9), "a-00002-of-00009.gguf");
}

TEST(GgufReader, OpensEverySharedFile) {
  const std::vector<std::pair<std::string, size_t>> files = {{"refdata/tiny-llama-Q4_K_M.gguf", 0},
                                                             {"refdata/tiny-qwen2-Q5_K_S.gguf", 0},
                                                             {"refdata/tiny-dsv2-Q4_K_M.gguf", 0},
                                                             {"refdata/tiny-dsv2-legacy-Q4_K_M.gguf", 0},
                                                             {"refdata/tiny-dsv3-Q4_K_M.gguf", 0},
                                                             {"refdata/tiny-dsv3-IQ-MIX.gguf", 0},
                                                             {"tokenizer/ggml-vocab-deepseek-coder.gguf", 32256},
                                                             {"tokenizer/ggml-vocab-deepseek-llm.gguf", 102400},
                                                             {"tokenizer/ggml-vocab-deepseek-v3.gguf", 129280},
                                                             {"tokenizer/ggml-vocab-qwen2.gguf", 152064}};
  for (const auto& [rel, n_vocab] : files) {
    auto f = GgufFile::open(test::shared_path(rel));
    ASSERT_TRUE(f) << rel << ": " << f.message();
    const GgufValue* toks = (*f)->find("tokenizer.ggml.tokens");
    ASSERT_NE(toks, nullptr) << rel;
    if (n_vocab) {
      EXPECT_EQ(toks->arr_str.size(), n_vocab) << rel;
    }
    if (rel.starts_with("refdata/")) {
      EXPECT_EQ(toks->arr_str.size(), 32256u);
      EXPECT_NE((*f)->tensor("token_embd.weight"), nullptr) << rel;
      EXPECT_NE((*f)->tensor("output_norm.weight"), nullptr) << rel;
    }
  }
}

}  // namespace
}  // namespace ds
