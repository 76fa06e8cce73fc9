#include "ember/tensor/device.h"

#include "ember/tensor/error.h"

namespace ember {

Device::Device(DeviceType t, int i) : type(t), index(i) {
  EMBER_CHECK(i >= 0, "Device: index must be non-negative, got ", i);
  EMBER_CHECK(t == kCUDA || i == 0, "Device: the CPU device has only index 0, got ", i);
}

Device::Device(const std::string& spec) {
  if (spec == "cpu") return;
  const std::string prefix = "cuda";
  EMBER_CHECK(spec.compare(0, prefix.size(), prefix) == 0, "Device: expected 'cpu', 'cuda' or 'cuda:N', got '", spec,
              "'");
  type = kCUDA;
  if (spec.size() == prefix.size()) return;
  EMBER_CHECK(spec[prefix.size()] == ':' && spec.size() > prefix.size() + 1 && spec.size() < prefix.size() + 6,
              "Device: expected 'cpu', 'cuda' or 'cuda:N', got '", spec, "'");
  int idx = 0;
  for (size_t i = prefix.size() + 1; i < spec.size(); ++i) {
    EMBER_CHECK(spec[i] >= '0' && spec[i] <= '9', "Device: bad device index in '", spec, "'");
    idx = idx * 10 + (spec[i] - '0');
  }
  index = idx;
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace ember
