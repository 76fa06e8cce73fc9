#include "ember/tensor/generator.h"

namespace ember {

Generator& default_generator() {
  static Generator* instance = new Generator();
  return *instance;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ember
