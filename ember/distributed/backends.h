#pragma once
// The back ends' constructors (distributed/mpi.cpp, or distributed/no_mpi.cpp in a build
// without MPI), for init_process_group.
#include <memory>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options);

}  // namespace ember::distributed
