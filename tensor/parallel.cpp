#include "tensor/parallel.h"

#include <Eigen/Core>

#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember {

void set_num_threads(int n) {
  EMBER_CHECK(n >= 1, "set_num_threads: expected a positive number of threads, got ", n);
#ifdef EMBER_WITH_OPENMP
  omp_set_num_threads(n);
#endif
  Eigen::setNbThreads(n);
}

int get_num_threads() { return parallel_threads(); }

}  // namespace ember
