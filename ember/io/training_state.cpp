#include "ember/io/training_state.h"

#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ember/io/safetensors.h"
#include "ember/tensor/generator.h"

namespace ember {

namespace {

constexpr const char* kFormatKey = "ember.checkpoint";
constexpr const char* kCrcKey = "ember.crc32";
constexpr const char* kModel = "model/";
constexpr const char* kOptimizer = "optimizer/";
constexpr const char* kScaler = "grad_scaler/";
constexpr const char* kScheduler = "scheduler/";
constexpr const char* kLoaderEpoch = "loader/epoch";
constexpr const char* kLoaderBatch = "loader/batch";
constexpr const char* kGeneratorSeed = "generator/seed";
constexpr const char* kGeneratorOffset = "generator/offset";
constexpr const char* kRun = "run/";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
std::string without(const std::string& s, const char* prefix) {
  return s.substr(std::char_traits<char>::length(prefix));
}

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

template <class T>
T parse_integer(const std::string& text, const std::string& key, const std::string& source) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  EMBER_CHECK(ec == std::errc() && ptr == end && !text.empty(), "load_checkpoint: '", source, "' has a ",
              ec == std::errc::result_out_of_range ? "out-of-range" : "non-integer", " ", key, ": '", text, "'");
  return value;
}

double parse_double(const std::string& text, const std::string& key, const std::string& source) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(value), "load_checkpoint: '", source,
              "' has a ", std::isfinite(value) || end != text.c_str() + text.size() ? "non-numeric" : "non-finite", " ",
              key, ": '", text, "'");
  return value;
}

const std::string& required(const std::map<std::string, std::string>& meta, const char* key,
                            const std::string& source) {
  const auto it = meta.find(key);
  EMBER_CHECK(it != meta.end(), "load_checkpoint: '", source, "' has no '", key, "' (a damaged or foreign checkpoint)");
  return it->second;
}

}  // namespace

bool is_checkpoint(const std::map<std::string, std::string>& metadata) { return metadata.count(kFormatKey) != 0; }

int64_t TrainingState::get_int(const std::string& key, int64_t min, int64_t max) const {
  const auto it = values.find(key);
  EMBER_CHECK(it != values.end(), "load_checkpoint: '", source, "' has no value '", key, "'");
  const auto value = parse_integer<int64_t>(it->second, key, source);
  EMBER_CHECK(value >= min && value <= max, "load_checkpoint: '", source, "' has ", key, " = ", value, ", outside [",
              min, ", ", max, "] for this run");
  return value;
}

double TrainingState::get_double(const std::string& key) const {
  const auto it = values.find(key);
  EMBER_CHECK(it != values.end(), "load_checkpoint: '", source, "' has no value '", key, "'");
  return parse_double(it->second, key, source);
}

void save_checkpoint(const TrainingState& state, const std::string& path) {
  EMBER_CHECK(state.model != nullptr && state.optimizer != nullptr,
              "save_checkpoint: a TrainingState needs a model and an optimizer ('", path, "')");
  StateDict tensors{"checkpoint tensor"};
  std::map<std::string, std::string> meta{{"format", "pt"}, {kFormatKey, std::to_string(kCheckpointFormat)}};
  // Contiguous CPU copies now, so that the CRC is of the very bytes written.
  for (const auto& item : state.model->state_dict())
    tensors.insert(kModel + item.key(), item.value().detach().to(Device(kCPU)).contiguous());
  const optim::OptimizerState optimizer = state.optimizer->state_dict();
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
  }
  for (const auto& [key, value] : state.values) meta[kRun + key] = value;
  meta[kCrcKey] = std::to_string(data_crc(tensors));
  io::write_safetensors(path, tensors, meta);
}

void load_checkpoint(TrainingState& state, const std::string& path) {
  EMBER_CHECK(state.model != nullptr && state.optimizer != nullptr,
              "load_checkpoint: a TrainingState needs a model and an optimizer ('", path, "')");
  io::SafetensorsContents contents = io::read_safetensors(path);
  const auto& meta = contents.metadata;
  EMBER_CHECK(is_checkpoint(meta), "load_checkpoint: '", path, "' is not an ember training checkpoint (no '",
              kFormatKey,
              "' in its metadata): a model file holds weights only (ember::load(module, path)), and the "
              "two-file checkpoints of older ember versions cannot resume a run");
  const int format = parse_integer<int>(meta.at(kFormatKey), kFormatKey, path);
  EMBER_CHECK(format >= 1 && format <= kCheckpointFormat, "load_checkpoint: '", path, "' has checkpoint format ",
              format, "; this ember reads format ", kCheckpointFormat,
              format > kCheckpointFormat ? " (a newer ember wrote it)" : "");
  const auto crc = parse_integer<uint32_t>(required(meta, kCrcKey, path), kCrcKey, path);
  EMBER_CHECK(crc == data_crc(contents.tensors), "load_checkpoint: '", path,
              "' is damaged: the CRC-32 of its tensor data does not match the one it was saved with");

  // Everything parsed and checked before anything is changed.
  StateDict model{"model tensor"};
  optim::OptimizerState optimizer;
  for (const auto& item : contents.tensors) {
    if (starts_with(item.key(), kModel))
      model.insert(without(item.key(), kModel), item.value());
    else if (starts_with(item.key(), kOptimizer))
      optimizer.tensors.insert(without(item.key(), kOptimizer), item.value());
    else
      throw Error(detail::concat("load_checkpoint: '", path, "' has an unexpected tensor '", item.key(), "'"));
  }
  std::map<std::string, double> scaler, scheduler;
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : meta) {
    if (starts_with(key, kOptimizer)) optimizer.metadata[without(key, kOptimizer)] = value;
    if (starts_with(key, kScaler)) scaler[without(key, kScaler)] = parse_double(value, key, path);
    if (starts_with(key, kScheduler)) scheduler[without(key, kScheduler)] = parse_double(value, key, path);
    if (starts_with(key, kRun)) values[without(key, kRun)] = value;
  }
  const bool has_loader = meta.count(kLoaderEpoch) != 0;
  data::DataLoaderState position;
  if (has_loader) {
    position.epoch = parse_integer<int64_t>(meta.at(kLoaderEpoch), kLoaderEpoch, path);
    position.batch = parse_integer<int64_t>(required(meta, kLoaderBatch, path), kLoaderBatch, path);
  }
  EMBER_CHECK(!state.loader || has_loader, "load_checkpoint: '", path,
              "' holds no data-loader position; it cannot resume this run's loader");
  if (state.loader) {
    const int64_t batches = state.loader->size();
    EMBER_CHECK(position.epoch >= 0 && position.batch >= 0 && position.batch <= batches, "load_checkpoint: '", path,
                "' has loader position epoch ", position.epoch, " batch ", position.batch,
                ", which is not a position of this loader (", batches,
                " batches per epoch; a different batch size or dataset?)");
  }
  EMBER_CHECK(!state.scheduler || !scheduler.empty(), "load_checkpoint: '", path,
              "' has no LR scheduler state; resume with the schedule it was saved with");
  const bool has_generator = meta.count(kGeneratorSeed) != 0;
  uint64_t seed = 0, offset = 0;
  if (state.generator && has_generator) {
    seed = parse_integer<uint64_t>(meta.at(kGeneratorSeed), kGeneratorSeed, path);
    offset = parse_integer<uint64_t>(required(meta, kGeneratorOffset, path), kGeneratorOffset, path);
  }

  auto in_file = [&](auto&& apply) {
    try {
      apply();
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (loading '" + path + "')");
    }
  };
  in_file([&] { state.model->load_state_dict(model, /*strict=*/true); });
  in_file([&] { state.optimizer->load_state_dict(optimizer); });
  if (state.scaler && state.scaler->is_enabled() && !scaler.empty())
    in_file([&] { state.scaler->load_state_dict(scaler); });
  if (state.scheduler) in_file([&] { state.scheduler->load_state_dict(scheduler); });
  if (state.loader) state.loader->load_state_dict(position);
  if (state.generator && has_generator) default_generator().set_state(seed, offset);
  state.values = std::move(values);
  state.source = path;
}

}  // namespace ember
