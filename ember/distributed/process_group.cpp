// What every back end shares: the launcher's environment, the back-end choice, names.
#include "ember/distributed/process_group.h"

#include <cstdlib>

#include "ember/distributed/backends.h"

namespace ember::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "sum";
    case ReduceOp::AVG:
      return "avg";
    case ReduceOp::MAX:
      return "max";
    case ReduceOp::MIN:
      return "min";
  }
  return "?";
}

namespace {
// The integer in environment variable `name`, or `fallback` when it is not set; a set variable
// that is not a non-negative integer is an error (a misconfigured launch must not run as rank 0).
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  EMBER_CHECK(*text != '\0' && *end == '\0' && value >= 0 && value < (1 << 24), "distributed: environment variable ",
              name, "='", text, "' is not a non-negative integer");
  return static_cast<int>(value);
}
}  // namespace

LaunchEnvironment launch_environment() {
  LaunchEnvironment env;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    env.launcher = "mpirun";
    env.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    env.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    env.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  } else if (std::getenv("PMI_SIZE") != nullptr) {  // MPICH's launchers
    env.launcher = "mpirun";
    env.rank = env_int("PMI_RANK", 0);
    env.world_size = env_int("PMI_SIZE", 1);
    env.local_rank = env_int("MPI_LOCALRANKID", 0);
  } else if (std::getenv("WORLD_SIZE") != nullptr) {
    env.launcher = "torchrun";
    env.rank = env_int("RANK", 0);
    env.world_size = env_int("WORLD_SIZE", 1);
    env.local_rank = env_int("LOCAL_RANK", 0);
  } else {
    env.launcher = "none";
  }
  EMBER_CHECK(env.world_size >= 1 && env.rank < env.world_size, "distributed: rank ", env.rank,
              " is outside a world of size ", env.world_size, " (from ", env.launcher, "'s environment)");
  return env;
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, const ProcessGroupOptions& options) {
  EMBER_CHECK(options.timeout().count() > 0, "init_process_group: the timeout must be positive, got ",
              options.timeout().count(), " ms");
  if (backend == "mpi") return make_mpi_process_group(options);
  if (backend == "nccl") return make_nccl_process_group(options);
  throw Error("init_process_group: unknown back end '" + backend + "' (ember has \"mpi\" and \"nccl\")");
}

}  // namespace ember::distributed
