#pragma once
// The CPU's convolution algorithms, between conv.cpp (which chooses) and the files that
// implement them: im2col + GEMM (conv.cpp) and the direct kernels (conv_direct.cpp; for int8,
// int8_conv.cpp and int8_conv_direct.cpp).
#include <array>
#include <cstdint>
#include <vector>

#include "ember/tensor/backend.h"

#ifdef EMBER_WITH_OPENMP
#include <omp.h>
#endif

namespace ember::cpu {

// The sizes of one convolution: input [N, C, H, W], weight [O, C / groups, kH, kW],
// output [N, O, Ho, Wo].
struct ConvShape {
  int64_t N, C, H, W, O, kH, kW, Ho, Wo;
};

// Whether the direct kernels compute this pass: stride 1 for all three; the backward passes
// also need the whole output gradient (conv_transpose2d's forward and weight gradient pass a
// smaller one when output_padding >= stride), and backward-data needs padding <= dilation *
// (kernel - 1), its padding as a convolution of the gradient.
bool direct_forward_applies(const ConvShape& s, const Conv2dParams& p);
bool direct_backward_data_applies(const ConvShape& s, const Conv2dParams& p);
bool direct_backward_weight_applies(const ConvShape& s, const Conv2dParams& p);

// The padded flat plane of one [C][H][W] input for a stride-1 convolution (Note [Direct
// convolution on a padded flat plane], conv_direct.h): rows Wp wide, Ho x Wo outputs, each tap
// one offset into the plane, x_plane elements per channel (for tiles of `width` elements).
struct FlatPlane {
  int64_t Wp, Ho, Wo, x_plane;
  std::vector<int64_t> tap_offset;
};
FlatPlane make_flat_plane(int64_t H, int64_t W, int64_t kH, int64_t kW, std::array<int64_t, 2> pad,
                          std::array<int64_t, 2> dil, int64_t width);

// The direct passes. T is float, or BFloat16 / Half (autocast's activations): the kernels then
// read every 16-bit value widened to float32 (exact) as they pad, pack or transpose it, compute
// in float32 as for float32 tensors, and round each result once as they store it, so a 16-bit
// pass gives the bits of the float32 pass on the widened tensors, rounded, without float32
// copies of them.
// y [N, O, Ho, Wo] (overwritten) from x, w and b (may be null).
template <class T>
void conv2d_direct(const T* x, const T* w, const T* b, T* y, const ConvShape& s, const Conv2dParams& p);
// dx [N, C, H, W] (overwritten) from dy [N, O, Ho, Wo] and w.
template <class T>
void conv2d_backward_data_direct(const T* dy, const T* w, T* dx, const ConvShape& s, const Conv2dParams& p);
// dw [O, C / groups, kH, kW] (overwritten) from x and dy.
template <class T>
void conv2d_backward_weight_direct(const T* x, const T* dy, T* dw, const ConvShape& s, const Conv2dParams& p);

// task(i, thread) for every i in [0, count): one task per thread at a time, each thread with
// its own workspace slot; serial with one thread.
template <class F>
void for_each_task(int64_t count, int threads, const F& task) {
  if (threads > 1) {
#ifdef EMBER_WITH_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < count; ++i) task(i, omp_get_thread_num());
    return;
#endif
  }
  for (int64_t i = 0; i < count; ++i) task(i, 0);
}

}  // namespace ember::cpu
