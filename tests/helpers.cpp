#include "helpers.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ember::testing {

std::map<std::string, Tensor> load_reference(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "load_reference: cannot open ", path);
  auto read = [&](void* p, size_t n) {
    in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    EMBER_CHECK(in.gcount() == static_cast<std::streamsize>(n), "load_reference: ", path, " is truncated");
  };
  char magic[8];
  read(magic, 8);
  EMBER_CHECK(std::memcmp(magic, "EMBREF01", 8) == 0, "load_reference: ", path, " is not an EMBREF01 file");
  uint32_t count;
  read(&count, 4);
  std::map<std::string, Tensor> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len;
    read(&len, 4);
    EMBER_CHECK(len < 4096, "load_reference: bad name length");
    std::string name(len, '\0');
    read(name.data(), len);
    uint8_t code;
    uint32_t ndim;
    read(&code, 1);
    read(&ndim, 4);
    EMBER_CHECK(code < kNumDTypes && ndim <= 16, "load_reference: bad header for ", name);
    Shape shape(ndim);
    read(shape.data(), 8 * ndim);
    uint64_t nbytes;
    read(&nbytes, 8);
    Tensor t = empty(shape, static_cast<DType>(code));
    EMBER_CHECK(nbytes == t.nbytes(), "load_reference: byte count mismatch for ", name);
    if (nbytes) read(t.data_ptr(), nbytes);
    out.emplace(name, t);
  }
  return out;
}

std::string reference_path(const std::string& file) {
  const char* moved = std::getenv("EMBER_REFERENCE_DIR");
  return std::string(moved && *moved ? moved : EMBER_REFERENCE_DIR) + "/" + file;
}

const std::map<std::string, Tensor>& reference() {
  static const auto* ref = new std::map<std::string, Tensor>(load_reference(reference_path("ops.bin")));
  return *ref;
}

const std::map<std::string, Tensor>& reference_grads() {
  static const auto* ref = new std::map<std::string, Tensor>(load_reference(reference_path("grads.bin")));
  return *ref;
}

const std::map<std::string, Tensor>& reference_nn() {
  static const auto* ref = new std::map<std::string, Tensor>(load_reference(reference_path("nn.bin")));
  return *ref;
}

const std::map<std::string, Tensor>& reference_quant() {
  static const auto* ref = new std::map<std::string, Tensor>(load_reference(reference_path("quant.bin")));
  return *ref;
}

const Tensor& ref_tensor(const std::map<std::string, Tensor>& ref, const std::string& name) {
  auto it = ref.find(name);
  EMBER_CHECK(it != ref.end(), "reference tensor '", name, "' is missing: rerun tools/gen_reference.py");
  return it->second;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << actual.dtype() << " != expected " << expected.dtype();
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes()) << " != expected "
                                         << shape_str(expected.sizes());
  const auto a = actual.to(kFloat64).contiguous().to_vector<double>();
  const auto e = expected.to(kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i]) && std::isnan(a[i])) continue;
    if (a[i] == e[i]) continue;  // also equal infinities
    if (!(std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " != expected " << e[i]
                                           << "\nactual:   " << actual << "\nexpected: " << expected;
  }
  return ::testing::AssertionSuccess();
}

std::vector<backends::cpu::Isa> cpu_isas() {
  namespace bc = backends::cpu;
  const bc::Isa before = bc::max_isa();
  std::vector<bc::Isa> out{bc::Isa::avx2};
  bc::set_max_isa(bc::Isa::avx512);
  if (std::string(bc::isa()) == "avx512") out.push_back(bc::Isa::avx512);
  bc::set_max_isa(before);
  return out;
}

void for_each_cpu_conv_algorithm(const std::function<void(const std::string& setting)>& f) {
  namespace bc = backends::cpu;
  struct Restore {
    bc::ConvAlgorithm algorithm = bc::conv_algorithm();
    bc::Isa isa = bc::max_isa();
    ~Restore() {
      bc::set_conv_algorithm(algorithm);
      bc::set_max_isa(isa);
    }
  } restore;
  for (bc::Isa isa : cpu_isas())
    for (bc::ConvAlgorithm a : {bc::ConvAlgorithm::im2col_gemm, bc::ConvAlgorithm::direct}) {
      bc::set_max_isa(isa);
      bc::set_conv_algorithm(a);
      f(std::string(a == bc::ConvAlgorithm::direct ? "direct" : "im2col + GEMM") + " on " + bc::isa());
    }
}

}  // namespace ember::testing
