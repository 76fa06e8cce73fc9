#pragma once
// The embedding program's own data/dataset.h: the same path as one of ember's headers, which
// must not matter, since ember's headers are reachable only as <ember/...>.
#include <vector>

namespace app {
struct Dataset {
  std::vector<float> values{0, 1, 2, 3, 4, 5};
};
}  // namespace app
