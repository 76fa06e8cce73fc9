#pragma once
// Shared test helpers: the reference-file reader and tensor comparisons.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::testing {

// Reads an "EMBREF01" file written by tools/gen_reference.py (format in that script).
std::map<std::string, Tensor> load_reference(const std::string& path);
// tests/reference/<file>, or $EMBER_REFERENCE_DIR/<file> for test binaries run away from their
// source tree (tools/gpu_check.sh --prebuilt).
std::string reference_path(const std::string& file);
const std::map<std::string, Tensor>& reference();        // tests/reference/ops.bin, loaded once
const std::map<std::string, Tensor>& reference_grads();  // tests/reference/grads.bin
const std::map<std::string, Tensor>& reference_nn();     // tests/reference/nn.bin
const std::map<std::string, Tensor>& reference_quant();  // tests/reference/quant.bin
// ref[name], or an ember::Error naming the missing entry.
const Tensor& ref_tensor(const std::map<std::string, Tensor>& ref, const std::string& name);

// Same dtype, same shape, and every element within atol + rtol * |expected| (NaN == NaN).
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5,
                                     double atol = 1e-6);

// The instruction sets the CPU's direct convolution kernels can run with here: avx2, and avx512
// where the CPU has it (the back end's widest-ISA switch is left as it was).
std::vector<backends::cpu::Isa> cpu_isas();

// f(setting) once under each float32 convolution algorithm the CPU back end can be forced to
// (im2col + GEMM, the direct kernels) with each instruction set this machine has; `setting`
// names them. The back end's switches are restored afterwards.
void for_each_cpu_conv_algorithm(const std::function<void(const std::string& setting)>& f);

// The integers of a seeded sweep over random shapes and arguments: in(lo, hi) draws from
// [lo, hi], the same sequence for the same seed on every machine (mt19937_64 is specified).
struct SeededInts {
  explicit SeededInts(uint64_t seed) : rng(seed) {}
  int64_t operator()(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  std::mt19937_64 rng;
};

// The message of the ember::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::testing

#define EXPECT_ERROR_CONTAINS(stmt, text)                                           \
  do {                                                                              \
    const std::string msg_ = ::ember::testing::error_of([&] { (void)(stmt); });     \
    EXPECT_NE(msg_.find(text), std::string::npos) << "error was: '" << msg_ << "'"; \
  } while (0)
