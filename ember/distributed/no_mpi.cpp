// The MPI back end of a build without MPI: a clear error at use.
#include "ember/distributed/backends.h"

namespace ember::distributed {

bool is_mpi_available() { return false; }

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions&) {
  throw Error(
      "init_process_group: ember was built without MPI (install libopenmpi-dev and openmpi-bin, then configure "
      "again)");
}

}  // namespace ember::distributed
