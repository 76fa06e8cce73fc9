#include "ember/io/checkpoint.h"

#include "ember/io/training_state.h"

#include <cstdio>
#include <string>

namespace ember {

void save(const StateDict& state, const std::string& path, const std::map<std::string, std::string>& metadata) {
  io::write_safetensors(path, state, metadata);
}

void save(const nn::Module& module, const std::string& path) {
  io::write_safetensors(path, module.state_dict(), {{"format", "pt"}, {"producer", "ember"}});
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  const optim::OptimizerState state = optimizer.state_dict();
  io::write_safetensors(path, state.tensors, state.metadata);
}

namespace {
constexpr const char* kScalerPrefix = "grad_scaler.";
}  // namespace

void save(const optim::Optimizer& optimizer, const amp::GradScaler& scaler, const std::string& path) {
  optim::OptimizerState state = optimizer.state_dict();
  for (const auto& [key, value] : scaler.state_dict()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);  // exact: the scale after k backoffs is 2^-k S
    state.metadata[kScalerPrefix + key] = text;
  }
  io::write_safetensors(path, state.tensors, state.metadata);
}

StateDict load(const std::string& path) { return io::read_safetensors(path).tensors; }

void save(const Tensor& tensor, const std::string& path) {
  StateDict state;
  state.insert("tensor", tensor);
  io::write_safetensors(path, state, {{"format", "pt"}, {"producer", "ember"}});
}

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  StateDict state;
  for (size_t i = 0; i < tensors.size(); ++i) state.insert(std::to_string(i), tensors[i]);
  io::write_safetensors(path, state, {{"format", "pt"}, {"producer", "ember"}});
}

void load(Tensor& tensor, const std::string& path) {
  const StateDict state = load(path);
  EMBER_CHECK(state.size() == 1, "load: '", path, "' holds ", state.size(),
              " tensors; load(std::vector<Tensor>&, path) reads them all, load(path) by name");
  tensor = state.begin()->value();
}

void load(std::vector<Tensor>& tensors, const std::string& path) {
  tensors.clear();
  for (const auto& item : load(path)) tensors.push_back(item.value());
}

std::map<std::string, std::string> load_metadata(const std::string& path) {
  return io::read_safetensors(path).metadata;
}

nn::Module::LoadResult load(nn::Module& module, const std::string& path, bool strict) {
  try {
    io::SafetensorsContents contents = io::read_safetensors(path);
    if (!is_checkpoint(contents.metadata)) return module.load_state_dict(contents.tensors, strict);
    StateDict weights;  // a training checkpoint (Note [Training checkpoints]): its "model/" part
    for (const auto& item : contents.tensors)
      if (item.key().rfind("model/", 0) == 0) weights.insert(item.key().substr(6), item.value());
    return module.load_state_dict(weights, strict);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (loading '" + path + "')");
  }
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  io::SafetensorsContents contents = io::read_safetensors(path);
  optim::OptimizerState state;
  state.tensors = std::move(contents.tensors);
  state.metadata = std::move(contents.metadata);
  try {
    optimizer.load_state_dict(state);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (loading '" + path + "')");
  }
}

void load(optim::Optimizer& optimizer, amp::GradScaler& scaler, const std::string& path) {
  load(optimizer, path);
  std::map<std::string, double> state;
  for (const auto& [key, value] : load_metadata(path)) {
    if (key.rfind(kScalerPrefix, 0) != 0) continue;
    try {
      state[key.substr(std::char_traits<char>::length(kScalerPrefix))] = std::stod(value);
    } catch (const std::exception&) {
      throw Error(detail::concat("load: '", path, "' has a non-numeric ", key, ": '", value, "'"));
    }
  }
  if (state.empty() || !scaler.is_enabled()) return;
  try {
    scaler.load_state_dict(state);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (loading '" + path + "')");
  }
}

}  // namespace ember
