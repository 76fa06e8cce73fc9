#pragma once
// Collective communication between processes (torch.distributed's ProcessGroup). Note
// [Process groups]: every rank runs the same program; a collective is called by every rank of
// the group, in the same order, with tensors of the same shape and dtype, and each call returns
// a Work handle at once. The result is in the tensors after wait(). The transport is an
// established engine, never ember's own: MPI (Open MPI, CPU tensors, processes launched by
// mpirun on one machine or many) and NCCL (CUDA tensors, one GPU per process, bootstrapped
// through MPI; wait() then orders the caller's stream after the operation without blocking the
// host, as PyTorch's does).
//
//     auto pg = distributed::init_process_group("mpi");   // rank and size from mpirun
//     Tensor t = full({4}, pg->rank());
//     pg->all_reduce(t)->wait();                          // t = 0 + 1 + ... on every rank
//
// A collective that does not complete within the group's timeout (a rank that never joins it)
// makes wait() throw an ember::Error naming the op and the rank, instead of hanging.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor/arg.h"
#include "ember/tensor/tensor.h"

namespace ember::distributed {

enum class ReduceOp : int8_t { SUM, AVG, MAX, MIN };  // AVG: floating tensors only
const char* reduce_op_name(ReduceOp op);

// The handle of one operation in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Whether it has finished (the tensors hold the result); never blocks.
  virtual bool is_completed() = 0;
  // Blocks until it has finished; throws an ember::Error naming the op and this rank when the
  // group's timeout passes first (the operation then stays in flight: wait() may be called again).
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

struct ProcessGroupOptions {
  // PyTorch's default for CPU back ends: 30 minutes.
  EMBER_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(30);
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  // Every tensor argument is contiguous, on a device the back end serves, of a dtype it carries.
  // tensor = op over every rank's tensor, in place.
  virtual WorkPtr all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM) = 0;
  // tensor = root's tensor, in place.
  virtual WorkPtr broadcast(const Tensor& tensor, int root = 0) = 0;
  // outputs[r] = rank r's input (size() outputs shaped like input).
  virtual WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output = op over every rank's inputs[rank()] (size() inputs shaped like output).
  virtual WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                 ReduceOp op = ReduceOp::SUM) = 0;
  virtual WorkPtr barrier() = 0;
  // Point to point: the tensor to rank `dst`, or into the tensor from rank `src`; `tag` pairs them.
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual WorkPtr recv(const Tensor& tensor, int src, int tag = 0) = 0;

  // A group of some of this group's ranks (torch.distributed.new_group), for 2-D parallelism:
  // every rank of this group calls it with the same `ranks`, in the same order as its other
  // calls. A member gets the new group, in which its rank is its position in `ranks`; the others
  // get nullptr. It blocks until every rank has called it. The MPI back end splits its
  // communicator (MPI_Comm_split), NCCL's too (ncclCommSplit, NCCL 2.18 or later).
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);
};

// The least and greatest of each value over the ranks of `group` (one all_reduce of (v, −v)
// under max; |v| < 2^63), to check that every rank passed the same: a collective.
// `device`: where the exchange runs (NCCL carries only GPU tensors).
struct Spread {
  int64_t min = 0, max = 0;
  bool same() const { return min == max; }
};
std::vector<Spread> spread_over_ranks(ProcessGroup& group, const std::vector<int64_t>& values,
                                      Device device = Device(kCPU));
// FNV-1a over 64-bit words, kept to 62 bits so that its negation fits: a fingerprint of what
// the ranks must agree on (a list of ranks, a model's names and shapes) for spread_over_ranks.
class Fingerprint {
 public:
  Fingerprint& add(uint64_t word) {
    hash_ = (hash_ ^ word) * 1099511628211ull;
    return *this;
  }
  int64_t value() const { return static_cast<int64_t>(hash_ >> 2); }

 private:
  uint64_t hash_ = 1469598103934665603ull;
};

// 2-D parallelism's subgroups of `group`, whose ranks are laid out as rows of `row_size`
// (rank = row · row_size + column), as torch's init_device_mesh((rows, row_size)) makes them:
// `row` is this rank's row (e.g. a pipeline of row_size stages), `column` its column (the rank
// at the same place in every row: the stage's data-parallel replicas). Every rank calls it.
struct Mesh2D {
  std::shared_ptr<ProcessGroup> row, column;
};
Mesh2D mesh_2d(ProcessGroup& group, int row_size);

// Where this process is in the job, as its launcher says: mpirun's OMPI_COMM_WORLD_* (or PMI_*)
// variables, else torchrun's RANK, WORLD_SIZE and LOCAL_RANK; a lone process is rank 0 of 1.
struct LaunchEnvironment {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string launcher;  // "mpirun", "torchrun" or "none"
};
LaunchEnvironment launch_environment();

// A process group over every process of the job. backend: "mpi" or "nccl" (which needs MPI to
// start). Throws an ember::Error naming what is missing when ember was built without it.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend = "mpi",
                                                 const ProcessGroupOptions& options = {});
bool is_mpi_available();   // whether ember was built with MPI
bool is_nccl_available();  // whether ember was built with NCCL (CUDA builds with nccl.h)

}  // namespace ember::distributed
