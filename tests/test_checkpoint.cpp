// Checkpoints: safetensors round trips (bit-exact for every dtype), a file written from
// PyTorch, module and optimizer checkpoints, and hostile files: each problem is an
// ember::Error naming the file, never a crash or an over-read (ASan runs these too).
#include <cstdio>
#include <cstring>
#include <fstream>

#include "helpers.h"

namespace ember {
namespace {

std::string temp_path(const std::string& name) {
  return (std::string(::testing::TempDir()) + "ember_" + name + ".safetensors");
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a JSON header and raw data, as a hostile writer would make it.
std::vector<uint8_t> make_file(const std::string& json, size_t data_bytes, uint64_t header_len = UINT64_MAX) {
  const uint64_t n = header_len == UINT64_MAX ? json.size() : header_len;
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), json.begin(), json.end());
  out.resize(out.size() + data_bytes, 0x3f);
  return out;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return testing::error_of([&] { io::parse_safetensors(bytes.data(), bytes.size(), "hostile.safetensors"); });
}

TEST(Checkpoint, RoundTripIsBitExactForEveryDType) {
  StateDict state;
  state.insert("bool", tensor<bool>({true, false, true}));
  state.insert("uint8", tensor<uint8_t>({0, 255, 7}));
  state.insert("int8", tensor<int8_t>({-128, 127, 0}));
  state.insert("int32", tensor<int32_t>({INT32_MIN, INT32_MAX}, Shape{2, 1}));
  state.insert("int64", tensor<int64_t>({INT64_MIN, 0, INT64_MAX}));
  state.insert("float16", randn({3, 4}).to(kFloat16));
  state.insert("bfloat16", randn({2, 5}).to(kBFloat16));
  state.insert("float32", tensor<float>({1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 1e-45f}));
  state.insert("float64", randn({2, 2, 2}, kFloat64).transpose(0, 2));  // non-contiguous
  state.insert("empty", zeros({0, 3}));
  state.insert("scalar", scalar_tensor(3.25, kFloat64));
  const std::string path = temp_path("dtypes");
  save(state, path, {{"note", "round trip"}});
  const StateDict back = load(path);
  ASSERT_EQ(back.keys(), state.keys());
  for (const auto& item : state) {
    const Tensor& b = back[item.key()];
    EXPECT_EQ(b.dtype(), item.value().dtype()) << item.key();
    EXPECT_EQ(b.sizes(), item.value().sizes()) << item.key();
    const Tensor a = item.value().contiguous();
    ASSERT_EQ(a.nbytes(), b.nbytes()) << item.key();
    if (a.nbytes() > 0)  // an empty tensor has no data pointer (memcmp must not see null)
      EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0) << item.key() << " differs bitwise";
  }
  EXPECT_EQ(load_metadata(path).at("note"), "round trip");
  // The header is 8-byte aligned and the data section starts right after it.
  const auto bytes = read_bytes(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  std::remove(path.c_str());
}

TEST(Checkpoint, LoadsWeightsWrittenFromPyTorch) {
  nn::Sequential model(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 3));
  load(model, testing::reference_path("torch_mlp.safetensors"));
  const auto& ref = testing::reference_nn();
  NoGradGuard no_grad;
  EXPECT_TRUE(testing::all_close(model(testing::ref_tensor(ref, "st_mlp.in")), testing::ref_tensor(ref, "st_mlp.out"),
                                 1e-5, 1e-6));
  EXPECT_EQ(load_metadata(testing::reference_path("torch_mlp.safetensors")).at("format"), "pt");
}

TEST(Checkpoint, ModuleRoundTripAndStrictLoading) {
  nn::Sequential a(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3));
  a->train();
  a(randn({4, 1, 4, 4}));  // moves the running statistics
  const std::string path = temp_path("module");
  save(a, path);
  nn::Sequential b(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3));
  load(b, path);
  for (const auto& item : a->state_dict())
    EXPECT_TRUE(testing::all_close(b->state_dict()[item.key()], item.value(), 0, 0)) << item.key();

  nn::Sequential wider(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 4));
  EXPECT_ERROR_CONTAINS(load(wider, path), "size mismatch for '3.weight': the checkpoint has shape [3, 8]");
  nn::Sequential fewer(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2));
  EXPECT_ERROR_CONTAINS(load(fewer, path), "unexpected keys: '3.weight' '3.bias'");
  const auto result = load(fewer, path, /*strict=*/false);
  EXPECT_EQ(result.unexpected_keys, (std::vector<std::string>{"3.weight", "3.bias"}));
  nn::Sequential more(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3), nn::Linear(3, 1));
  EXPECT_ERROR_CONTAINS(load(more, path), "missing keys: '4.weight' '4.bias'");
  EXPECT_ERROR_CONTAINS(load(b, temp_path("does_not_exist")), "cannot open");
  std::remove(path.c_str());
}

TEST(Checkpoint, OptimizerRoundTripContinuesExactly) {
  Tensor w = randn({5, 3}).requires_grad_();
  optim::AdamW opt({w}, optim::AdamWOptions(0.01));
  auto step = [&](optim::Optimizer& o, Tensor& p) {
    o.zero_grad();
    (p * p).sum().backward();
    o.step();
  };
  for (int i = 0; i < 3; ++i) step(opt, w);
  const std::string path = temp_path("optimizer");
  save(opt, path);
  Tensor w2 = w.detach().clone().requires_grad_();
  optim::AdamW opt2({w2}, optim::AdamWOptions(0.5));  // options come from the file
  load(opt2, path);
  EXPECT_DOUBLE_EQ(opt2.param_groups()[0].options().get_lr(), 0.01);
  step(opt, w);
  step(opt2, w2);
  EXPECT_TRUE(testing::all_close(w2, w, 0, 0));
  std::remove(path.c_str());
}

TEST(Checkpoint, HostileFilesAreErrorsNamingTheProblem) {
  EXPECT_NE(parse_error({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(parse_error(make_file("{}", 0, 1000)).find("header length 1000 is larger than the file"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file("{\"a\": [1,", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(make_file("[1, 2]", 0)).find("does not start with a JSON object"), std::string::npos);
  const std::string ok_entry = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8))
                .find("unknown dtype 'F33'"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", 8))
                .find("'I16', which ember does not support"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8))
                .find("outside the 8-byte data section"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("needs 12 bytes, but its data_offsets span 8"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file("{\"a\":{" + ok_entry + "},\"b\":{" + ok_entry + "}}", 8)).find("overlaps"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file("{\"a\":{" + ok_entry + "},\"a\":{" + ok_entry + "}}", 8)).find("appears twice"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file("{\"a\":{" + ok_entry + "}}", 12)).find("belong to no tensor"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8))
                .find("non-negative integer"),
            std::string::npos);
  EXPECT_NE(
      parse_error(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8))
          .find("too large"),
      std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"__metadata__":{"a":1}})", 0)).find("is not a string"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[[[[2]]]],"data_offsets":[0,8]}})", 8)).find("deeper"),
            std::string::npos);
  // Every error names the file.
  EXPECT_NE(parse_error(make_file("{\"a\": 1}", 0)).find("'hostile.safetensors'"), std::string::npos);
}

TEST(Checkpoint, TruncatedFilesAtEveryLengthAreErrors) {
  StateDict state;
  state.insert("w", randn({3, 2}));
  state.insert("b", tensor<int64_t>({1, 2}));
  const std::string path = temp_path("truncate");
  save(state, path);
  const auto bytes = read_bytes(path);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(parse_error(cut).empty()) << "a file cut to " << n << " bytes was accepted";
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(Checkpoint, AGradScalerTravelsWithItsOptimizer) {
  const std::string path = ::testing::TempDir() + "ember_scaler.optim";
  Tensor w = ones({2}).requires_grad_();
  optim::Adam opt({w}, optim::AdamOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024).backoff_factor(0.125).growth_interval(7));
  for (float g : {1.0f, std::numeric_limits<float>::infinity(), 1.0f}) {  // a backoff: scale 128, tracker 1
    w.mutable_grad() = Tensor();
    scaler.scale((w * g).sum()).backward();
    scaler.step(opt);
    scaler.update();
  }
  save(opt, scaler, path);
  Tensor w2 = ones({2}).requires_grad_();
  optim::Adam opt2({w2}, optim::AdamOptions(0.1));
  amp::GradScaler restored;
  load(opt2, restored, path);
  EXPECT_EQ(restored.get_scale(), 128.0);
  EXPECT_EQ(restored.growth_tracker(), 1);
  EXPECT_EQ(restored.state_dict(), scaler.state_dict());
  EXPECT_EQ(opt2.state_dict().metadata, opt.state_dict().metadata) << "the optimizer's own state loaded too";
  // A file without scaler state leaves an enabled scaler as it was; plain load() ignores the keys.
  const std::string plain = ::testing::TempDir() + "ember_plain.optim";
  save(opt, plain);
  amp::GradScaler fresh;
  load(opt2, fresh, plain);
  EXPECT_EQ(fresh.get_scale(), 65536.0);
  load(opt2, path);
  std::remove(path.c_str());
  std::remove(plain.c_str());
}

}  // namespace
}  // namespace ember
