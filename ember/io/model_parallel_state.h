#pragma once
// The model-parallel half of save_checkpoint and load_checkpoint (TrainingState::group).
//
// Note [Model-parallel checkpoints]: a pipeline run (nn::Pipeline) builds the whole model on
// every rank but trains only its stage, with an optimizer over the stage's parameters. Its
// checkpoint is still the one-process run's file: each of the model's tensors as the rank whose
// stage holds it has it, and the optimizer state numbered as ONE optimizer over the whole model
// would number it (its parameter groups in order, each group's parameters in the model's order;
// PyTorch's numbering in state_dict). So a run saved over N stages resumes over M stages or in
// one process, and back, and safetensors readers see the model's plain names. Ranks send their
// pieces to rank 0, which writes the file; on load every rank reads the file and keeps its
// stage's part of the optimizer state. Every rank calls both; a failure on one rank (a file it
// cannot read, a write that fails) is agreed over the group, so every rank throws instead of
// waiting in a collective for the others.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/io/training_state.h"

namespace ember::io {

// Who holds what, agreed over the group: per entry of the model's state_dict, the rank whose
// stage holds it (-1: no stage does; rank 0's copy is saved) and its index in the whole model's
// optimizer (-1: no optimizer steps it).
struct ModelParallelLayout {
  StateDict entries{"model tensor"};  // this rank's model->state_dict()
  std::vector<int> owner;
  std::vector<int64_t> whole_index;
  std::vector<int64_t> group_sizes;     // parameters per group of the whole optimizer
  std::vector<int64_t> local_to_whole;  // this rank's optimizer position -> whole index
  Device wire{kCPU};                    // where tensors travel: host memory for MPI, the model's GPU for NCCL
};

// Runs `body` on every rank of state.group, then agrees whether it failed anywhere: the rank
// whose body threw rethrows its error, the others throw one naming it. `what` starts messages.
void on_every_rank(const TrainingState& state, const std::string& what, const std::function<void()>& body);

// Collective. Checks that the stage and the optimizer's parameters are the model's, that every
// rank has the same model and as many optimizer groups, and that no tensor is in two stages.
ModelParallelLayout agree_layout(const TrainingState& state, const std::string& what);

// What each rank sends rank 0, as rank 0 received it (elsewhere: empty). Collective.
struct GatheredState {
  StateDict model{"model tensor"};                            // whole, each entry from its owner
  optim::OptimizerState own;                                  // rank 0's optimizer state, renumbered as the whole's
  std::vector<std::pair<int, optim::OptimizerState>> pieces;  // every other rank's, renumbered
  std::string problem;                                        // a rank whose state could not be described, and why
  std::vector<std::pair<uint64_t, uint64_t>> generators;      // every rank's (seed, offset)
};
GatheredState gather_state(const TrainingState& state, const ModelParallelLayout& layout);
// On rank 0: the whole optimizer's state from the pieces. Throws when a piece does not fit
// (another optimizer type, other options): call it inside on_every_rank.
optim::OptimizerState merge_optimizer_state(GatheredState& gathered, const ModelParallelLayout& layout);

// This rank's part of the whole model's optimizer state `whole` (as the file has it), numbered
// for this rank's optimizer. Throws when the file's optimizer does not fit the run's stages.
optim::OptimizerState stage_optimizer_state(const optim::OptimizerState& whole, const ModelParallelLayout& layout,
                                            const TrainingState& state, const std::string& path);

}  // namespace ember::io
