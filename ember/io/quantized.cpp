#include "ember/io/quantized.h"

#include "ember/io/safetensors.h"
#include "ember/tensor/ops.h"

namespace ember::io {
namespace {

QDType qdtype_from(const std::string& name, const std::string& what) {
  for (QDType t : {QDType::QInt8, QDType::QUInt8, QDType::QInt32})
    if (name == qdtype_name(t)) return t;
  throw Error(what + ": unknown quantized dtype '" + name + "' (qint8, quint8 or qint32)");
}

}  // namespace

void save_quantized(const OrderedDict<QTensor>& tensors, const std::string& path) {
  OrderedDict<Tensor> parts("tensor");
  std::map<std::string, std::string> metadata{{"producer", "ember"}, {"format", "ember-quantized"}};
  for (const auto& item : tensors) {
    const QTensor& q = item.value();
    EMBER_CHECK(q.defined(), "save_quantized: '", item.key(), "' is undefined (", path, ")");
    const bool per_channel = q.qscheme() == QScheme::PerChannelAffine;
    parts.insert(item.key(), q.int_repr());
    parts.insert(item.key() + ".scale", per_channel ? q.q_per_channel_scales() : full({1}, q.q_scale()));
    parts.insert(item.key() + ".zero_point", per_channel ? q.q_per_channel_zero_points()
                                                         : full({1}, q.q_zero_point(), TensorOptions().dtype(kInt32)));
    metadata[item.key() + ".qdtype"] = qdtype_name(q.dtype());
    metadata[item.key() + ".axis"] = std::to_string(per_channel ? q.q_per_channel_axis() : -1);
  }
  write_safetensors(path, parts, metadata);
}

OrderedDict<QTensor> load_quantized(const std::string& path) {
  SafetensorsContents contents = read_safetensors(path);
  OrderedDict<QTensor> out("quantized tensor");
  for (const auto& [key, value] : contents.metadata) {
    const std::string suffix = ".qdtype";
    if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string name = key.substr(0, key.size() - suffix.size());
    const std::string what = "load_quantized: '" + name + "' in " + path;
    const Tensor* ints = contents.tensors.find(name);
    const Tensor* scale = contents.tensors.find(name + ".scale");
    const Tensor* zero_point = contents.tensors.find(name + ".zero_point");
    EMBER_CHECK(ints && scale && zero_point, what, ": the integers, '.scale' and '.zero_point' must all be present");
    const auto axis_it = contents.metadata.find(name + ".axis");
    EMBER_CHECK(axis_it != contents.metadata.end(), what, ": the metadata lacks '", name, ".axis'");
    int64_t axis = 0;
    try {
      size_t used = 0;
      axis = std::stoll(axis_it->second, &used);
      EMBER_CHECK(used == axis_it->second.size(), "");
    } catch (const std::exception&) {
      throw Error(what + ": the axis '" + axis_it->second + "' is not an integer");
    }
    EMBER_CHECK(axis >= -1 && axis < std::max<int64_t>(ints->dim(), 1), what, ": axis ", axis,
                " is out of range for shape ", shape_str(ints->sizes()));
    try {
      out.insert(name, QTensor(*ints, *scale, *zero_point, axis, qdtype_from(value, what)));
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
  }
  return out;
}

}  // namespace ember::io
