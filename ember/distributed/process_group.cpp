// What every back end shares: the launcher's environment, the back-end choice, names.
#include "ember/distributed/process_group.h"

#include <cstdlib>

#include "ember/distributed/backends.h"
#include "ember/tensor/ops.h"

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

void check_reduction(const char* backend, DType dtype, ReduceOp op, const std::string& what) {
  EMBER_CHECK(op != ReduceOp::AVG || is_floating(dtype), "ProcessGroup(", backend, ").", what,
              ": avg needs a floating tensor, got ", dtype);
  EMBER_CHECK(dtype != kBool || op == ReduceOp::MAX || op == ReduceOp::MIN, "ProcessGroup(", backend, ").", what,
              ": a bool tensor reduces with max (any) or min (all) only");
}

void check_peer(const char* backend, int group_size, int rank, const std::string& what, const char* role) {
  EMBER_CHECK(rank >= 0 && rank < group_size, "ProcessGroup(", backend, ").", what, ": the ", role, " rank ", rank,
              " is outside the group of size ", group_size);
}

void check_group_ranks(const char* backend, int group_size, const std::vector<int>& ranks) {
  EMBER_CHECK(!ranks.empty(), "ProcessGroup(", backend, ").new_group: the list of ranks is empty");
  std::vector<bool> seen(static_cast<size_t>(group_size), false);
  for (int r : ranks) {
    check_peer(backend, group_size, r, "new_group", "member");
    EMBER_CHECK(!seen[static_cast<size_t>(r)], "ProcessGroup(", backend, ").new_group: rank ", r,
                " is in the list twice");
    seen[static_cast<size_t>(r)] = true;
  }
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>&) {
  throw Error("ProcessGroup(" + backend_name() + ").new_group: this back end cannot make subgroups yet");
}

std::vector<Spread> spread_over_ranks(ProcessGroup& group, const std::vector<int64_t>& values, Device device) {
  std::vector<int64_t> both;
  for (int64_t v : values) {
    both.push_back(v);
    both.push_back(-v);
  }
  Tensor extremes = tensor(both).to(device);
  group.all_reduce(extremes, ReduceOp::MAX)->wait();
  const std::vector<int64_t> e = extremes.to_vector<int64_t>();
  std::vector<Spread> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back({-e[2 * i + 1], e[2 * i]});
  return out;
}

Mesh2D mesh_2d(ProcessGroup& group, int row_size) {
  EMBER_CHECK(row_size >= 1 && group.size() % row_size == 0, "mesh_2d: a group of ", group.size(),
              " ranks does not divide into rows of ", row_size);
  const int rows = group.size() / row_size;
  Mesh2D mesh;
  for (int r = 0; r < rows; ++r) {  // every rank makes every group, in the same order
    std::vector<int> ranks;
    for (int c = 0; c < row_size; ++c) ranks.push_back(r * row_size + c);
    if (auto made = group.new_group(ranks)) mesh.row = made;
  }
  for (int c = 0; c < row_size; ++c) {
    std::vector<int> ranks;
    for (int r = 0; r < rows; ++r) ranks.push_back(r * row_size + c);
    if (auto made = group.new_group(ranks)) mesh.column = made;
  }
  return mesh;
}

void check_list(const char* backend, int group_size, const std::vector<Tensor>& list, const Tensor& like,
                const std::string& what, const char* name) {
  EMBER_CHECK(static_cast<int>(list.size()) == group_size, "ProcessGroup(", backend, ").", what, ": ", list.size(), " ",
              name, " for a group of size ", group_size);
  for (size_t r = 0; r < list.size(); ++r) {
    EMBER_CHECK(list[r].defined(), "ProcessGroup(", backend, ").", what, ": ", name, "[", r, "] is undefined");
    EMBER_CHECK(list[r].sizes() == like.sizes() && list[r].dtype() == like.dtype() && list[r].device() == like.device(),
                "ProcessGroup(", backend, ").", what, ": ", name, "[", r, "] is ", shape_str(list[r].sizes()), " ",
                list[r].dtype(), " on ", list[r].device(), ", expected ", shape_str(like.sizes()), " ", like.dtype(),
                " on ", like.device());
  }
}

Tensor gather_buffer(int group_size, const Tensor& input) {
  return empty({static_cast<int64_t>(group_size) * input.numel()}, TensorOptions(input.dtype()).device(input.device()));
}

std::function<void()> copy_out_of(Tensor buffer, std::vector<Tensor> outputs) {
  return [buffer = std::move(buffer), outputs = std::move(outputs)] {
    const int64_t n = buffer.numel() / static_cast<int64_t>(outputs.size());
    for (size_t r = 0; r < outputs.size(); ++r) {
      Tensor out = outputs[r];
      native::copy_(out, native::view(native::narrow(buffer, 0, static_cast<int64_t>(r) * n, n), out.sizes()));
    }
  };
}

Tensor scatter_buffer(const std::vector<Tensor>& inputs) {
  TensorList flat;
  for (const Tensor& t : inputs) flat.push_back(native::reshape(t, {-1}));
  return native::cat(flat, 0);
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, const ProcessGroupOptions& options) {
  EMBER_CHECK(options.timeout().count() > 0, "init_process_group: the timeout must be positive, got ",
              options.timeout().count(), " ms");
  if (backend == "mpi") return make_mpi_process_group(options);
  if (backend == "nccl") return make_nccl_process_group(options);
  throw Error("init_process_group: unknown back end '" + backend + "' (ember has \"mpi\" and \"nccl\")");
}

}  // namespace ember::distributed
