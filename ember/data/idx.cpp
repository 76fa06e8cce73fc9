#include <cstring>
#include <filesystem>

#include "ember/data/gzip_file.h"
#include "ember/data/idx.h"
#include "ember/tensor/error.h"
#include "ember/tensor/ops.h"

namespace ember::data {

Tensor parse_idx(const uint8_t* data, size_t size, const std::string& source) {
  const IdxHeader h = parse_idx_header(data, size, source);
  Tensor t = empty(h.shape, h.dtype);
  const size_t bytes = size - h.data_offset, width = element_size(h.dtype);
  auto* out = static_cast<uint8_t*>(t.data_ptr());
  const uint8_t* in = data + h.data_offset;
  if (width == 1) {
    if (bytes > 0) std::memcpy(out, in, bytes);
  } else {
    for (size_t i = 0; i < bytes; i += width)  // big-endian to the host's little-endian
      for (size_t b = 0; b < width; ++b) out[i + b] = in[i + width - 1 - b];
  }
  return t;
}

Tensor read_idx(const std::string& path) {
  const std::string bytes = read_gzip_or_plain(path, size_t{4} << 30, "IDX");
  return parse_idx(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

namespace {

Tensor read_first_of(const std::string& root, const std::string& name) {
  for (const std::string& candidate : {root + "/" + name + ".gz", root + "/" + name}) {
    std::error_code ec;  // exists, not opened: opening a FIFO would block
    if (std::filesystem::exists(candidate, ec)) return read_idx(candidate);
  }
  throw Error("MNIST: neither '" + root + "/" + name + ".gz' nor '" + root + "/" + name +
              "' exists (download MNIST as in the README)");
}

}  // namespace

MNIST::MNIST(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const Tensor images = read_first_of(root, prefix + "-images-idx3-ubyte");
  const Tensor labels = read_first_of(root, prefix + "-labels-idx1-ubyte");
  EMBER_CHECK(images.dtype() == kUInt8 && images.dim() == 3 && images.size(1) == 28 && images.size(2) == 28,
              "MNIST: images in '", root, "' are ", images.dtype(), " ", shape_str(images.sizes()),
              ", expected uint8 [N, 28, 28]");
  EMBER_CHECK(labels.dtype() == kUInt8 && labels.dim() == 1 && labels.size(0) == images.size(0), "MNIST: labels in '",
              root, "' are ", labels.dtype(), " ", shape_str(labels.sizes()), " for ", images.size(0), " images");
  EMBER_CHECK(labels.numel() == 0 || labels.to(kInt64).max().item<int64_t>() <= 9, "MNIST: a label in '", root,
              "' is above 9");
  images_ = (images.to(kFloat32) / 255.0).unsqueeze(1);
  labels_ = labels.to(kInt64);
}

Example<> MNIST::get(int64_t index) const {
  check_index(index, "MNIST");
  return {images_[index], labels_[index]};
}

}  // namespace ember::data
