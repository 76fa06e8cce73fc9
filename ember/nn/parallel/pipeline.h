#pragma once
// Pipeline parallelism over the ranks of a process group (model parallel): a Sequential is cut
// into consecutive stages, stage s on rank s; activations go forward and their gradients back
// between neighbouring ranks with send/recv. Note [Pipeline schedules]: a batch is split into
// `chunks` micro-batches so that the stages work at once on different micro-batches.
//   GPipe: every micro-batch's forward, then every backward (in reverse). Simple; each stage
//          keeps the activations of all `chunks` micro-batches until its backwards start.
//   1F1B:  after a warm-up of (stages − stage − 1) forwards, each stage alternates one forward
//          and one backward, so it holds at most (stages − stage) micro-batches' activations.
// Both compute the same gradients: those of the mean loss over the whole batch (each
// micro-batch's loss divided by `chunks`), accumulated into the stage's parameters. The idle
// share (the bubble) is about (stages − 1) / (chunks + stages − 1) for both.
//
//     nn::Pipeline pipe(model, pg, nn::PipelineOptions().chunks(4));   // same model on every rank
//     optim::SGD opt(pipe.stage()->parameters(), ...);                  // each rank its stage's
//     opt.zero_grad();
//     Tensor loss = pipe.train_step(x, y, loss_fn);   // x used on the first rank, y on the last
//     opt.step();
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"
#include "ember/nn/modules/container.h"
#include "ember/nn/parallel/distributed.h"

namespace ember::nn {

struct PipelineOptions {
  EMBER_ARG(int64_t, chunks) = 1;              // micro-batches per batch (the batch size must divide by it)
  EMBER_ARG(std::string, schedule) = "gpipe";  // "gpipe" or "1f1b"
  // Layers per stage (one entry per rank, summing to the model's length); empty: as even as possible.
  EMBER_ARG(std::vector<int64_t>, balance) = {};
  // 2-D parallel (Note [Pipelines in data parallel]): the ranks that hold this rank's stage in
  // the other pipelines, each training on its own share of the batch. train_step's gradients
  // are then averaged over them, during the last micro-batch's backward. Null: this pipeline alone.
  EMBER_ARG(std::shared_ptr<distributed::ProcessGroup>, data_parallel_group) = nullptr;
};

class Pipeline {
 public:
  using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
  // Every rank passes the same model (same layers, same weights: seed them alike) and keeps its stage.
  Pipeline(const Sequential& model, std::shared_ptr<distributed::ProcessGroup> group, PipelineOptions options = {});

  // This rank's layers, named as in the whole model ("3.weight"): give its parameters to the optimizer.
  const Sequential& stage() const { return stage_; }
  int64_t first_layer() const { return first_layer_; }
  bool is_first() const { return group_->rank() == 0; }
  bool is_last() const { return group_->rank() == group_->size() - 1; }

  // Forward and backward of one batch in micro-batches: `input` is read on the first stage and
  // `target` on the last (other ranks may pass undefined tensors). Gradients accumulate into the
  // stage's parameters. Returns the mean loss on the last stage, undefined elsewhere (with a
  // data_parallel_group: this pipeline's loss, the gradients those of the mean over all of them).
  Tensor train_step(const Tensor& input, const Tensor& target, const LossFn& loss_fn);
  // The model's output for `input` (read on the first stage), on the last stage; undefined elsewhere.
  Tensor forward(const Tensor& input);

  // With a data_parallel_group: the stage under DDP (its buckets, its last backward's stats); else null.
  const DistributedDataParallel& data_parallel() const { return replicas_; }

  // The most micro-batches whose activations this stage held at once in the last train_step.
  int64_t peak_micro_batches_held() const { return peak_held_; }

 private:
  void send_activation(const Tensor& t, int dst, int64_t micro);
  Tensor recv_activation(int src, int64_t micro, bool requires_grad);

  Sequential stage_;
  DistributedDataParallel replicas_{nullptr};  // the stage under DDP over data_parallel_group
  std::shared_ptr<distributed::ProcessGroup> group_;
  PipelineOptions options_;
  int64_t first_layer_ = 0;
  Device device_;  // where the stage's parameters live: activations travel there
  int64_t peak_held_ = 0;
  std::vector<distributed::WorkPtr> sends_;  // waited for at the end of each step
  std::vector<Tensor> sent_;                 // what they read, alive until then
};

}  // namespace ember::nn
