#pragma once
// A training run's whole state as one checkpoint file, so that a run killed at any instant
// resumes exactly where its last checkpoint stood (Note [Training checkpoints]):
//     TrainingState state{&model, &optimizer};
//     state.scaler = &scaler; state.scheduler = &scheduler; state.loader = &loader;
//     state.values["step"] = std::to_string(step);
//     save_checkpoint(state, "run.ckpt");          // mid-epoch too: the loader's position is in it
//     ...
//     load_checkpoint(state, "run.ckpt");          // the same objects, freshly built
//     const int64_t step = state.get_int("step", 0, max_steps);
//
// Note [Training checkpoints]: model, optimizer, GradScaler, LR scheduler, the loader's position,
// the default generator and the program's own values go into ONE safetensors file, written by
// write_file_atomically (Note [Durable writes]): after a kill at any instant the file is the old
// checkpoint or the new one, whole, never a model of one step beside an optimizer of another
// (what two separately renamed files allowed). The file carries a format version and a CRC-32
// of its tensor data; loading checks both, every key and every number before it changes
// anything it can check first, and refuses a model file, a half-written or foreign file, or a
// newer format with a message that says which. The model's tensors are stored as
// "model/<name>", so ember::load(module, path) and PyTorch (safetensors' load_file, then the
// "model/" keys) read the weights of a checkpoint too.
#include <cstdint>
#include <map>
#include <string>

#include "ember/data/dataloader.h"
#include "ember/distributed/process_group.h"
#include "ember/io/checkpoint_format.h"
#include "ember/nn/module.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/optimizer.h"

namespace ember {

struct TrainingState {
  nn::Module* model = nullptr;                // required
  optim::Optimizer* optimizer = nullptr;      // required
  amp::GradScaler* scaler = nullptr;          // optional: loss scale, growth tracker
  optim::LRScheduler* scheduler = nullptr;    // optional: last_epoch, lrs
  data::DataLoader* loader = nullptr;         // optional: epoch and next batch (DataLoaderState)
  bool generator = true;                      // the default generator's state (dropout masks, init)
  std::map<std::string, std::string> values;  // the program's own (epoch counters, running sums)
  // Model parallel (nn::Pipeline; Note [Model-parallel checkpoints]): every rank holds the whole
  // `model` and trains `stage` (the part of it this rank's `optimizer` steps). With `group` set,
  // save_checkpoint and load_checkpoint are collectives that every rank calls: the file, written
  // by rank 0, is the one-process run's, which any number of stages (or one process) resumes.
  distributed::ProcessGroup* group = nullptr;
  const nn::Module* stage = nullptr;

  // One of `values`, checked: a missing, non-numeric or out-of-range value is an ember::Error
  // naming the key, the value, the range and the file it came from (never a silent default).
  int64_t get_int(const std::string& key, int64_t min, int64_t max) const;
  double get_double(const std::string& key) const;  // any finite number
  std::string source = "the checkpoint";            // the file load_checkpoint read (messages)
};

using io::kCheckpointFormat;  // the format written; a file of a newer one is refused with that said

// Writes the state as one file, atomically and durably. On a failure the previous checkpoint
// at `path` is left as it was (with a group: on every rank, each throws).
void save_checkpoint(const TrainingState& state, const std::string& path);
// Restores every object the state points to (the same kinds, built with the same shapes) and
// fills `values`. A state without a scaler/scheduler/loader ignores that part of the file.
void load_checkpoint(TrainingState& state, const std::string& path);
using io::is_checkpoint;  // whether a file's metadata (load_metadata) says it is a training checkpoint

}  // namespace ember
