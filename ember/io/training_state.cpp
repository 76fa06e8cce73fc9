#include "ember/io/training_state.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

#include "ember/io/checkpoint_format.h"
#include "ember/io/model_parallel_state.h"
#include "ember/io/safetensors.h"
#include "ember/tensor/generator.h"

namespace ember {

namespace {

using namespace io::checkpoint_keys;

std::string exact(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);  // round-trips every double
  return text;
}

// CRC-32 (zlib's) of the tensors' bytes in order: a file cut short or damaged inside its data
// (which the safetensors layout check cannot see) is detected on load.
uint32_t data_crc(const StateDict& tensors) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& item : tensors) {
    const Tensor& t = item.value();
    const auto* p = static_cast<const Bytef*>(t.data_ptr());
    for (size_t left = t.nbytes(); left > 0;) {
      const uInt n = static_cast<uInt>(std::min<size_t>(left, size_t{1} << 30));
      crc = crc32(crc, p, n);
      p += n;
      left -= n;
    }
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

int64_t TrainingState::get_int(const std::string& key, int64_t min, int64_t max) const {
  const auto it = values.find(key);
  EMBER_CHECK(it != values.end(), "load_checkpoint: '", source, "' has no value '", key, "'");
  const int64_t value = io::parse_int64(it->second, key, source);
  EMBER_CHECK(value >= min && value <= max, "load_checkpoint: '", source, "' has ", key, " = ", value, ", outside [",
              min, ", ", max, "] for this run");
  return value;
}

double TrainingState::get_double(const std::string& key) const {
  const auto it = values.find(key);
  EMBER_CHECK(it != values.end(), "load_checkpoint: '", source, "' has no value '", key, "'");
  return io::parse_finite(it->second, key, source);
}

namespace {

// The file of `state` with the model's tensors `model` and the optimizer's state `optimizer`
// (the state's own, or the whole model's gathered over a group).
void write_checkpoint(const TrainingState& state, const StateDict& model, const optim::OptimizerState& optimizer,
                      const std::vector<std::pair<uint64_t, uint64_t>>& rank_generators, const std::string& path) {
  StateDict tensors{"checkpoint tensor"};
  std::map<std::string, std::string> meta{{"format", "pt"}, {kFormat, std::to_string(kCheckpointFormat)}};
  // Contiguous CPU copies now, so that the CRC is of the very bytes written.
  for (const auto& item : model)
    tensors.insert(kModel + item.key(), item.value().detach().to(Device(kCPU)).contiguous());
  for (const auto& item : optimizer.tensors)
    tensors.insert(kOptimizer + item.key(), item.value().detach().to(Device(kCPU)).contiguous());
  for (const auto& [key, value] : optimizer.metadata) meta[kOptimizer + key] = value;
  if (state.scaler)
    for (const auto& [key, value] : state.scaler->state_dict()) meta[kScaler + key] = exact(value);
  if (state.scheduler)
    for (const auto& [key, value] : state.scheduler->state_dict()) meta[kScheduler + key] = exact(value);
  if (state.loader) {
    const data::DataLoaderState position = state.loader->state_dict();
    meta[kLoaderEpoch] = std::to_string(position.epoch);
    meta[kLoaderBatch] = std::to_string(position.batch);
  }
  if (state.generator) {
    meta[kGeneratorSeed] = std::to_string(default_generator().seed());
    meta[kGeneratorOffset] = std::to_string(default_generator().offset());
    std::string ranks;
    for (const auto& [seed, offset] : rank_generators)
      ranks += (ranks.empty() ? "" : ",") + std::to_string(seed) + ":" + std::to_string(offset);
    if (!ranks.empty()) meta[kGeneratorRanks] = ranks;
  }
  for (const auto& [key, value] : state.values) meta[kRun + key] = value;
  meta[kCrc] = std::to_string(data_crc(tensors));
  io::write_safetensors(path, tensors, meta);
}

}  // namespace

void save_checkpoint(const TrainingState& state, const std::string& path) {
  EMBER_CHECK(state.model != nullptr && state.optimizer != nullptr,
              "save_checkpoint: a TrainingState needs a model and an optimizer ('", path, "')");
  if (!state.group) return write_checkpoint(state, state.model->state_dict(), state.optimizer->state_dict(), {}, path);
  // Note [Model-parallel checkpoints]: the pieces to rank 0, which writes; a failure anywhere is every rank's.
  const std::string what = "save_checkpoint('" + path + "')";
  const io::ModelParallelLayout layout = io::agree_layout(state, what);
  io::GatheredState gathered = io::gather_state(state, layout);
  io::on_every_rank(state, what, [&] {
    if (state.group->rank() != 0) return;
    const optim::OptimizerState optimizer = io::merge_optimizer_state(gathered, layout);
    write_checkpoint(state, gathered.model, optimizer, gathered.generators, path);
  });
}

void load_checkpoint(TrainingState& state, const std::string& path) {
  EMBER_CHECK(state.model != nullptr && state.optimizer != nullptr,
              "load_checkpoint: a TrainingState needs a model and an optimizer ('", path, "')");
  // Everything parsed and checked before anything is changed.
  io::CheckpointMetadata meta;
  StateDict model{"model tensor"};
  optim::OptimizerState optimizer;
  auto read = [&] {
    io::SafetensorsContents contents = io::read_safetensors(path);
    meta = io::parse_checkpoint_metadata(contents.metadata, path);
    EMBER_CHECK(meta.crc == data_crc(contents.tensors), "load_checkpoint: '", path,
                "' is damaged: the CRC-32 of its tensor data does not match the one it was saved with");
    optimizer.metadata = meta.optimizer;
    for (const auto& item : contents.tensors) {
      const std::string& key = item.key();
      if (key.rfind(kModel, 0) == 0)
        model.insert(key.substr(std::char_traits<char>::length(kModel)), item.value());
      else if (key.rfind(kOptimizer, 0) == 0)
        optimizer.tensors.insert(key.substr(std::char_traits<char>::length(kOptimizer)), item.value());
      else
        throw Error(detail::concat("load_checkpoint: '", path, "' has an unexpected tensor '", key, "'"));
    }
    EMBER_CHECK(!state.loader || meta.has_loader, "load_checkpoint: '", path,
                "' holds no data-loader position; it cannot resume this run's loader");
    if (state.loader) {
      const int64_t batches = state.loader->size();
      EMBER_CHECK(meta.loader_batch <= batches, "load_checkpoint: '", path, "' has loader position epoch ",
                  meta.loader_epoch, " batch ", meta.loader_batch, ", which is not a position of this loader (",
                  batches, " batches per epoch; a different batch size or dataset?)");
    }
    EMBER_CHECK(!state.scheduler || !meta.scheduler.empty(), "load_checkpoint: '", path,
                "' has no LR scheduler state; resume with the schedule it was saved with");
  };
  std::pair<uint64_t, uint64_t> generator;  // the default generator's state to restore
  if (!state.group) {
    read();
    generator = {meta.generator_seed, meta.generator_offset};
  } else {
    // Note [Model-parallel checkpoints]: every rank reads the whole file and keeps its stage's
    // part of the optimizer state; a rank that cannot read it fails every rank.
    const std::string what = "load_checkpoint('" + path + "')";
    io::on_every_rank(state, what, read);
    const io::ModelParallelLayout layout = io::agree_layout(state, what);
    io::on_every_rank(state, what, [&] { optimizer = io::stage_optimizer_state(optimizer, layout, state, path); });
    const size_t rank = static_cast<size_t>(state.group->rank());
    const bool same_ranks = meta.rank_generators.size() == static_cast<size_t>(state.group->size());
    generator = same_ranks ? meta.rank_generators[rank] : std::make_pair(meta.generator_seed, meta.generator_offset);
  }
  const data::DataLoaderState position{meta.loader_epoch, meta.loader_batch};

  auto in_file = [&](auto&& apply) {
    try {
      apply();
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (loading '" + path + "')");
    }
  };
  in_file([&] { state.model->load_state_dict(model, /*strict=*/true); });
  in_file([&] { state.optimizer->load_state_dict(optimizer); });
  if (state.scaler && state.scaler->is_enabled() && !meta.scaler.empty())
    in_file([&] { state.scaler->load_state_dict(meta.scaler); });
  if (state.scheduler) in_file([&] { state.scheduler->load_state_dict(meta.scheduler); });
  if (state.loader) state.loader->load_state_dict(position);
  if (state.generator && meta.has_generator) default_generator().set_state(generator.first, generator.second);
  state.values = meta.values;
  state.source = path;
}

}  // namespace ember
