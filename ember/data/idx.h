#pragma once
// The IDX format of MNIST and Fashion-MNIST (gzipped or not): bytes 0-1 zero, byte 2 the
// element type (0x08 uint8, 0x09 int8, 0x0C int32, 0x0D float32, 0x0E float64), byte 3 the
// number of dimensions, then each dimension as a big-endian u32, then the big-endian data.
// Reading validates everything before it touches the data: a bad file is an ember::Error
// naming the file and the problem, never a crash or an over-read (fuzzed: fuzz/fuzz_idx.cpp).
#include <cstdint>
#include <string>

#include "ember/data/dataset.h"

namespace ember::data {

struct IdxHeader {
  DType dtype;
  Shape shape;
  size_t data_offset = 0;  // where the data starts (4 + 4 * ndim)
};

// Parses and checks the header of a whole (decompressed) IDX file held in memory; the data
// must be exactly what the header describes.
IdxHeader parse_idx_header(const uint8_t* data, size_t size, const std::string& source);
Tensor parse_idx(const uint8_t* data, size_t size, const std::string& source);
// Reads an IDX file, gzipped (.gz, through zlib) or not; at most 4 GiB decompressed.
Tensor read_idx(const std::string& path);

// MNIST or Fashion-MNIST from the four files in `root` (train-images-idx3-ubyte[.gz], ...):
// data [1, 28, 28] float32 in [0, 1], target int64 in [0, 9].
class MNIST : public Dataset {
 public:
  MNIST(const std::string& root, bool train);
  int64_t size() const override { return images_.size(0); }
  Example<> get(int64_t index) const override;
  const Tensor& images() const { return images_; }  // [N, 1, 28, 28] float32
  const Tensor& labels() const { return labels_; }  // [N] int64

 private:
  Tensor images_, labels_;
};

}  // namespace ember::data
