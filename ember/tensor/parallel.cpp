#include "ember/tensor/parallel.h"

#include "ember/tensor/error.h"
#include "ember/tensor/ops.h"

namespace ember {

void set_num_threads(int n) {
  EMBER_CHECK(n >= 1, "set_num_threads: expected a positive number of threads, got ", n);
#ifdef EMBER_WITH_OPENMP
  // Per thread (an OpenMP ICV): a data-loader worker's set_num_threads(1) leaves the training
  // thread alone. Eigen is not told separately: it reads the same per-thread value.
  omp_set_num_threads(n);
#endif
}

int get_num_threads() { return parallel_threads(); }

}  // namespace ember
