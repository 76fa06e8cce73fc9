#pragma once
// Checkpoints: modules, state dicts and optimizers to and from safetensors files, so that
// weights move between ember, PyTorch and the Hugging Face ecosystem.
//     ember::save(model, "model.safetensors");      ember::load(model, "model.safetensors");
//     ember::save(optimizer, "optim.safetensors");  ember::load(optimizer, "optim.safetensors");
#include <map>
#include <string>

#include "ember/io/safetensors.h"
#include "ember/nn/module.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/optimizer.h"

namespace ember {

void save(const StateDict& state, const std::string& path, const std::map<std::string, std::string>& metadata = {});
void save(const nn::Module& module, const std::string& path);
template <class Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  save(*module, path);
}
// The optimizer's tensors, with its scalars (options, steps) in the file's __metadata__.
void save(const optim::Optimizer& optimizer, const std::string& path);
// The same with a GradScaler's state beside it ("grad_scaler.<key>" in the metadata), so that a
// resumed float16 run goes on with the loss scale and growth tracker it had.
void save(const optim::Optimizer& optimizer, const amp::GradScaler& scaler, const std::string& path);

// One tensor, or a list of them, as LibTorch's torch::save(tensor, path) (safetensors here:
// the names "tensor", or "0", "1", ...; a PyTorch .pt archive is refused with how to convert it).
void save(const Tensor& tensor, const std::string& path);
void save(const std::vector<Tensor>& tensors, const std::string& path);
void load(Tensor& tensor, const std::string& path);                // a file of one tensor
void load(std::vector<Tensor>& tensors, const std::string& path);  // every tensor, in file order

StateDict load(const std::string& path);  // every tensor of the file, on the CPU
std::map<std::string, std::string> load_metadata(const std::string& path);
// Loads into the module's own tensors (see Module::load_state_dict for strict).
nn::Module::LoadResult load(nn::Module& module, const std::string& path, bool strict = true);
template <class Impl>
nn::Module::LoadResult load(const nn::ModuleHolder<Impl>& module, const std::string& path, bool strict = true) {
  return load(*module, path, strict);
}
void load(optim::Optimizer& optimizer, const std::string& path);
// Also restores the scaler when the file holds its state (an enabled scaler starts afresh from a
// file without it, e.g. from a run without --amp fp16).
void load(optim::Optimizer& optimizer, amp::GradScaler& scaler, const std::string& path);

}  // namespace ember
