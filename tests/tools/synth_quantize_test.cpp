// ds-cli synth and ds-cli quantize, run as the user runs them (the built binary), with
// the results read back through GgufFile: expected tensors, types and keys; metadata
// preserved by quantize; values close to the originals; clean failures on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "ds/tokenizer.h"
#include "test_util.h"

namespace ds {
namespace {

std::string cli() {
  return test::binary_dir() + "/src/ds-cli";
}

// Runs a shell command; returns its exit code, or -1000 - signal when a signal killed it.
int run(const std::string& cmd) {
  const int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  if (WIFSIGNALED(st)) return -1000 - WTERMSIG(st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("tools"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::unique_ptr<GgufFile> open(const std::string& p) {
    auto f = GgufFile::open(p);
    EXPECT_TRUE(f.is_ok()) << f.message();
    return f.is_ok() ? std::move(f.value()) : nullptr;
  }
  std::unique_ptr<GgufFile> synth(const std::string& shape, const std::string& type, const std::string& extra = "") {
    const std::string out = path(shape + "-" + type + ".gguf");
    EXPECT_EQ(run(cli() + " synth --shape " + shape + " --type " + type + " --out " + out + " " + extra), 0);
    return open(out);
  }
  std::string dir_;
};

GgmlType type_of(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.tensor(name);
  EXPECT_NE(t, nullptr) << "missing tensor " << name;
  return t ? t->type : GgmlType::Q8_1;
}

int64_t key_int(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  EXPECT_TRUE(v.is_ok() && v->has_value()) << "missing key " << key;
  return v.is_ok() && v->has_value() ? **v : -1;
}

void expect_tokenizer(const GgufFile& f) {
  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(toks, nullptr);
  const int64_t n = static_cast<int64_t>(toks->arr_str.size());
  EXPECT_GT(n, 256 + 100);  // bytes + learned merges + specials
  EXPECT_EQ(f.tensor("token_embd.weight")->ne[1], n);
  EXPECT_EQ(key_int(f, f.architecture() + ".vocab_size"), n);
  EXPECT_EQ(f.get_string_or("tokenizer.ggml.model", "").value(), "gpt2");
  const int64_t bos = key_int(f, "tokenizer.ggml.bos_token_id");
  ASSERT_TRUE(bos >= 0 && bos < n);
  EXPECT_EQ(toks->arr_str[static_cast<size_t>(bos)],
            "<\xEF\xBD\x9C"
            "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  const auto tmpl = f.get_string_or("tokenizer.chat_template", "").value();
  EXPECT_NE(tmpl.find("<\xEF\xBD\x9CUser\xEF\xBD\x9C>"), std::string::npos);
  const GgufValue* merges = f.find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  std::set<std::string> vocab(toks->arr_str.begin(), toks->arr_str.end());
  for (const auto& m : merges->arr_str) {  // every merge's result is a token
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    EXPECT_TRUE(vocab.count(m.substr(0, sp) + m.substr(sp + 1))) << m;
  }
}

TEST_F(ToolsTest, SynthTinyLlama) {
  auto f = synth("tiny-llama", "Q4_K_M");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(key_int(*f, "llama.block_count"), 4);
  EXPECT_EQ(key_int(*f, "llama.attention.head_count_kv"), 2);
  EXPECT_EQ(key_int(*f, "general.file_type"), 15);
  EXPECT_EQ(f->get_string_or("llama.rope.scaling.type", "").value(), "linear");
  expect_tokenizer(*f);
  EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(*f, "token_embd.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(*f, "blk.0.attn_norm.weight"), GgmlType::F32);
  // use_more_bits over 4 layers: layers 2 and 3 (same as refdata tiny-llama-Q4_K_M)
  for (int il = 0; il < 4; ++il) {
    const GgmlType want = il >= 2 ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(type_of(*f, "blk." + std::to_string(il) + ".attn_v.weight"), want) << il;
    EXPECT_EQ(type_of(*f, "blk." + std::to_string(il) + ".ffn_down.weight"), want) << il;
  }
  EXPECT_EQ(f->tensor("blk.0.attn_k.weight")->ne[1], 128);  // 2 kv heads of 64
}

TEST_F(ToolsTest, SynthTinyQwen2) {
  auto f = synth("tiny-qwen2", "Q5_K_S");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->architecture(), "qwen2");
  expect_tokenizer(*f);
  EXPECT_EQ(type_of(*f, "blk.0.attn_q.bias"), GgmlType::F32);
  EXPECT_EQ(type_of(*f, "blk.2.attn_v.bias"), GgmlType::F32);
  EXPECT_EQ(type_of(*f, "blk.2.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(key_int(*f, "general.file_type"), 16);
}

TEST_F(ToolsTest, SynthTinyDsv2) {
  auto f = synth("tiny-dsv2", "Q4_K_M");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->architecture(), "deepseek2");
  expect_tokenizer(*f);
  EXPECT_FALSE(f->has("deepseek2.attention.q_lora_rank"));
  EXPECT_NE(f->tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.0.attn_q_a.weight"), nullptr);
  EXPECT_EQ(key_int(*f, "deepseek2.attention.head_count_kv"), 1);
  EXPECT_EQ(key_int(*f, "deepseek2.attention.key_length"), 256 + 32);
  EXPECT_EQ(key_int(*f, "deepseek2.attention.value_length"), 256);
  EXPECT_EQ(key_int(*f, "deepseek2.expert_gating_func"), 1);
  EXPECT_NE(f->tensor("blk.0.ffn_gate.weight"), nullptr);  // 1 dense lead layer
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.1.exp_probs_b.bias"), nullptr);  // softmax: no bias
  const GgufTensorInfo* kb = f->tensor("blk.1.attn_k_b.weight");
  ASSERT_NE(kb, nullptr);
  EXPECT_EQ(kb->ne[0], 64);
  EXPECT_EQ(kb->ne[1], 256);
  EXPECT_EQ(kb->ne[2], 4);
  // The refdata tiny-dsv2-Q4_K_M mixture: Q5_0 k_b (rows of 64), Q5_K attn_output (8
  // experts), Q6_K ffn_down* in layer 2, F32 router.
  EXPECT_EQ(kb->type, GgmlType::Q5_0);
  EXPECT_EQ(type_of(*f, "blk.1.attn_output.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(*f, "blk.1.ffn_down_exps.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(*f, "blk.2.ffn_down_exps.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(*f, "blk.2.ffn_down_shexp.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(*f, "blk.2.ffn_gate_inp.weight"), GgmlType::F32);
  EXPECT_EQ(f->tensor("blk.1.ffn_gate_shexp.weight")->ne[1], 512);  // 2 shared x 256
}

TEST_F(ToolsTest, SynthTinyDsv3) {
  auto f = synth("tiny-dsv3", "Q4_K_M");
  ASSERT_TRUE(f);
  expect_tokenizer(*f);
  EXPECT_EQ(key_int(*f, "deepseek2.attention.q_lora_rank"), 256);
  EXPECT_EQ(key_int(*f, "deepseek2.expert_gating_func"), 2);
  EXPECT_EQ(f->get_string_or("deepseek2.rope.scaling.type", "").value(), "yarn");
  EXPECT_EQ(f->get_float_or("deepseek2.expert_weights_scale", 0).value(), 2.5);
  EXPECT_NE(f->tensor("blk.0.attn_q_a.weight"), nullptr);
  EXPECT_EQ(type_of(*f, "blk.0.attn_q_a_norm.weight"), GgmlType::F32);
  EXPECT_EQ(type_of(*f, "blk.3.exp_probs_b.bias"), GgmlType::F32);
  EXPECT_EQ(f->tensor("blk.3.ffn_up_exps.weight")->ne[2], 16);
  EXPECT_EQ(type_of(*f, "blk.1.attn_output.weight"), GgmlType::Q4_K);  // 16 experts: no bump
}

// The deepseek4 shapes at a width that synthesizes in a moment: n_layer blocks, n_head heads.
std::string v4_small(int n_layer, int n_head) {
  return "--layers " + std::to_string(n_layer) +
         " --set embedding_length=256 --set attention.head_count=" + std::to_string(n_head) +
         " --set attention.q_lora_rank=256 --set attention.output_lora_rank=128 --set attention.key_length=128 "
         "--set attention.value_length=128 --set expert_count=16 --set expert_feed_forward_length=256 "
         "--set attention.indexer.head_count=8";
}

// v4 (V4-Pro) at reduced width: its own lead ratio (blocks 0-1 at 128), x2.5 routing scale,
// 16 output groups and top-1024 indexer kept, and the file passes the deepseek4 loader.
TEST_F(ToolsTest, SynthV4ShapeHasProDimensions) {
  auto f = synth("v4", "Q8_0", v4_small(5, 16));
  ASSERT_TRUE(f);
  const GgufValue* ratios = f->find("deepseek4.attention.compress_ratios");
  ASSERT_NE(ratios, nullptr);
  EXPECT_EQ(ratios->arr_int, (std::vector<int64_t>{128, 128, 4, 128, 4}));
  EXPECT_EQ(key_int(*f, "deepseek4.attention.output_group_count"), 16);
  EXPECT_EQ(key_int(*f, "deepseek4.attention.indexer.top_k"), 1024);
  EXPECT_EQ(key_int(*f, "deepseek4.expert_used_count"), 6);
  const GgufValue* scale = f->find("deepseek4.expert_weights_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_FLOAT_EQ(static_cast<float>(scale->f), 2.5f);
  EXPECT_NE(f->tensor("blk.0.attn_compressor_ape.weight"), nullptr);  // ratio 128 from block 0
  EXPECT_EQ(f->tensor("blk.0.indexer.attn_q_b.weight"), nullptr);
  EXPECT_NE(f->tensor("blk.2.indexer.attn_q_b.weight"), nullptr);
  auto m = Model::load(f->path());
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_EQ((*m)->hp().n_layer, 5);
}

// v4-flash at reduced width: the per-block arrays follow --layers, the hash blocks get an
// I32 table of valid expert ids, and the file passes the deepseek4 loader.
TEST_F(ToolsTest, SynthV4FlashFollowsLayers) {
  auto f = synth("v4-flash", "Q8_0", v4_small(5, 8));
  ASSERT_TRUE(f);
  const GgufValue* ratios = f->find("deepseek4.attention.compress_ratios");
  ASSERT_NE(ratios, nullptr);
  EXPECT_EQ(ratios->arr_int, (std::vector<int64_t>{0, 0, 4, 128, 4}));
  EXPECT_EQ(f->find("deepseek4.swiglu_clamp_exp")->array_size(), 5u);
  EXPECT_EQ(key_int(*f, "deepseek4.embedding_length_out"), 1024);
  const GgufTensorInfo* ids = f->tensor("blk.2.ffn_gate_tid2eid.weight");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->type, GgmlType::I32);
  const auto* p = reinterpret_cast<const int32_t*>(ids->data);
  for (int64_t i = 0; i < ids->n_elements(); ++i) ASSERT_TRUE(p[i] >= 0 && p[i] < 16) << i;
  EXPECT_EQ(f->tensor("blk.3.exp_probs_b.bias")->type, GgmlType::F32);
  EXPECT_NE(f->tensor("blk.2.indexer.attn_q_b.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.3.indexer.attn_q_b.weight"), nullptr);  // ratio 128: no indexer
  EXPECT_EQ(f->tensor("blk.3.attn_compressor_ape.weight")->ne[1], 128);
  auto m = Model::load(f->path());
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_EQ((*m)->hp().n_layer, 5);
  EXPECT_EQ((*m)->hp().n_hash_layer, 3);

  // An F32 file quantizes to MXFP4_MOE (experts MXFP4, the I32 hash tables copied) and loads.
  auto f32 = synth("v4-flash", "F32", v4_small(4, 8));
  ASSERT_TRUE(f32);
  const std::string q = path("v4q.gguf");
  ASSERT_EQ(run(cli() + " quantize " + f32->path() + " " + q + " MXFP4_MOE"), 0);
  auto fq = open(q);
  ASSERT_TRUE(fq);
  EXPECT_EQ(type_of(*fq, "blk.1.ffn_up_exps.weight"), GgmlType::MXFP4);
  const GgufTensorInfo* qi = fq->tensor("blk.1.ffn_gate_tid2eid.weight");
  ASSERT_NE(qi, nullptr);
  EXPECT_EQ(qi->type, GgmlType::I32);
  EXPECT_EQ(std::memcmp(qi->data, f32->tensor("blk.1.ffn_gate_tid2eid.weight")->data, qi->nbytes), 0);
  auto mq = Model::load(q);
  EXPECT_TRUE(mq.is_ok()) << mq.message();
}

// The v3.2 shape (deepseek32) with its dimensions shrunk by --set: the indexer keys and
// tensors in every block, an MTP block after the trunk when nextn_predict_layers asks for
// one, and a file the loader takes (the trunk without the MTP block).
TEST_F(ToolsTest, SynthDeepseek32WithMtpBlock) {
  auto f = synth("v3.2", "Q8_0",
                 "--layers 3 --set embedding_length=256 --set attention.head_count=4 --set attention.q_lora_rank=128 "
                 "--set attention.kv_lora_rank=128 --set feed_forward_length=256 --set expert_feed_forward_length=128 "
                 "--set expert_count=16 --set leading_dense_block_count=1 --set nextn_predict_layers=1 "
                 "--set attention.indexer.head_count=8");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->architecture(), "deepseek32");
  EXPECT_EQ(key_int(*f, "deepseek32.block_count"), 3);
  EXPECT_EQ(key_int(*f, "deepseek32.nextn_predict_layers"), 1);
  EXPECT_EQ(key_int(*f, "deepseek32.attention.indexer.head_count"), 8);
  EXPECT_EQ(key_int(*f, "deepseek32.attention.indexer.key_length"), 128);
  EXPECT_EQ(key_int(*f, "deepseek32.attention.indexer.top_k"), 2048);
  EXPECT_EQ(key_int(*f, "deepseek32.expert_group_count"), 8);
  EXPECT_EQ(key_int(*f, "deepseek32.attention.key_length_mla"), 192);
  EXPECT_EQ(key_int(*f, "deepseek32.attention.head_count_kv"), 1);
  for (int il = 0; il < 3; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    EXPECT_EQ(f->tensor(b + "indexer.attn_q_b.weight")->ne[1], 8 * 128) << il;
    EXPECT_EQ(f->tensor(b + "indexer.attn_k.weight")->ne[1], 128) << il;
    EXPECT_EQ(type_of(*f, b + "indexer.k_norm.bias"), GgmlType::F32) << il;
    EXPECT_EQ(f->tensor(b + "indexer.proj.weight")->ne[1], 8) << il;
  }
  EXPECT_EQ(f->tensor("blk.1.nextn.eh_proj.weight"), nullptr);
  ASSERT_NE(f->tensor("blk.2.nextn.eh_proj.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.2.nextn.eh_proj.weight")->ne[0], 512);
  auto r = test::run_command(cli() + " inspect " + path("v3.2-Q8_0.gguf") + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("deepseek32.attention.indexer.top_k"), std::string::npos) << r.out;
  r = test::run_command(cli() + " generate --model " + path("v3.2-Q8_0.gguf") + " -n 2 --prompt hi 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(ToolsTest, SynthOverridesLayersVocabAndSeed) {
  auto f = synth("tiny-dsv3", "F16", "--layers 2 --set expert_count=32 --set deepseek2.attention.q_lora_rank=128");
  ASSERT_TRUE(f);
  EXPECT_EQ(key_int(*f, "deepseek2.block_count"), 2);
  EXPECT_EQ(key_int(*f, "deepseek2.expert_count"), 32);
  EXPECT_EQ(f->tensor("blk.1.ffn_gate_exps.weight")->ne[2], 32);
  EXPECT_EQ(f->tensor("blk.1.attn_q_a.weight")->ne[1], 128);
  EXPECT_EQ(f->tensor("blk.2.attn_norm.weight"), nullptr);
  EXPECT_EQ(type_of(*f, "blk.1.ffn_gate_exps.weight"), GgmlType::F16);
  EXPECT_EQ(key_int(*f, "general.file_type"), 1);

  // --vocab copies every tokenizer key of the given file
  const std::string vocab = test::shared_path("tokenizer/ggml-vocab-deepseek-coder.gguf");
  auto v = synth("tiny-qwen2", "Q8_0", "--layers 1 --vocab " + vocab);
  ASSERT_TRUE(v);
  auto src = open(vocab);
  ASSERT_TRUE(src);
  for (const auto& [key, value] : src->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* got = v->find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_TRUE(gguf_value_equal(*got, value)) << key;
  }
  EXPECT_EQ(v->tensor("token_embd.weight")->ne[1], 32256);

  // same seed -> same bytes; another seed -> other weights
  const std::string a = path("a.gguf"), b = path("b.gguf"), c = path("c.gguf");
  ASSERT_EQ(run(cli() + " synth --shape tiny-llama --type Q4_0 --seed 7 --out " + a), 0);
  ASSERT_EQ(run(cli() + " synth --shape tiny-llama --type Q4_0 --seed 7 --threads 1 --out " + b), 0);
  ASSERT_EQ(run(cli() + " synth --shape tiny-llama --type Q4_0 --seed 8 --out " + c), 0);
  EXPECT_EQ(test::read_file_bytes(a), test::read_file_bytes(b));
  EXPECT_NE(test::read_file_bytes(a), test::read_file_bytes(c));
}

TEST_F(ToolsTest, SynthBadArgumentsFailCleanly) {
  const std::string out = path("bad.gguf");
  EXPECT_EQ(run(cli() + " synth --shape nope --out " + out), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama"), 2);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --type Q9"), 2);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --layers 0"), 2);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --set novalue"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --set block_count=abc"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --set attention.head_count=3"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-dsv3 --out " + out + " --set expert_count=0"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-dsv3 --out " + out + " --set embedding_length=0"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --vocab /nonexistent.gguf"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out " + out + " --set general.alignment=48"), 1);
  EXPECT_EQ(run(cli() + " synth --shape tiny-llama --out /nonexistent-dir/x.gguf"), 1);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Dequantizes a whole tensor.
std::vector<float> values(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t.type, t.data + static_cast<size_t>(r) * t.row_bytes(), v.data() + r * t.ne[0], t.ne[0]);
  }
  return v;
}

TEST_F(ToolsTest, QuantizeKeepsMetadataAndPicksTypes) {
  for (const char* in_type : {"F32", "F16"}) {
    auto in = synth("tiny-dsv2", in_type);
    ASSERT_TRUE(in);
    const std::string in_path = path(std::string("tiny-dsv2-") + in_type + ".gguf");
    struct Case {
      const char* mix;
      int file_type;
      GgmlType base, output, k_b;
      double max_rmse;  // relative RMSE of the big matrices (test_quantize: Q4_0 ~0.086,
                        // Q3_K ~0.15, Q2_K ~0.28)
    };
    for (const Case c : {Case{"Q4_K_M", 15, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0, 0.1},
                         Case{"Q5_K_S", 16, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_1, 0.1},
                         Case{"Q3_K_M", 12, GgmlType::Q3_K, GgmlType::Q6_K, GgmlType::Q4_0, 0.2},
                         Case{"Q2_K", 10, GgmlType::Q2_K, GgmlType::Q6_K, GgmlType::Q4_0, 0.32},
                         Case{"Q8_0", 7, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 0.1},
                         Case{"Q4_0", 2, GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::Q4_0, 0.1}}) {
      const std::string out = path(std::string("q-") + c.mix + ".gguf");
      ASSERT_EQ(run(cli() + " quantize " + in_path + " " + out + " " + c.mix), 0) << c.mix;
      auto q = open(out);
      ASSERT_TRUE(q);
      ASSERT_EQ(q->metadata().size(), in->metadata().size());
      for (size_t k = 0; k < in->metadata().size(); ++k) {
        const auto& [key, value] = in->metadata()[k];
        EXPECT_EQ(q->metadata()[k].first, key);
        if (key == "general.file_type") {
          EXPECT_EQ(q->metadata()[k].second.u, static_cast<uint64_t>(c.file_type)) << c.mix;
        } else {
          EXPECT_TRUE(gguf_value_equal(q->metadata()[k].second, value)) << c.mix << " " << key;
        }
      }
      ASSERT_EQ(q->tensors().size(), in->tensors().size());
      EXPECT_EQ(type_of(*q, "token_embd.weight"), c.base) << c.mix;
      EXPECT_EQ(type_of(*q, "output.weight"), c.output) << c.mix;
      EXPECT_EQ(type_of(*q, "blk.1.attn_k_b.weight"), c.k_b) << c.mix;
      EXPECT_EQ(type_of(*q, "blk.1.ffn_gate_inp.weight"), GgmlType::F32) << c.mix;
      EXPECT_EQ(type_of(*q, "blk.1.attn_norm.weight"), GgmlType::F32) << c.mix;
      // Values survive: relative RMSE of the biggest matrices within the format's range.
      for (const char* name : {"blk.1.ffn_up_exps.weight", "output.weight", "blk.1.attn_k_b.weight"}) {
        const auto a = values(*in->tensor(name)), b = values(*q->tensor(name));
        double se = 0, ss = 0;
        for (size_t i = 0; i < a.size(); ++i) se += (a[i] - b[i]) * (a[i] - b[i]), ss += a[i] * a[i];
        EXPECT_LT(std::sqrt(se / ss), c.max_rmse) << c.mix << " " << name;
      }
    }
  }
}

// IQ4_NL, IQ4_XS and MXFP4_MOE from an F16 model: the mixtures' types (quantize_mix.h),
// file types, values within each format's error (test_quantize: IQ4_NL 0.077, IQ4_XS
// 0.077, MXFP4 0.115 relative RMSE on Gaussian data), and files that pass block validation.
TEST_F(ToolsTest, QuantizeToIQuantsAndMxfp4) {
  auto in = synth("tiny-dsv2", "F16", "--layers 2");
  ASSERT_TRUE(in);
  const std::string in_path = path("tiny-dsv2-F16.gguf");
  struct Case {
    const char* mix;
    int file_type;
    GgmlType experts, token_embd, output, k_b, dense;
    double max_rmse;
  };
  for (const Case c :
       {Case{"IQ4_NL", 25, GgmlType::IQ4_NL, GgmlType::IQ4_NL, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_NL, 0.1},
        Case{"IQ4_XS", 30, GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, 0.1},
        Case{"MXFP4", 38, GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::Q8_0, 0.14}}) {
    const std::string out = path(std::string("q-") + c.mix + ".gguf");
    ASSERT_EQ(run(cli() + " quantize " + in_path + " " + out + " " + c.mix + " --threads 2"), 0) << c.mix;
    auto f = GgufFile::open(out, {.check_data = true});
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufFile& q = **f;
    EXPECT_EQ(key_int(q, "general.file_type"), c.file_type) << c.mix;
    EXPECT_EQ(type_of(q, "blk.1.ffn_up_exps.weight"), c.experts) << c.mix;
    EXPECT_EQ(type_of(q, "token_embd.weight"), c.token_embd) << c.mix;
    EXPECT_EQ(type_of(q, "output.weight"), c.output) << c.mix;
    EXPECT_EQ(type_of(q, "blk.1.attn_k_b.weight"), c.k_b) << c.mix;  // rows of 64: IQ4_XS falls back
    EXPECT_EQ(type_of(q, "blk.0.ffn_down.weight"), c.dense) << c.mix;
    EXPECT_EQ(type_of(q, "blk.1.ffn_gate_inp.weight"), GgmlType::F32) << c.mix;
    for (const char* name : {"blk.1.ffn_up_exps.weight", "blk.0.ffn_down.weight", "blk.1.attn_k_b.weight"}) {
      const auto a = values(*in->tensor(name)), b = values(*q.tensor(name));
      double se = 0, ss = 0;
      for (size_t i = 0; i < a.size(); ++i) se += (a[i] - b[i]) * (a[i] - b[i]), ss += a[i] * a[i];
      EXPECT_LT(std::sqrt(se / ss), c.max_rmse) << c.mix << " " << name;
    }
  }
  // --tensor-type overrides the mixture (first match wins); a grid i-quant is readable but
  // not quantizable, as a mixture or as an override: exit 2 or 1 and no OUT.
  const std::string ov = path("q-override.gguf");
  ASSERT_EQ(
      run(cli() + " quantize " + in_path + " " + ov +
          " Q4_K_M --tensor-type ffn_down_exps=MXFP4 --tensor-type ffn_down=IQ4_XS --tensor-type attn_k_b=IQ4_XS"),
      0);
  auto o = open(ov);
  ASSERT_TRUE(o);
  EXPECT_EQ(type_of(*o, "blk.1.ffn_down_exps.weight"), GgmlType::MXFP4);
  EXPECT_EQ(type_of(*o, "blk.1.ffn_down_shexp.weight"), GgmlType::IQ4_XS);
  EXPECT_EQ(type_of(*o, "blk.0.ffn_down.weight"), GgmlType::IQ4_XS);
  EXPECT_EQ(type_of(*o, "blk.1.attn_k_b.weight"), GgmlType::IQ4_NL);  // 64-wide rows
  EXPECT_EQ(type_of(*o, "blk.1.ffn_up_exps.weight"), GgmlType::Q4_K);
  const std::string bad = path("q-bad.gguf");
  EXPECT_EQ(run(cli() + " quantize " + in_path + " " + bad + " IQ2_XXS"), 2);
  EXPECT_EQ(run(cli() + " quantize " + in_path + " " + bad + " Q4_K_M --tensor-type ffn_up=IQ1_S"), 1);
  EXPECT_EQ(run(cli() + " quantize " + in_path + " " + bad + " Q4_K_M --tensor-type ffn_up"), 2);
  EXPECT_EQ(run(cli() + " quantize " + in_path + " " + bad + " Q4_K_M --tensor-type ffn_up=Q9_K"), 2);
  EXPECT_FALSE(std::filesystem::exists(bad));
}

// ds-cli synth --type T for every i-quant mixture: the experts get T (random valid blocks
// for the grid types, quantized N(0, 0.02) weights otherwise) with the RMS of the weights
// they stand for; the files pass block validation; --tensor-type overrides per tensor.
TEST_F(ToolsTest, SynthEveryIquantType) {
  struct Case {
    const char* mix;
    GgmlType experts, token_embd, output, attn_output;
  };
  for (const Case c : {Case{"IQ1_S", GgmlType::IQ1_S, GgmlType::Q2_K, GgmlType::Q5_K, GgmlType::IQ2_XXS},
                       Case{"IQ1_M", GgmlType::IQ1_M, GgmlType::Q2_K, GgmlType::Q5_K, GgmlType::IQ2_XXS},
                       Case{"IQ2_XXS", GgmlType::IQ2_XXS, GgmlType::Q2_K, GgmlType::Q5_K, GgmlType::IQ2_XXS},
                       Case{"IQ2_XS", GgmlType::IQ2_XS, GgmlType::Q2_K, GgmlType::Q5_K, GgmlType::IQ2_XS},
                       Case{"IQ2_S", GgmlType::IQ2_S, GgmlType::IQ3_S, GgmlType::Q5_K, GgmlType::IQ3_S},
                       Case{"IQ3_XXS", GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::Q5_K, GgmlType::IQ3_S},
                       Case{"IQ3_S", GgmlType::IQ3_S, GgmlType::IQ3_S, GgmlType::Q6_K, GgmlType::IQ3_S},
                       Case{"IQ4_NL", GgmlType::IQ4_NL, GgmlType::IQ4_NL, GgmlType::Q6_K, GgmlType::IQ4_NL},
                       Case{"IQ4_XS", GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::IQ4_XS},
                       Case{"MXFP4", GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0}}) {
    const std::string out = path(std::string("s-") + c.mix + ".gguf");
    ASSERT_EQ(run(cli() + " synth --shape tiny-dsv3 --layers 2 --type " + c.mix + " --out " + out), 0) << c.mix;
    auto f = GgufFile::open(out, {.check_data = true});
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufFile& q = **f;
    EXPECT_EQ(type_of(q, "blk.1.ffn_down_exps.weight"), c.experts) << c.mix;
    EXPECT_EQ(type_of(q, "token_embd.weight"), c.token_embd) << c.mix;
    EXPECT_EQ(type_of(q, "output.weight"), c.output) << c.mix;
    EXPECT_EQ(type_of(q, "blk.1.attn_output.weight"), c.attn_output) << c.mix;  // 16 experts
    // The weights' scale: RMS 0.02 (N(0, 0.02)); random grid blocks are scaled per block to it.
    const auto v = values(*q.tensor("blk.1.ffn_down_exps.weight"));
    double ss = 0;
    for (float x : v) ss += static_cast<double>(x) * x;
    const double rms = std::sqrt(ss / static_cast<double>(v.size()));
    EXPECT_GT(rms, 0.016) << c.mix;
    EXPECT_LT(rms, 0.024) << c.mix;
  }
  const std::string ov = path("s-override.gguf");
  ASSERT_EQ(run(cli() + " synth --shape tiny-dsv3 --layers 2 --type Q4_K_M --tensor-type ffn_down_exps=IQ2_XXS" +
                " --tensor-type ffn_=IQ1_M --tensor-type attn_k_b=IQ3_S --out " + ov),
            0);
  auto o = open(ov);
  ASSERT_TRUE(o);
  EXPECT_EQ(type_of(*o, "blk.1.ffn_down_exps.weight"), GgmlType::IQ2_XXS);
  EXPECT_EQ(type_of(*o, "blk.1.ffn_gate_exps.weight"), GgmlType::IQ1_M);
  EXPECT_EQ(type_of(*o, "blk.0.ffn_up.weight"), GgmlType::IQ1_M);
  EXPECT_EQ(type_of(*o, "blk.1.ffn_gate_inp.weight"), GgmlType::F32);  // the router stays F32
  EXPECT_EQ(type_of(*o, "blk.1.attn_k_b.weight"), GgmlType::IQ4_NL);   // 64-wide rows fall back
  EXPECT_EQ(type_of(*o, "blk.1.attn_q_a.weight"), GgmlType::Q4_K);
  // Random blocks depend on the seed only, not on the thread count.
  const std::string a = path("r1.gguf"), b = path("r2.gguf"), c = path("r3.gguf");
  ASSERT_EQ(run(cli() + " synth --shape tiny-dsv3 --layers 2 --type IQ2_XS --seed 3 --threads 1 --out " + a), 0);
  ASSERT_EQ(run(cli() + " synth --shape tiny-dsv3 --layers 2 --type IQ2_XS --seed 3 --threads 2 --out " + b), 0);
  ASSERT_EQ(run(cli() + " synth --shape tiny-dsv3 --layers 2 --type IQ2_XS --seed 4 --out " + c), 0);
  EXPECT_EQ(test::read_file_bytes(a), test::read_file_bytes(b));
  EXPECT_NE(test::read_file_bytes(a), test::read_file_bytes(c));
  EXPECT_EQ(run(cli() + " synth --shape tiny-dsv3 --out " + path("x.gguf") + " --tensor-type =IQ1_S"), 2);
  EXPECT_EQ(run(cli() + " synth --shape tiny-dsv3 --out " + path("x.gguf") + " --tensor-type ffn=IQ4_K"), 2);
}

TEST_F(ToolsTest, QuantizeFromBF16) {
  auto in = synth("tiny-llama", "BF16", "--layers 2");
  ASSERT_TRUE(in);
  EXPECT_EQ(type_of(*in, "blk.0.attn_q.weight"), GgmlType::BF16);
  const std::string out = path("from-bf16.gguf");
  ASSERT_EQ(run(cli() + " quantize " + path("tiny-llama-BF16.gguf") + " " + out + " q4_k_m --threads 1"), 0);
  auto q = open(out);
  ASSERT_TRUE(q);
  EXPECT_EQ(type_of(*q, "blk.0.attn_q.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(*q, "blk.1.attn_v.weight"), GgmlType::Q6_K);  // 2 layers: 7*2/8 = 1 -> more bits
  EXPECT_EQ(type_of(*q, "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(key_int(*q, "general.file_type"), 15);
}

// A split F32 model (two shards written with GgufWriter) quantizes into one file that
// holds every tensor and no split.* keys.
TEST_F(ToolsTest, QuantizeSplitInputToOneFile) {
  auto in = synth("tiny-qwen2", "F32", "--layers 1");
  ASSERT_TRUE(in);
  const auto& tensors = in->tensors();
  const size_t half = tensors.size() / 2;
  for (int shard = 0; shard < 2; ++shard) {
    GgufWriter w;
    if (shard == 0) {
      for (const auto& [key, value] : in->metadata()) w.set(key, value);
    }
    GgufValue no;
    no.type = GgufValueType::kUint16;
    no.u = no.i = shard;
    w.set("split.no", no);
    GgufValue count = no;
    count.u = count.i = 2;
    w.set("split.count", count);
    w.set("split.tensors.count", gguf_i32(static_cast<int32_t>(tensors.size())));
    const size_t a = shard == 0 ? 0 : half, b = shard == 0 ? half : tensors.size();
    for (size_t k = a; k < b; ++k) {
      ASSERT_TRUE(w.add_tensor(tensors[k].name, tensors[k].type,
                               std::vector<int64_t>(tensors[k].ne, tensors[k].ne + tensors[k].n_dims))
                      .is_ok());
    }
    ASSERT_TRUE(w.begin(path("split-0000" + std::to_string(shard + 1) + "-of-00002.gguf")).is_ok());
    for (size_t k = a; k < b; ++k) ASSERT_TRUE(w.write_data(tensors[k].data, tensors[k].nbytes).is_ok());
    ASSERT_TRUE(w.finish().is_ok());
  }
  const std::string out = path("joined.gguf");
  ASSERT_EQ(run(cli() + " quantize " + path("split-00001-of-00002.gguf") + " " + out + " Q8_0"), 0);
  auto q = open(out);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->tensors().size(), tensors.size());
  EXPECT_EQ(q->shard_paths().size(), 1u);
  EXPECT_FALSE(q->has("split.count"));
  EXPECT_EQ(type_of(*q, tensors.back().name), GgmlType::Q8_0);  // a tensor from shard 2
}

TEST_F(ToolsTest, QuantizeRejectsBadInputWithoutCrashing) {
  const std::string out = path("out.gguf");
  // already quantized
  EXPECT_EQ(run(cli() + " quantize " + test::shared_path("refdata/tiny-llama-Q4_K_M.gguf") + " " + out + " Q8_0"), 1);
  // missing, empty, garbage, truncated
  EXPECT_EQ(run(cli() + " quantize " + path("missing.gguf") + " " + out + " Q4_K_M"), 1);
  test::write_file_bytes(path("empty.gguf"), {});
  EXPECT_EQ(run(cli() + " quantize " + path("empty.gguf") + " " + out + " Q4_K_M"), 1);
  test::write_file_bytes(path("junk.gguf"), std::vector<uint8_t>(1000, 0xAB));
  EXPECT_EQ(run(cli() + " quantize " + path("junk.gguf") + " " + out + " Q4_K_M"), 1);
  ASSERT_EQ(run(cli() + " synth --shape tiny-qwen2 --type F32 --layers 1 --out " + path("f32.gguf")), 0);
  auto bytes = test::read_file_bytes(path("f32.gguf"));
  for (size_t cut : {size_t{20}, bytes.size() / 3, bytes.size() - 7}) {
    test::write_file_bytes(path("cut.gguf"),
                           std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    EXPECT_EQ(run(cli() + " quantize " + path("cut.gguf") + " " + out + " Q4_K_M"), 1) << cut;
  }
  // NaN weights: patch the first float of the last tensor (an F32 matrix) to NaN
  auto f = open(path("f32.gguf"));
  ASSERT_TRUE(f);
  const GgufTensorInfo& last = f->tensors().back();
  ASSERT_EQ(last.type, GgmlType::F32);
  // find the tensor's bytes in the file by content (64 random-looking bytes are unique)
  auto it = std::search(bytes.begin(), bytes.end(), last.data, last.data + 64);
  ASSERT_NE(it, bytes.end());
  const size_t off = static_cast<size_t>(it - bytes.begin());
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + off, &nan, 4);
  test::write_file_bytes(path("nan.gguf"), bytes);
  EXPECT_EQ(run(cli() + " quantize " + path("nan.gguf") + " " + out + " Q4_K_M"), 1);
  // usage errors
  EXPECT_EQ(run(cli() + " quantize " + path("f32.gguf") + " " + out + " Q3_K_XL"), 2);
  EXPECT_EQ(run(cli() + " quantize " + path("f32.gguf") + " " + out), 2);
  EXPECT_EQ(run(cli() + " quantize " + path("f32.gguf") + " " + path("f32.gguf") + " Q8_0"), 2);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Runs a command and returns its stdout.
std::string capture(const std::string& cmd) {
  return test::run_command(cmd + " 2>/dev/null").out;
}

double field(const std::string& text, const std::string& name) {
  const size_t at = text.find(name + ": ");
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
}

// The real-dimension shapes match the published models: total parameter counts (no MTP
// layer) and, for V3 at Q4_K_M, the ~377 GiB of ../shared/SPEC.md. Dry runs write nothing.
TEST_F(ToolsTest, RealShapesHaveThePublishedSizes) {
  struct Want {
    const char* shape;
    double params_lo, params_hi;
  };
  for (const Want w :
       {Want{"v3", 670e9, 672e9}, Want{"v2-lite", 15.6e9, 15.8e9}, Want{"r1-distill-llama-8b", 8.00e9, 8.06e9},
        Want{"r1-distill-qwen-1.5b", 1.76e9, 1.79e9}, Want{"moe-bench", 3.3e9, 3.5e9},
        Want{"deepseek-moe-16b", 16.3e9, 16.45e9}, Want{"r1-0528-qwen3-8b", 8.18e9, 8.2e9}}) {
    const std::string out = capture(cli() + " synth --dry-run --shape " + w.shape + " --out " + path("dry.gguf"));
    const double params = field(out, "parameters");
    EXPECT_GE(params, w.params_lo) << w.shape << "\n" << out;
    EXPECT_LE(params, w.params_hi) << w.shape;
    if (std::string(w.shape) == "v3") {
      const double gib = field(out, "file size") / (1024.0 * 1024 * 1024);
      EXPECT_NEAR(gib, 377.0, 2.0);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path("dry.gguf")));
}

// The self-made vocabulary works with the project's tokenizer: text round-trips, merges
// compress ordinary English, special tokens are single ids.
TEST_F(ToolsTest, SynthVocabularyTokenizes) {
  auto f = synth("tiny-llama", "Q8_0", "--layers 1");
  ASSERT_TRUE(f);
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  const std::string text = "The server answers requests quickly, and the model runs 42 layers.\n";
  auto ids = (*tok)->encode(text, true);
  ASSERT_TRUE(ids.is_ok()) << ids.message();
  EXPECT_EQ((*ids)[0], key_int(*f, "tokenizer.ggml.bos_token_id"));
  EXPECT_LT(ids->size(), text.size() / 2) << "merges should compress English text";
  auto back = (*tok)->decode(std::span<const int32_t>(ids->data() + 1, ids->size() - 1));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, text);
  auto chat = (*tok)->encode(
      "<\xEF\xBD\x9CUser\xEF\xBD\x9C>hi<\xEF\xBD\x9C"
      "Assistant\xEF\xBD\x9C>",
      false);
  ASSERT_TRUE(chat.is_ok());
  EXPECT_EQ((*chat)[0], static_cast<int32_t>(f->find("tokenizer.ggml.tokens")->arr_str.size()) - 4);
}

// Synth models run: the engine loads every tiny shape and computes finite logits of a
// sensible size (random weights with N(0, 0.02) and unit norms keep activations bounded).
TEST_F(ToolsTest, SynthModelsRunStably) {
  const std::string tokens = path("tokens.json");
  {
    std::ofstream j(tokens);
    j << "{\"tokens\": [1, 17, 300, 42, 99, 5, 250, 7, 8, 400, 12, 13]}";
  }
  for (auto [shape, mix] :
       {std::pair{"tiny-llama", "Q4_K_M"}, std::pair{"tiny-qwen2", "Q4_K_M"}, std::pair{"tiny-dsv2", "Q4_K_M"},
        std::pair{"tiny-dsv3", "Q4_K_M"}, std::pair{"tiny-dsv3", "Q3_K_M"}, std::pair{"tiny-dsv3", "Q2_K"},
        std::pair{"tiny-dsv3", "IQ1_S"}, std::pair{"tiny-dsv3", "IQ2_S"}, std::pair{"tiny-dsv3", "IQ4_XS"},
        std::pair{"tiny-dsv3", "MXFP4"}}) {
    auto f = synth(shape, mix);
    ASSERT_TRUE(f);
    const std::string model = path(std::string(shape) + "-" + mix + ".gguf");
    const std::string logits = path("logits.f32");
    ASSERT_EQ(
        run(cli() + " eval --threads 2 --model " + model + " --tokens-json " + tokens + " --logits-out " + logits), 0)
        << shape;
    const auto bytes = test::read_file_bytes(logits);
    const int64_t n_vocab = static_cast<int64_t>(f->find("tokenizer.ggml.tokens")->arr_str.size());
    ASSERT_EQ(bytes.size(), 12u * static_cast<size_t>(n_vocab) * sizeof(float)) << shape;
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    double sum = 0.0, sum_sq = 0.0, amax = 0.0;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x)) << shape;
      sum += x;
      sum_sq += static_cast<double>(x) * x;
      amax = std::max(amax, static_cast<double>(std::fabs(x)));
    }
    const double mean = sum / static_cast<double>(v.size());
    const double sd = std::sqrt(sum_sq / static_cast<double>(v.size()) - mean * mean);
    std::printf("%s: logits sd %.3f, max |logit| %.2f\n", shape, sd, amax);
    EXPECT_GT(sd, 0.01) << shape;    // logits vary (measured sd 0.31-0.32, max 1.2)
    EXPECT_LT(amax, 50.0) << shape;  // and stay bounded
  }
}

// The deepseek (V1) and qwen3 shapes, shrunk by overrides to a few MB, load and run: the
// tensor list derived from the keys (MoE blocks after the dense lead, q/k norms) is the one
// the engine expects, and the logits are finite and bounded.
TEST_F(ToolsTest, SynthDeepseekV1AndQwen3Run) {
  const std::string tokens = path("tokens.json");
  {
    std::ofstream j(tokens);
    j << "{\"tokens\": [1, 17, 300, 42, 99, 5, 250, 7, 8, 400, 12, 13]}";
  }
  const std::string small =
      "--layers 3 --set embedding_length=256 --set attention.head_count=4 "
      "--set rope.dimension_count=64 --set feed_forward_length=512 --set vocab_size=4096 ";
  for (auto [shape, extra] : {std::pair{"deepseek-moe-16b",
                                        "--set attention.head_count_kv=4 --set expert_count=8 "
                                        "--set expert_feed_forward_length=256"},
                              std::pair{"r1-0528-qwen3-8b", "--set attention.head_count_kv=2"}}) {
    auto f = synth(shape, "Q4_K_M", small + extra);
    ASSERT_TRUE(f) << shape;
    const std::string model = path(std::string(shape) + "-Q4_K_M.gguf");
    const std::string logits = path("logits.f32");
    ASSERT_EQ(
        run(cli() + " eval --threads 2 --model " + model + " --tokens-json " + tokens + " --logits-out " + logits), 0)
        << shape;
    const auto bytes = test::read_file_bytes(logits);
    const int64_t n_vocab = static_cast<int64_t>(f->find("tokenizer.ggml.tokens")->arr_str.size());
    ASSERT_EQ(bytes.size(), 12u * static_cast<size_t>(n_vocab) * sizeof(float)) << shape;
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    double sum_sq = 0.0, amax = 0.0;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x)) << shape;
      sum_sq += static_cast<double>(x) * x;
      amax = std::max(amax, static_cast<double>(std::fabs(x)));
    }
    const double rms = std::sqrt(sum_sq / static_cast<double>(v.size()));
    std::printf("%s: logits rms %.3f, max |logit| %.2f\n", shape, rms, amax);
    EXPECT_GT(rms, 0.01) << shape;
    EXPECT_LT(amax, 50.0) << shape;
  }
}

// Seeded byte mutations of a valid model: quantize (and synth --vocab) must exit 0 or 1,
// never die by a signal; the reader's validation and the NaN check carry this.
TEST_F(ToolsTest, MutatedInputsNeverCrash) {
  ASSERT_EQ(run(cli() + " synth --shape tiny-qwen2 --type F16 --layers 1 --out " + path("m.gguf")), 0);
  const auto good = test::read_file_bytes(path("m.gguf"));
  std::mt19937 rng(2024);
  for (int k = 0; k < 24; ++k) {
    auto bytes = good;
    // mostly the header and metadata (where the structure is), sometimes anywhere
    const size_t span = k % 3 == 0 ? bytes.size() : std::min<size_t>(bytes.size(), 40000);
    for (int j = 0; j < 1 + k % 4; ++j) bytes[rng() % span] = static_cast<uint8_t>(rng());
    test::write_file_bytes(path("mut.gguf"), bytes);
    const int rc = run(cli() + " quantize " + path("mut.gguf") + " " + path("o.gguf") + " Q4_K_M");
    EXPECT_TRUE(rc == 0 || rc == 1) << "mutation " << k << " rc " << rc;
    if (k % 4 == 0) {
      const int rc2 = run(cli() + " synth --shape tiny-llama --type Q8_0 --layers 1 --vocab " + path("mut.gguf") +
                          " --out " + path("v.gguf"));
      EXPECT_TRUE(rc2 == 0 || rc2 == 1) << "mutation " << k << " rc " << rc2;
    }
  }
}

}  // namespace
}  // namespace ds
