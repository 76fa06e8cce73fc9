// The NCCL back end of a build without CUDA or without NCCL's header: a clear error at use.
#include "ember/distributed/backends.h"

namespace ember::distributed {

bool is_nccl_available() { return false; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions&) {
  throw Error(
      "init_process_group(\"nccl\"): ember was built without NCCL (it needs the CUDA toolkit and nccl.h when "
      "configuring)");
}

}  // namespace ember::distributed
