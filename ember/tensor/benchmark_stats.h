#pragma once
// What a back end's benchmark mode did (backends::cudnn, backends::cpu): how often it timed
// the algorithms for a new configuration, and how often it reused a cached choice, since the
// start or the last clear_benchmark_cache().
#include <cstdint>

namespace ember::backends {
struct BenchmarkStats {
  int64_t searches = 0, hits = 0;
};
}  // namespace ember::backends
