#pragma once
// Shared libraries opened on first use. cuBLAS (with cuBLASLt, about 600 MB) and cuDNN take
// 0.4 s just to load, which every program linked with ember would pay at start-up, GPU or not;
// opened with dlopen when the first matmul or convolution runs on a GPU, they cost nothing
// elsewhere.
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "ember/tensor/error.h"

namespace ember::cuda {

class LazyLibrary {
 public:
  LazyLibrary(std::vector<std::string> names, const char* what) : names_(std::move(names)), what_(what) {}

  // The address of `symbol`; an ember::Error names the library and the symbol when either is missing.
  void* symbol(const char* symbol) {
    void* address = optional_symbol(symbol);
    EMBER_CHECK(address, what_, ": ", names_.front(), " has no symbol ", symbol);
    return address;
  }
  // ... or nullptr when this version of the library lacks it (a newer function).
  void* optional_symbol(const char* symbol) {
    std::call_once(opened_, [this] {
      for (const std::string& name : names_)
        if ((handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    });
    EMBER_CHECK(handle_, what_, ": cannot load ", names_.front(),
                " (is the CUDA toolkit's lib64 on the library path?)");
    return dlsym(handle_, symbol);
  }

 private:
  std::vector<std::string> names_;
  const char* what_;
  std::once_flag opened_;
  void* handle_ = nullptr;
};

}  // namespace ember::cuda
