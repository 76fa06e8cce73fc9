#pragma once
// The kernel interface. Note [One kernel interface]: every device-dependent piece of
// work in ember is one of these calls. Ops (tensor/ops/) validate arguments, work out
// shapes and dtypes, allocate outputs and then call a Backend; back ends (tensor/cpu/,
// cuda/) only compute, each implementing these virtual functions directly in its family files
// (tensor/cpu/cpu_backend.h, cuda/cuda_backend.h list them). Kernels know nothing about
// autograd. A kernel a back end does not provide throws an ember::Error naming the kernel and
// the back end.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/tensor/allocator.h"
#include "ember/tensor/elementwise_math.h"
#include "ember/tensor/tensor.h"

namespace ember {

// BinaryOp and UnaryOp, and their math: tensor/elementwise_math.h (Note [Elementwise math]).
enum class ReduceOp : int8_t { Sum, Prod, Max, Min, ArgMax, ArgMin, All, Any };

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dParams {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

// Note [Fused optimizer steps]: one pass over each parameter per step, for all parameters of
// a step in one call (one parallel region on the CPU, one launch per batch on CUDA). For
// each element the kernel reads param, grad and the state once and writes param and the
// state once; coefficients are computed in double and applied in the tensors' opmath type, in
// the order PyTorch's single-tensor optimizers apply their ops, so trajectories match
// PyTorch's to rounding. The tensors of one parameter are contiguous and share one floating
// dtype and shape; state tensors a step does not use are undefined.
//
// The step skips itself on the device: when `found_inf` (one float32 on the parameters'
// device, the GradScaler's overflow flag) is defined and nonzero, the kernel changes nothing.
// So that a skipped step leaves no trace, each parameter's step count is a device tensor too
// (`step`: one int64), which the kernel increments only when it steps; Adam's bias corrections
// and SGD's first step (the momentum buffer starts as a copy of the gradient) are read from
// it. Nothing in a step needs the host to know whether it was skipped.
struct SgdStep {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  Tensor found_inf;  // skip when nonzero (undefined: always step)
};
struct SgdParam {
  Tensor param, grad, momentum_buffer, step;
};
struct AdamStep {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * wd; Adam: g += wd * p
  bool amsgrad = false, maximize = false;
  Tensor found_inf;
};
struct AdamParam {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step;
};
struct RmspropStep {
  double lr = 0, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
  Tensor found_inf;
};
struct RmspropParam {
  Tensor param, grad, square_avg, grad_avg, momentum_buffer, step;
};
struct AdagradStep {
  double lr = 0, lr_decay = 0, weight_decay = 0, eps = 1e-10;
  bool maximize = false;
  Tensor found_inf;
};
struct AdagradParam {
  Tensor param, grad, sum, step;
};

// Note [Affine quantization]: an int8 (or uint8, int32) value q stands for the real number
// (q - zero_point) * scale; quantizing x gives q = clamp(nearbyint(x * (1 / scale)) + zero_point,
// quant_min, quant_max), with 1 / scale taken in float32 as PyTorch's CPU kernels do. `scale`
// (float32) and `zero_point` (int32) hold one element (per tensor) or one per index of `axis` (per
// channel). A fake quantization is the quantize-dequantize round trip in floating point, and its
// gradient is the straight-through estimator: 1 where nearbyint(x / scale) + zero_point lies in
// [quant_min, quant_max], 0 where the clamp cut it.
struct QuantParams {
  Tensor scale, zero_point;  // float32 [C], int32 [C], on the tensor's device; contiguous
  int64_t axis = -1;         // -1: per tensor (C = 1)
  int64_t quant_min = 0, quant_max = 255;
};

// Note [Int8 GEMM]: out[m, n] = Σ_k (a[m, k] - a_zero_point) w[n, k] for a uint8 activation
// a [M, K] and an int8 weight w [N, K] that the back end packed once (int8_pack_weight: its own
// layout, with each row's sum kept for the zero-point term). The int32 sum is exact as long as no
// pair a[k] w[n, k] + a[k+1] w[n, k+1] leaves int16, which holds for activations in [0, 127]
// (PyTorch's reduce_range) with any int8 weight; wider activations may saturate, as fbgemm's do
// (the CPU's AVX2 kernel; its AVX-512 VNNI kernel and cuBLASLt never saturate).
// The epilogue turns the int32 sum into the output: int32 as is; float32 as
// acc * a_scale * w_scale[n] + bias[n]; uint8 requantized to (out_scale, out_zero_point). `relu`
// clamps at zero before any rounding (a fused Linear + ReLU).
struct Int8Epilogue {
  int64_t a_zero_point = 0;
  double a_scale = 1;
  Tensor w_scale;  // float32 [1] or [N]
  Tensor bias;     // float32 [N], or undefined
  double out_scale = 1;
  int64_t out_zero_point = 0;
  int64_t out_quant_min = 0, out_quant_max = 255;  // the uint8 output's range (0..127: 7 bits for the next GEMM)
  bool relu = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- memory ----
  // The allocator of device `index` of this back end's type.
  virtual Allocator* allocator(int index) = 0;
  // Page-locked host memory that this back end copies from asynchronously (TensorOptions's
  // pinned_memory and Tensor::pin_memory use the CUDA back end's).
  virtual Allocator* pinned_host_allocator();

  // ---- copy and fill ----
  // dst[i] = cast(src[i]); same shape (src may be an expanded view), any dtypes, same device.
  virtual void copy(const Tensor& src, const Tensor& dst);
  // dst[i] = value, for any layout of dst.
  virtual void fill(const Tensor& dst, const Scalar& value);
  // Copies between this device and the host (dst or src is a CPU tensor); same shape, dtype.
  virtual void copy_across(const Tensor& src, const Tensor& dst, bool non_blocking);

  // ---- elementwise ----
  // out[i] = a[i] op b[i] (alpha scales b for Add/Sub). a, b: views broadcast to out's shape,
  // of one dtype; out: that dtype, or bool for comparisons.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha);
  // out[i] = op(a[i]); a and out share shape and dtype.
  virtual void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1);
  // out[i] = cond[i] ? a[i] : b[i]; cond bool, all broadcast to out's shape.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

  // ---- reductions ----
  // in: [K, R] (any strides) -> out: [K] contiguous, reducing each row; for Max/Min/Arg*
  // `indices` ([K] int64, or undefined) receives the position of the first extreme.
  virtual void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices);

  // ---- scans and sorting along one dim (tensors contiguous, seen as [outer, D, inner]) ----
  // out[.., i, ..] = x[.., 0, ..] + ... + x[.., i, ..] (reverse: x[.., i, ..] + ... + x[.., D - 1, ..]),
  // accumulated as acc_t<T> on the CPU (PyTorch's: double for float)
  virtual void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& out);
  // out = running products of x along dim, as cumsum (integers wrap)
  virtual void cumprod(const Tensor& x, int64_t dim, const Tensor& out);
  // values, indices (int64) [.., K, ..], K <= D: the first K of each line of x in ascending (or
  // descending) order, ties in index order (stable), NaN above every number
  virtual void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices);

  // ---- matmul ----
  // c[b] = beta * c[b] + alpha * a[b] @ b[b]; a: [B, M, K], b: [B, K, N], c: [B, M, N], any strides.
  virtual void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);
  // out = a @ b + bias (Linear's forward); a: [M, K], b: [K, N], bias: [N], out: [M, N] contiguous.
  // By default the bias is broadcast into out, then gemm with beta 1; a back end whose GEMM can
  // add the bias as it writes (cuBLASLt's epilogue) saves that pass over out.
  virtual void gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);

  // ---- convolution and pooling (NCHW) ----
  // input [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] or undefined -> out [N, O, Ho, Wo]
  virtual void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                      const Conv2dParams& p);
  // The gradients of conv2d: grad_out [N, O, Ho, Wo] -> grad_input [N, C, H, W] (= 0 first),
  // grad_weight [O, C/groups, kH, kW], grad_bias [O]; each may be undefined (not wanted).
  // When grad_input alone is wanted, only input's shape, dtype and device are read, so
  // conv_transpose2d (whose forward is this backward-data pass) passes grad_input as input.
  virtual void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out,
                               const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                               const Conv2dParams& p);
  // in [N, C, H, W] -> out [N, C, Ho, Wo] and, when defined, indices [N, C, Ho, Wo] of each
  // window's maximum: int64, its flat h*W+w in the plane (PyTorch's), or uint8, its tap number
  // i*kw+j in the window (what autograd keeps: 1 byte per output, not 8; windows of <= 256 taps)
  virtual void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p);
  virtual void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p);
  virtual void adaptive_avg_pool2d(const Tensor& in, const Tensor& out);
  // grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W]: each output's gradient shared over its window.
  // grad_in[plane, position of indices[plane, o]] += grad_out[plane, o], indices as max_pool2d
  // wrote them (p places a tap number); grad_in zeroed here
  virtual void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in,
                                   const Pool2dParams& p);
  virtual void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p);
  virtual void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in);

  // ---- softmax ----
  // out = softmax(in) or log_softmax(in) along dim; in, out contiguous, same shape.
  virtual void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log);

  // ---- layer, group and batch normalization (Note [Fused layer_norm] in tensor/ops/normalization.cpp) ----
  // Rows of x [R, D] (contiguous, floating T) -> out [R, D] (T) = (x - mean) * rstd * weight + bias,
  // with the row's mean [R] and rstd [R] = 1 / sqrt(biased variance + eps) kept for backward.
  // M = opmath_t<T> (float32 for 16-bit T): mean, rstd, weight and bias [D] (each undefined when
  // absent) are M, and every sum is taken in M.
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                          const Tensor& mean, const Tensor& rstd);
  // From grad_out [R, D] (T), x, mean, rstd and weight as layer_norm's: grad_input [R, D] (T),
  // grad_weight and grad_bias [D] (M); each output undefined when not wanted.
  virtual void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, const Tensor& grad_input, const Tensor& grad_weight,
                                   const Tensor& grad_bias);
  // x [N, C, HW] (contiguous, floating T) -> out (T): each sample's C / G channels of each of G
  // groups normalized together, then channel c scaled by weight[c] and shifted by bias[c];
  // mean, rstd [N * G]. M and the dtypes as layer_norm's.
  virtual void group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, double eps,
                          const Tensor& out, const Tensor& mean, const Tensor& rstd);
  // grad_input [N, C, HW] (T), grad_weight and grad_bias [C] (M), as layer_norm_backward's.
  virtual void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, int64_t groups, const Tensor& grad_input,
                                   const Tensor& grad_weight, const Tensor& grad_bias);
  // batch_norm over x [N, C, HW] (contiguous, floating T), per channel over N and HW, M as
  // layer_norm's: each channel's mean and biased variance into mean, var [C] (M), ...
  virtual void batch_norm_statistics(const Tensor& x, const Tensor& mean, const Tensor& var);
  // ... out (T) = (x - mean[c]) * rstd[c] * weight[c] + bias[c] from the statistics given, ...
  virtual void batch_norm(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                          const Tensor& bias, const Tensor& out);
  // ... and the gradients: grad_input (T; `training`: through the statistics too, which were
  // x's), grad_weight = Σ dy x̂ and grad_bias = Σ dy [C] (M), each undefined when not wanted.
  virtual void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool training, const Tensor& grad_input,
                                   const Tensor& grad_weight, const Tensor& grad_bias);

  // ---- indexing (index: int64, validated by the kernel against the indexed size) ----
  // out = src.index_select(dim, index)
  virtual void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
  // out[..i..] = src[..index[..i..]..] along dim
  virtual void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
  // self[..index[..i..]..] += src[..i..] along dim, in place
  virtual void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
  // self[..index[..i..]..] = src[..i..] along dim, in place (one of the writes wins where they collide)
  virtual void scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

  // ---- optimizer steps (Note [Fused optimizer steps]): step += 1, then ----
  // p -= lr * (nesterov ? g + μ buf : buf), buf = step == 1 ? g : μ buf + (1 - τ) g, g = ±grad + wd p
  virtual void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s);
  // m, v (and v_max) updated; p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), bcᵢ = 1 - βᵢ^step
  virtual void adam_step(const std::vector<AdamParam>& params, const AdamStep& s);
  // v = α v + (1 - α) g², p -= lr g / (sqrt(v - ḡ²) + eps), optionally through a momentum buffer
  virtual void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s);
  // sum += g², p -= lr / (1 + (step - 1) lr_decay) · g / (sqrt(sum) + eps)
  virtual void adagrad_step(const std::vector<AdagradParam>& params, const AdagradStep& s);

  // ---- mixed precision: the GradScaler's kernels (optim/grad_scaler.h) ----
  // For every tensor of `grads` (floating, contiguous): found_inf becomes 1 if any element is inf
  // or NaN, and every element is multiplied by inv_scale. found_inf and inv_scale: one float32
  // each. No host read: PyTorch's _amp_foreach_non_finite_check_and_unscale_.
  virtual void amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale);
  // found_inf != 0: scale *= backoff and growth_tracker = 0; otherwise growth_tracker += 1 and,
  // when it reaches `interval`, scale *= growth (if that stays finite) and growth_tracker = 0.
  // scale: one float32, growth_tracker: one int32. PyTorch's _amp_update_scale_.
  virtual void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                double growth, double backoff, int64_t interval);

  // ---- matrix factorizations (Note [Fortran order]) ----
  // Matrices are batches [B, n, m] of float32/float64 in column-major order (strides (n m, 1, n)),
  // as LAPACK and cuSOLVER take them; each call factors or solves all B at once. Every call has
  // work (B > 0, no empty matrix or right-hand side): the native layer answers empty ones itself.
  // a [B, n, n] -> its LU factors in place (unit L below the diagonal, U on and above it);
  // pivots [B, n] int32: LAPACK's 1-based row swaps; info [B] int32: 0, or k when U's k-th
  // diagonal element (1-based) is exactly zero. getrf.
  virtual void lu_factor(const Tensor& a, const Tensor& pivots, const Tensor& info);
  // b [B, n, k] <- A⁻¹ b (Aᵀ⁻¹ b when `transpose`), A given by lu_factor's factors and pivots. getrs.
  virtual void lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose);
  // a [B, n, n] -> its lower Cholesky factor on and below the diagonal, in place (only the lower
  // triangle is read, the upper one is left as it was); info [B] int32: 0, or k when the leading
  // minor of order k is not positive-definite. potrf.
  virtual void cholesky(const Tensor& a, const Tensor& info);
  // b [B, n, k] <- A⁻¹ b for triangular a [B, n, n]: only its upper (or lower) triangle is read,
  // and not its diagonal when `unit_diagonal` (taken as ones). trsm.
  virtual void triangular_solve(const Tensor& a, const Tensor& b, bool upper, bool unit_diagonal);
  // a [B, n, n] symmetric (only the lower triangle is read) -> w [B, n] its eigenvalues in
  // ascending order and, when `vectors`, its orthonormal eigenvectors in place as columns (else a
  // is overwritten); info [B] int32: 0, or > 0 when the iteration did not converge. syevd.
  virtual void eigh(const Tensor& a, const Tensor& w, const Tensor& info, bool vectors);
  // a [B, m, n] (overwritten) -> its singular values s [B, k] (k = min(m, n), descending) and,
  // when u and vh are defined, the singular vectors: u [B, m, k] and vh [B, k, n], or u [B, m, m]
  // and vh [B, n, n] when `full_matrices`; a = u diag(s) vh. info [B] int32: 0, or > 0 when the
  // iteration did not converge. gesvd.
  virtual void svd(const Tensor& a, bool full_matrices, const Tensor& u, const Tensor& s, const Tensor& vh,
                   const Tensor& info);
  // a [B, m, n] -> its Householder QR in place: R on and above the diagonal, the essential parts
  // of the reflectors H_i = I - tau_i v_i v_iᵀ below it (v_i's i-th element is 1); tau [B, k], k =
  // min(m, n). geqrf.
  virtual void qr_factor(const Tensor& a, const Tensor& tau);
  // reflectors [B, m, n] as qr_factor left them (first k columns read), tau [B, k] -> q [B, m, c] (k
  // ≤ c ≤ m, every element written) the first c columns of H_1 H_2 … H_k. orgqr.
  virtual void householder_product(const Tensor& reflectors, const Tensor& tau, const Tensor& q);

  // ---- sparse ----
  // out [M, N] = x [M, K] @ Wᵀ + bias, W [N, K] in CSR (crow [N + 1], col [nnz], values [nnz]); float32
  virtual void csr_linear(const Tensor& x, const Tensor& crow, const Tensor& col, const Tensor& values,
                          const Tensor& bias, const Tensor& out);

  // ---- int8 quantization (Note [Affine quantization], Note [Int8 GEMM]) ----
  // x floating -> out int8/uint8/int32 (same shape, contiguous)
  virtual void quantize(const Tensor& x, const QuantParams& q, const Tensor& out);
  // q int8/uint8/int32 -> out float32 (same shape, contiguous): (q - zero_point) * scale
  virtual void dequantize(const Tensor& q, const QuantParams& p, const Tensor& out);
  // x floating -> out (x's dtype) = the quantize-dequantize round trip; mask (bool, or undefined)
  // = where the straight-through gradient passes. All contiguous, same shape.
  virtual void fake_quantize(const Tensor& x, const QuantParams& q, const Tensor& out, const Tensor& mask);
  // w int8 [N, K] -> this back end's packed form (an int8 tensor; only int8_gemm reads it)
  virtual Tensor int8_pack_weight(const Tensor& w);
  // a uint8 [M, K] (rows contiguous), w packed by int8_pack_weight -> out [M, N] int32/float32/uint8
  virtual void int8_gemm(const Tensor& a, const Tensor& w_packed, const Int8Epilogue& e, const Tensor& out);
  // input uint8 [N, C, H, W] (its zero point: e.a_zero_point, which also pads), weight packed from
  // [O, kh * kw * C] (taps, then channels: the weight permuted to [O, kh, kw, C]) -> out [N, O, Ho, Wo]
  // uint8 or float32; groups 1
  virtual void int8_conv2d(const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel,
                           const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out);

  // ---- random (counter-based Philox; see tensor/generator.h) ----
  // out: contiguous. Element i takes its numbers from the Philox block (offset + i / lanes).
  virtual void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset);
  virtual void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset);
  virtual void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset);
  // out[i] = value where element i's uniform draw (random_uniform's, from 0 to 1) is below p, else 0.
  virtual void random_bernoulli(const Tensor& out, double p, double value, uint64_t seed, uint64_t offset);

 protected:
  [[noreturn]] void unsupported(const char* kernel) const;
};

// The kernels a complete back end overrides, declared in its class with this one line
// (`EMBER_BACKEND_KERNELS;` in tensor/cpu/cpu_backend.h, cuda/cuda_backend.h) and defined in its
// family files.
#define EMBER_BACKEND_KERNELS                                                                                          \
  void copy(const Tensor& src, const Tensor& dst) override;                                                            \
  void fill(const Tensor& dst, const Scalar& value) override;                                                          \
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) override;         \
  void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) override;                           \
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;                        \
  void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) override;             \
  void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) override;             \
  void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) override;              \
  void random_bernoulli(const Tensor& out, double p, double value, uint64_t seed, uint64_t offset) override;           \
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) override;                       \
  void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& out) override;                                 \
  void cumprod(const Tensor& x, int64_t dim, const Tensor& out) override;                                              \
  void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) override;      \
  void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) override;                                   \
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,            \
                  const Tensor& mean, const Tensor& rstd) override;                                                    \
  void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,            \
                           const Tensor& weight, const Tensor& grad_input, const Tensor& grad_weight,                  \
                           const Tensor& grad_bias) override;                                                          \
  void group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, double eps,               \
                  const Tensor& out, const Tensor& mean, const Tensor& rstd) override;                                 \
  void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,            \
                           const Tensor& weight, int64_t groups, const Tensor& grad_input, const Tensor& grad_weight,  \
                           const Tensor& grad_bias) override;                                                          \
  void batch_norm_statistics(const Tensor& x, const Tensor& mean, const Tensor& var) override;                         \
  void batch_norm(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bias,   \
                  const Tensor& out) override;                                                                         \
  void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,            \
                           const Tensor& weight, bool training, const Tensor& grad_input, const Tensor& grad_weight,   \
                           const Tensor& grad_bias) override;                                                          \
  void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) override;                    \
  void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out, const Conv2dParams& p) \
      override;                                                                                                        \
  void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,    \
                       const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) override;            \
  void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) override;         \
  void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) override;                                \
  void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) override;                                              \
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in,                       \
                           const Pool2dParams& p) override;                                                            \
  void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) override;             \
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) override;                           \
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;                  \
  void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;                        \
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) override;                  \
  void scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) override;                      \
  void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) override;                                       \
  void adam_step(const std::vector<AdamParam>& params, const AdamStep& s) override;                                    \
  void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) override;                           \
  void adagrad_step(const std::vector<AdagradParam>& params, const AdagradStep& s) override;                           \
  void amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) override;       \
  void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth,     \
                        double backoff, int64_t interval) override;                                                    \
  void lu_factor(const Tensor& a, const Tensor& pivots, const Tensor& info) override;                                  \
  void lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose) override;                     \
  void cholesky(const Tensor& a, const Tensor& info) override;                                                         \
  void triangular_solve(const Tensor& a, const Tensor& b, bool upper, bool unit_diagonal) override;                    \
  void eigh(const Tensor& a, const Tensor& w, const Tensor& info, bool vectors) override;                              \
  void svd(const Tensor& a, bool full_matrices, const Tensor& u, const Tensor& s, const Tensor& vh,                    \
           const Tensor& info) override;                                                                               \
  void qr_factor(const Tensor& a, const Tensor& tau) override;                                                         \
  void householder_product(const Tensor& reflectors, const Tensor& tau, const Tensor& q) override

// Note [Back-end registry]: one back end per device type, looked up by the tensors' device
// type whenever a native op runs a kernel. The built-in CPU and CUDA back ends are entered on
// first use (no static initializers, which a static link could drop); a program may enter its
// own back end for a device type, in place of the built-in one, before it makes tensors there.
Backend& backend(DeviceType type);
inline Backend& backend(Device device) { return backend(device.type); }
void register_backend(DeviceType type, Backend& backend);
// The built-in back ends: tensor/cpu/, and cuda/ (or cuda/stub_backend.cpp without CUDA).
Backend& cpu_backend();
Backend& cuda_backend();

}  // namespace ember
