// LibTorch's c10d names (c10d.h): each call is the ember ProcessGroup operation of the same meaning.
#include "ember/distributed/c10d.h"

namespace ember::distributed::c10d {
namespace {
const Tensor& one_tensor(const std::vector<Tensor>& tensors, const char* op) {
  EMBER_CHECK(tensors.size() == 1, "c10d ", op,
              ": takes a list of exactly one tensor (as LibTorch's MPI back end), got ", tensors.size());
  return tensors[0];
}
std::shared_ptr<Work> wrap(WorkPtr work) { return std::make_shared<Work>(std::move(work)); }
}  // namespace

std::shared_ptr<Work> ProcessGroup::allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& options) {
  return wrap(group_->all_reduce(one_tensor(tensors, "allreduce"), options.reduceOp));
}

std::shared_ptr<Work> ProcessGroup::broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& options) {
  EMBER_CHECK(options.rootTensor == 0, "c10d broadcast: rootTensor must be 0 for a list of one tensor, got ",
              options.rootTensor);
  return wrap(group_->broadcast(one_tensor(tensors, "broadcast"), static_cast<int>(options.rootRank)));
}

std::shared_ptr<Work> ProcessGroup::allgather(std::vector<std::vector<Tensor>>& outputs, std::vector<Tensor>& inputs,
                                              const AllgatherOptions&) {
  EMBER_CHECK(outputs.size() == 1, "c10d allgather: takes one list of outputs, got ", outputs.size());
  return wrap(group_->all_gather(outputs[0], one_tensor(inputs, "allgather")));
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(std::vector<Tensor>& outputs,
                                                   std::vector<std::vector<Tensor>>& inputs,
                                                   const ReduceScatterOptions& options) {
  EMBER_CHECK(inputs.size() == 1, "c10d reduce_scatter: takes one list of inputs, got ", inputs.size());
  return wrap(group_->reduce_scatter(one_tensor(outputs, "reduce_scatter"), inputs[0], options.reduceOp));
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions&) { return wrap(group_->barrier()); }

std::shared_ptr<Work> ProcessGroup::send(std::vector<Tensor>& tensors, int dstRank, int tag) {
  return wrap(group_->send(one_tensor(tensors, "send"), dstRank, tag));
}

std::shared_ptr<Work> ProcessGroup::recv(std::vector<Tensor>& tensors, int srcRank, int tag) {
  return wrap(group_->recv(one_tensor(tensors, "recv"), srcRank, tag));
}

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::createProcessGroupMPI(std::vector<int> ranks) {
  auto group = init_process_group("mpi");
  if (!ranks.empty()) {
    bool all = static_cast<int>(ranks.size()) == group->size();
    for (size_t i = 0; all && i < ranks.size(); ++i) all = ranks[i] == static_cast<int>(i);
    EMBER_CHECK(all,
                "c10d createProcessGroupMPI: groups of a subset of the ranks are not in ember; pass no ranks "
                "(every process of the job)");
  }
  return std::make_shared<ProcessGroupMPI>(std::move(group));
}

}  // namespace ember::distributed::c10d
