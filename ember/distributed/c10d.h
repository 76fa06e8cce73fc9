#pragma once
// LibTorch's c10d names for ember's process groups, so that a LibTorch distributed program
// ports (ember/torch.h makes `c10d` this namespace):
//
//   auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
//   std::vector<torch::Tensor> grads = {param.grad()};
//   pg->allreduce(grads)->wait();  // summed over the ranks
//
// Each call is the ProcessGroup operation of the same meaning (process_group.h); as in
// LibTorch's MPI back end, a call takes one tensor (a list of one), and an error says so.
#include <memory>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember::distributed::c10d {

using ReduceOp = distributed::ReduceOp;  // c10d::ReduceOp::SUM, AVG, MAX, MIN

struct AllreduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
};
struct BroadcastOptions {
  int64_t rootRank = 0;
  int64_t rootTensor = 0;
};
struct AllgatherOptions {};
struct ReduceScatterOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
};
struct BarrierOptions {};

// LibTorch's Work: wait() blocks (and returns true), isCompleted() polls.
class Work {
 public:
  explicit Work(WorkPtr work) : work_(std::move(work)) {}
  bool wait() {
    work_->wait();
    return true;
  }
  bool isCompleted() { return work_->is_completed(); }

 private:
  WorkPtr work_;
};

class ProcessGroup {
 public:
  explicit ProcessGroup(std::shared_ptr<distributed::ProcessGroup> group) : group_(std::move(group)) {}
  virtual ~ProcessGroup() = default;
  int getRank() const { return group_->rank(); }
  int getSize() const { return group_->size(); }
  std::shared_ptr<Work> allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& options = {});
  std::shared_ptr<Work> broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& options = {});
  // outputs[0][r] = rank r's inputs[0].
  std::shared_ptr<Work> allgather(std::vector<std::vector<Tensor>>& outputs, std::vector<Tensor>& inputs,
                                  const AllgatherOptions& options = {});
  // outputs[0] = the reduction over the ranks of their inputs[0][rank].
  std::shared_ptr<Work> reduce_scatter(std::vector<Tensor>& outputs, std::vector<std::vector<Tensor>>& inputs,
                                       const ReduceScatterOptions& options = {});
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});
  std::shared_ptr<Work> send(std::vector<Tensor>& tensors, int dstRank, int tag);
  std::shared_ptr<Work> recv(std::vector<Tensor>& tensors, int srcRank, int tag);
  // ember's group underneath (for DistributedDataParallel and the rest of ember's API).
  const std::shared_ptr<distributed::ProcessGroup>& group() const { return group_; }

 private:
  std::shared_ptr<distributed::ProcessGroup> group_;
};

class ProcessGroupMPI : public ProcessGroup {
 public:
  using ProcessGroup::ProcessGroup;
  // Every process of the job (mpirun's). A subset of ranks is not in ember: an error says so.
  static std::shared_ptr<ProcessGroupMPI> createProcessGroupMPI(std::vector<int> ranks = {});
};

}  // namespace ember::distributed::c10d
