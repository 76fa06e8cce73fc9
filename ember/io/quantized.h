#pragma once
// Quantized tensors in safetensors files: each QTensor `name` is stored as its integers under
// `name`, its scales under `name.scale` and its zero points under `name.zero_point`, with
// "name.qdtype" (qint8, quint8, qint32) and "name.axis" (-1 per tensor) in the metadata. A file
// stays readable by any safetensors reader (PyTorch's `safetensors.torch.load_file` gives the
// three tensors); loading checks that every part is there and consistent.
//     io::save_quantized({{"fc.weight", q}}, "int8.safetensors");
//     OrderedDict<QTensor> back = io::load_quantized("int8.safetensors");
#include <string>

#include "ember/tensor/ordered_dict.h"
#include "ember/tensor/quantized.h"

namespace ember::io {

void save_quantized(const OrderedDict<QTensor>& tensors, const std::string& path);
OrderedDict<QTensor> load_quantized(const std::string& path);

}  // namespace ember::io
