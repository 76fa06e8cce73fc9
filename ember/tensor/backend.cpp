#include "ember/tensor/backend.h"

#include <array>
#include <atomic>
#include "ember/tensor/index_view.h"
#include "ember/tensor/ops.h"

namespace ember {

void Backend::unsupported(const char* kernel) const {
  throw Error(detail::concat(kernel, ": not available on the ", name(), " back end"));
}

void Backend::copy(const Tensor&, const Tensor&) { unsupported("copy"); }
void Backend::lu_factor(const Tensor&, const Tensor&, const Tensor&) { unsupported("lu_factor"); }
void Backend::lu_solve(const Tensor&, const Tensor&, const Tensor&, bool) { unsupported("lu_solve"); }
void Backend::cholesky(const Tensor&, const Tensor&) { unsupported("cholesky"); }
void Backend::triangular_solve(const Tensor&, const Tensor&, bool, bool) { unsupported("triangular_solve"); }
void Backend::eigh(const Tensor&, const Tensor&, const Tensor&, bool) { unsupported("eigh"); }
void Backend::svd(const Tensor&, bool, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  unsupported("svd");
}
void Backend::qr_factor(const Tensor&, const Tensor&) { unsupported("qr_factor"); }
void Backend::householder_product(const Tensor&, const Tensor&, const Tensor&) { unsupported("householder_product"); }
void Backend::csr_linear(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  unsupported("csr_linear");
}
void Backend::quantize(const Tensor&, const QuantParams&, const Tensor&) { unsupported("quantize"); }
void Backend::dequantize(const Tensor&, const QuantParams&, const Tensor&) { unsupported("dequantize"); }
void Backend::fake_quantize(const Tensor&, const QuantParams&, const Tensor&, const Tensor&) {
  unsupported("fake_quantize");
}
Tensor Backend::int8_pack_weight(const Tensor&) { unsupported("int8_pack_weight"); }
void Backend::int8_gemm(const Tensor&, const Tensor&, const Int8Epilogue&, const Tensor&) { unsupported("int8_gemm"); }
void Backend::int8_conv2d(const Tensor&, const Tensor&, std::array<int64_t, 2>, const Conv2dParams&,
                          const Int8Epilogue&, const Tensor&) {
  unsupported("int8_conv2d");
}
void Backend::fill(const Tensor&, const Scalar&) { unsupported("fill"); }
void Backend::copy_across(const Tensor&, const Tensor&, bool) { unsupported("copy_across"); }
void Backend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&, const Scalar&) { unsupported("binary"); }
void Backend::unary(UnaryOp, const Tensor&, const Tensor&, double, double) { unsupported("unary"); }
void Backend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { unsupported("where"); }
void Backend::reduce(ReduceOp, const Tensor&, const Tensor&, const Tensor&) { unsupported("reduce"); }
void Backend::gemm(const Tensor&, const Tensor&, const Tensor&, double, double) { unsupported("gemm"); }
void Backend::gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  Tensor o = out;
  native::copy_(o, bias);
  gemm(native::unsqueeze(a, 0), native::unsqueeze(b, 0), native::unsqueeze(out, 0), 1, 1);
}
void Backend::conv2d(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  unsupported("conv2d");
}
void Backend::max_pool2d(const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&) {
  unsupported("max_pool2d");
}
void Backend::avg_pool2d(const Tensor&, const Tensor&, const Pool2dParams&) { unsupported("avg_pool2d"); }
void Backend::adaptive_avg_pool2d(const Tensor&, const Tensor&) { unsupported("adaptive_avg_pool2d"); }
void Backend::conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Conv2dParams&) {
  unsupported("conv2d_backward");
}
void Backend::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&) {
  unsupported("max_pool2d_backward");
}
void Backend::avg_pool2d_backward(const Tensor&, const Tensor&, const Pool2dParams&) {
  unsupported("avg_pool2d_backward");
}
void Backend::adaptive_avg_pool2d_backward(const Tensor&, const Tensor&) {
  unsupported("adaptive_avg_pool2d_backward");
}
void Backend::softmax(const Tensor&, const Tensor&, int64_t, bool) { unsupported("softmax"); }
void Backend::layer_norm(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                         const Tensor&) {
  unsupported("layer_norm");
}
void Backend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const Tensor&, const Tensor&) {
  unsupported("layer_norm_backward");
}
void Backend::group_norm(const Tensor&, const Tensor&, const Tensor&, int64_t, double, const Tensor&, const Tensor&,
                         const Tensor&) {
  unsupported("group_norm");
}
void Backend::group_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                                  const Tensor&, const Tensor&, const Tensor&) {
  unsupported("group_norm_backward");
}
void Backend::batch_norm_statistics(const Tensor&, const Tensor&, const Tensor&) { unsupported("batch_norm"); }
void Backend::batch_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  unsupported("batch_norm");
}
void Backend::batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                                  const Tensor&, const Tensor&, const Tensor&) {
  unsupported("batch_norm_backward");
}
void Backend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { unsupported("index_select"); }
void Backend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { unsupported("gather"); }
void Backend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { unsupported("scatter_add"); }
void Backend::cumsum(const Tensor&, int64_t, bool, const Tensor&) { unsupported("cumsum"); }
void Backend::cumprod(const Tensor&, int64_t, const Tensor&) { unsupported("cumprod"); }
void Backend::sort(const Tensor&, int64_t, bool, const Tensor&, const Tensor&) { unsupported("sort"); }
void Backend::scatter(const Tensor&, int64_t, const Tensor&, const Tensor&) { unsupported("scatter"); }
void Backend::random_uniform(const Tensor&, double, double, uint64_t, uint64_t) { unsupported("random_uniform"); }
void Backend::random_normal(const Tensor&, double, double, uint64_t, uint64_t) { unsupported("random_normal"); }
void Backend::random_int(const Tensor&, int64_t, int64_t, uint64_t, uint64_t) { unsupported("random_int"); }
void Backend::random_bernoulli(const Tensor&, double, double, uint64_t, uint64_t) { unsupported("random_bernoulli"); }

Tensor index_aligned_view(const Tensor& t, const Tensor& index, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->sizes = index.sizes();
  impl->strides = strides;
  impl->autograd = nullptr;  // a kernel's scratch view, never part of the tape
  return Tensor(std::move(impl));
}

Allocator* Backend::pinned_host_allocator() { unsupported("pinned host memory"); }

namespace {
constexpr size_t kDeviceTypes = 2;  // DeviceType::CPU, DeviceType::CUDA
std::array<std::atomic<Backend*>, kDeviceTypes>& registry() {
  static std::array<std::atomic<Backend*>, kDeviceTypes> table{&cpu_backend(), &cuda_backend()};
  return table;
}
size_t slot_of(DeviceType type) {
  const auto i = static_cast<size_t>(type);
  EMBER_ASSERT(i < kDeviceTypes, "device type ", static_cast<int>(type), " has no back-end slot");
  return i;
}
}  // namespace

Backend& backend(DeviceType type) { return *registry()[slot_of(type)].load(std::memory_order_acquire); }
void register_backend(DeviceType type, Backend& b) { registry()[slot_of(type)].store(&b, std::memory_order_release); }

void Backend::sgd_step(const std::vector<SgdParam>&, const SgdStep&) { unsupported("sgd_step"); }
void Backend::adam_step(const std::vector<AdamParam>&, const AdamStep&) { unsupported("adam_step"); }
void Backend::rmsprop_step(const std::vector<RmspropParam>&, const RmspropStep&) { unsupported("rmsprop_step"); }
void Backend::adagrad_step(const std::vector<AdagradParam>&, const AdagradStep&) { unsupported("adagrad_step"); }
void Backend::amp_unscale(const std::vector<Tensor>&, const Tensor&, const Tensor&) { unsupported("amp_unscale"); }
void Backend::amp_update_scale(const Tensor&, const Tensor&, const Tensor&, double, double, int64_t) {
  unsupported("amp_update_scale");
}

}  // namespace ember
