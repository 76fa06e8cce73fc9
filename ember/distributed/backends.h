#pragma once
// The back ends' constructors (distributed/mpi.cpp and distributed/nccl.cpp; in builds without
// MPI or NCCL, distributed/no_mpi.cpp and distributed/no_nccl.cpp, which throw an error naming
// what is missing), for init_process_group.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options);
std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options);

// What every back end checks and stages the same way (distributed/process_group.cpp). Messages
// start "ProcessGroup(<backend>).<what>: ".
void check_reduction(const char* backend, DType dtype, ReduceOp op, const std::string& what);
void check_peer(const char* backend, int group_size, int rank, const std::string& what, const char* role);
// new_group's `ranks`: some, each once, each in [0, group_size).
void check_group_ranks(const char* backend, int group_size, const std::vector<int>& ranks);
// `list` holds group_size tensors of `like`'s shape, dtype and device.
void check_list(const char* backend, int group_size, const std::vector<Tensor>& list, const Tensor& like,
                const std::string& what, const char* name);
// all_gather: one buffer of group_size slots of `input`, and the copy of each slot to its output.
Tensor gather_buffer(int group_size, const Tensor& input);
std::function<void()> copy_out_of(Tensor buffer, std::vector<Tensor> outputs);
// reduce_scatter: the inputs back to back, rank r's block at r · numel.
Tensor scatter_buffer(const std::vector<Tensor>& inputs);

}  // namespace ember::distributed
