#pragma once
// The back ends' constructors (distributed/mpi.cpp and distributed/nccl.cpp, or the stubs
// distributed/no_mpi.cpp and distributed/no_nccl.cpp in builds without them), for
// init_process_group.
#include <memory>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options);
std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options);

}  // namespace ember::distributed
