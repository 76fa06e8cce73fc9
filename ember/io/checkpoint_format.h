#pragma once
// The metadata of a training checkpoint (Note [Training checkpoints]): its keys, and a parser
// that checks every value before load_checkpoint changes anything. It depends on nothing but
// the error type, so the checkpoint fuzz target links it alone.
//
//   ember.checkpoint     format version (kCheckpointFormat)
//   ember.crc32          CRC-32 of the tensor data, in header order
//   optimizer/<key>      the optimizer's own metadata (OptimizerState::metadata)
//   grad_scaler/<key>    GradScaler::state_dict()          scheduler/<key>  LRScheduler::state_dict()
//   loader/epoch, loader/batch                             DataLoader::state_dict()
//   generator/seed, generator/offset                       the default generator's state
//   generator/ranks      "seed:offset,..." each rank's, for a model-parallel run (rank 0's above)
//   run/<key>            the program's own values (TrainingState::values)
// Tensors: "model/<name>" (the module's state dict) and "optimizer/<name>".
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ember::io {

constexpr int kCheckpointFormat = 1;

namespace checkpoint_keys {
constexpr const char* kFormat = "ember.checkpoint";
constexpr const char* kCrc = "ember.crc32";
constexpr const char* kModel = "model/";
constexpr const char* kOptimizer = "optimizer/";
constexpr const char* kScaler = "grad_scaler/";
constexpr const char* kScheduler = "scheduler/";
constexpr const char* kLoaderEpoch = "loader/epoch";
constexpr const char* kLoaderBatch = "loader/batch";
constexpr const char* kGeneratorSeed = "generator/seed";
constexpr const char* kGeneratorOffset = "generator/offset";
constexpr const char* kGeneratorRanks = "generator/ranks";
constexpr const char* kRun = "run/";
}  // namespace checkpoint_keys

struct CheckpointMetadata {
  int format = 0;
  uint32_t crc = 0;
  std::map<std::string, std::string> optimizer, values;  // prefixes removed
  std::map<std::string, double> scaler, scheduler;
  bool has_loader = false, has_generator = false;
  int64_t loader_epoch = 0, loader_batch = 0;  // >= 0
  uint64_t generator_seed = 0, generator_offset = 0;
  std::vector<std::pair<uint64_t, uint64_t>> rank_generators;  // (seed, offset) per rank; may be empty
};

// Whether a file's metadata says it is a training checkpoint.
bool is_checkpoint(const std::map<std::string, std::string>& metadata);
// Parses and checks the metadata of checkpoint `source`: an ember::Error names the file, the
// key and the value for a missing or non-numeric entry, a negative position, a newer format.
CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& metadata,
                                             const std::string& source);

// Strict parsers of one value (the whole text, no trailing characters); errors name the key.
int64_t parse_int64(const std::string& text, const std::string& key, const std::string& source);
uint64_t parse_uint64(const std::string& text, const std::string& key, const std::string& source);
double parse_finite(const std::string& text, const std::string& key, const std::string& source);

}  // namespace ember::io
