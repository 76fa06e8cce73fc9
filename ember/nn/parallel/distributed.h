#pragma once
// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel), which LibTorch's C++ API
// lacks: every rank holds a replica of the model and trains on its own shard of each batch; the
// gradients are averaged over the ranks during backward, so every replica takes the same step.
//
//     auto pg = distributed::init_process_group("mpi");
//     nn::DistributedDataParallel ddp(model.ptr(), pg);    // rank 0's weights everywhere
//     optim::SGD opt(ddp->parameters(), ...);
//     loss_fn(ddp(x_shard), y_shard).backward();            // gradients = the mean over ranks
//     opt.step();
//
// Note [DDP reducer]: the gradients are grouped into buckets — flat buffers, filled in reverse
// registration order (the last layers' gradients are ready first), the first bucket capped at
// first_bucket_cap_mb so that communication starts early, the others at bucket_cap_mb. A
// post-accumulate-grad hook on each parameter copies its gradient into its bucket and points
// .grad at that slot (the gradient is a view into the bucket: no copy back after the reduce);
// when a bucket's last gradient has arrived, its all-reduce (average) is launched at once,
// buckets always in the same order on every rank, so communication overlaps the rest of
// backward. A callback at the end of backward (autograd::queue_callback) waits for them all.
// Differences from PyTorch: PyTorch fills its buckets in registration order and reverses the
// list, so its small first bucket holds the first layers and goes last; ember fills them in
// reverse order, so the small bucket holds the last layers and goes first, as intended. Unused
// parameters (find_unused_parameters) are found at the end of backward rather than by walking
// the graph after forward: the result is the same, their buckets just start later.
#include <memory>
#include <vector>

#include "ember/distributed/process_group.h"
#include "ember/nn/module.h"

namespace ember::nn {

struct DistributedDataParallelOptions {
  EMBER_ARG(double, bucket_cap_mb) = 25.0;
  EMBER_ARG(double, first_bucket_cap_mb) = 1.0;
  // Parameters that may get no gradient in a backward (a branch not taken): without this, such
  // a backward is an error naming them; with it, they are detected, and a parameter no rank used
  // keeps its .grad untouched.
  EMBER_ARG(bool, find_unused_parameters) = false;
  // Rank 0's buffers (batch norm's running statistics) to every rank before each training forward.
  EMBER_ARG(bool, broadcast_buffers) = true;
};

class DistributedDataParallelImpl : public Module {
 public:
  DistributedDataParallelImpl(std::shared_ptr<Module> module, std::shared_ptr<distributed::ProcessGroup> group,
                              DistributedDataParallelOptions options = {});
  template <class Holder, class = decltype(std::declval<Holder>().slot())>
  DistributedDataParallelImpl(const Holder& module, std::shared_ptr<distributed::ProcessGroup> group,
                              DistributedDataParallelOptions options = {})
      : DistributedDataParallelImpl(module.module(), std::move(group), std::move(options)) {}

  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> module() const { return module_; }
  const std::shared_ptr<distributed::ProcessGroup>& process_group() const { return group_; }

  // For its scope, backward only accumulates gradients locally (gradient accumulation: every
  // micro-batch but the last); the next backward outside it averages everything accumulated.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl& ddp) : ddp_(&ddp), previous_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSyncGuard() { ddp_->sync_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelImpl* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // The buckets in launch order, as indices into parameters() of the parameters that require grad.
  std::vector<std::vector<size_t>> bucket_indices() const;
  // Of the last synced backward: buckets whose all-reduce started while backward was still
  // running (overlapping it), and those started by the final callback.
  struct BackwardStats {
    int64_t launched_during_backward = 0, launched_at_end = 0;
  };
  BackwardStats last_backward_stats() const { return stats_; }

  void pretty_print(std::ostream& os) const override;

 private:
  struct Bucket {
    Tensor flat;  // the gradients of its parameters, back to back
    std::vector<size_t> params;
    size_t pending = 0;  // parameters whose gradient has not arrived in this backward
    distributed::WorkPtr work;
  };
  void build_buckets();
  void check_same_parameters_everywhere();
  void mark_ready(size_t index);
  void launch_ready_buckets(bool at_end);
  void finalize_backward();

  std::shared_ptr<Module> module_;
  std::shared_ptr<distributed::ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> params_;  // the parameters that require grad, in registration order
  std::vector<std::string> names_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter -> bucket
  std::vector<Tensor> views_;      // parameter -> its slot in the bucket, shaped like it
  std::vector<bool> ready_;
  size_t next_launch_ = 0;
  bool in_backward_ = false;  // between the first hook of a backward and its final callback
  bool sync_ = true;
  BackwardStats stats_;
  std::shared_ptr<bool> alive_;  // the hooks outlive nothing: they check it
};
EMBER_MODULE(DistributedDataParallel);

}  // namespace ember::nn
