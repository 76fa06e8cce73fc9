#pragma once
// CUDA device queries. They answer 0 / false, never throw, on a machine without a
// GPU or driver, and in a build without CUDA.
namespace ember {
namespace cuda {
bool is_available();  // built with CUDA and at least one device present
int device_count();
bool built_with_cuda();
}  // namespace cuda
}  // namespace ember
