#include "ember/io/checkpoint_format.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "ember/tensor/error.h"

namespace ember::io {

namespace {

using namespace checkpoint_keys;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
std::string without(const std::string& s, const char* prefix) {
  return s.substr(std::char_traits<char>::length(prefix));
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

const std::string& required(const std::map<std::string, std::string>& meta, const char* key,
                            const std::string& source) {
  const auto it = meta.find(key);
  EMBER_CHECK(it != meta.end(), "load_checkpoint: '", source, "' has no '", key, "' (a damaged or foreign checkpoint)");
  return it->second;
}

}  // namespace

int64_t parse_int64(const std::string& text, const std::string& key, const std::string& source) {
  return parse_integer<int64_t>(text, key, source);
}
uint64_t parse_uint64(const std::string& text, const std::string& key, const std::string& source) {
  return parse_integer<uint64_t>(text, key, source);
}

double parse_finite(const std::string& text, const std::string& key, const std::string& source) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const bool whole = !text.empty() && end == text.c_str() + text.size();
  EMBER_CHECK(whole && std::isfinite(value), "load_checkpoint: '", source, "' has a ",
              whole ? "non-finite" : "non-numeric", " ", key, ": '", text, "'");
  return value;
}

bool is_checkpoint(const std::map<std::string, std::string>& metadata) { return metadata.count(kFormat) != 0; }

CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& meta,
                                             const std::string& source) {
  EMBER_CHECK(is_checkpoint(meta), "load_checkpoint: '", source, "' is not an ember training checkpoint (no '", kFormat,
              "' in its metadata): a model file holds weights only (ember::load(module, path)), and the "
              "two-file checkpoints of older ember versions cannot resume a run");
  CheckpointMetadata out;
  const int64_t format = parse_int64(meta.at(kFormat), kFormat, source);
  EMBER_CHECK(format >= 1 && format <= kCheckpointFormat, "load_checkpoint: '", source, "' has checkpoint format ",
              format, "; this ember reads format ", kCheckpointFormat,
              format > kCheckpointFormat ? " (a newer ember wrote it)" : "");
  out.format = static_cast<int>(format);
  out.crc = parse_integer<uint32_t>(required(meta, kCrc, source), kCrc, source);
  for (const auto& [key, value] : meta) {
    if (starts_with(key, kOptimizer)) out.optimizer[without(key, kOptimizer)] = value;
    if (starts_with(key, kScaler)) out.scaler[without(key, kScaler)] = parse_finite(value, key, source);
    if (starts_with(key, kScheduler)) out.scheduler[without(key, kScheduler)] = parse_finite(value, key, source);
    if (starts_with(key, kRun)) out.values[without(key, kRun)] = value;
  }
  out.has_loader = meta.count(kLoaderEpoch) != 0 || meta.count(kLoaderBatch) != 0;
  if (out.has_loader) {
    out.loader_epoch = parse_int64(required(meta, kLoaderEpoch, source), kLoaderEpoch, source);
    out.loader_batch = parse_int64(required(meta, kLoaderBatch, source), kLoaderBatch, source);
    EMBER_CHECK(out.loader_epoch >= 0 && out.loader_batch >= 0, "load_checkpoint: '", source,
                "' has loader position epoch ", out.loader_epoch, " batch ", out.loader_batch,
                ", which is not a position of this loader (negative)");
  }
  out.has_generator = meta.count(kGeneratorSeed) != 0 || meta.count(kGeneratorOffset) != 0;
  if (out.has_generator) {
    out.generator_seed = parse_uint64(required(meta, kGeneratorSeed, source), kGeneratorSeed, source);
    out.generator_offset = parse_uint64(required(meta, kGeneratorOffset, source), kGeneratorOffset, source);
  }
  if (const auto ranks = meta.find(kGeneratorRanks); ranks != meta.end()) {
    const std::string& text = ranks->second;
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find(',', start);
      if (end == std::string::npos) end = text.size();
      const std::string item = text.substr(start, end - start);
      const size_t colon = item.find(':');
      EMBER_CHECK(colon != std::string::npos, "load_checkpoint: '", source, "' has ", kGeneratorRanks, " = '", text,
                  "', not a list of seed:offset");
      out.rank_generators.emplace_back(parse_uint64(item.substr(0, colon), kGeneratorRanks, source),
                                       parse_uint64(item.substr(colon + 1), kGeneratorRanks, source));
      start = end + 1;
    }
  }
  return out;
}

}  // namespace ember::io
