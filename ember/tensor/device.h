#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : int8_t { CPU, CUDA };
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

// A device: its type and, for CUDA, an ordinal. Device("cuda:1") parses like PyTorch.
struct Device {
  DeviceType type = kCPU;
  int index = 0;
  Device() = default;
  Device(DeviceType t, int i = 0);  // NOLINT: implicit so that kCUDA works where a Device is wanted
  explicit Device(const std::string& spec);
  bool is_cpu() const { return type == kCPU; }
  bool is_cuda() const { return type == kCUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace ember
