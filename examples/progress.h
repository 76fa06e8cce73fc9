#pragma once
// What the example trainers share: a progress line (a redrawn bar on a terminal, a plain line
// every `every` steps in a log) and the per-epoch metrics CSV that a resumed run appends to.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::examples {

class Progress {
 public:
  Progress(int epoch, int64_t total, int64_t every = 50)
      : epoch_(epoch), total_(total), every_(every), tty_(isatty(fileno(stdout))), start_(clock::now()) {}

  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

  // After each step: `done` of `total` samples, the running mean loss.
  void update(int64_t step, int64_t done, double mean_loss) {
    const double rate = static_cast<double>(done) / seconds();
    if (tty_) {
      const int width = 30, filled = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      std::printf("\repoch %d [%s%s] %lld/%lld loss %.4f %.0f samples/s", epoch_, std::string(filled, '=').c_str(),
                  std::string(width - filled, ' ').c_str(), static_cast<long long>(done),
                  static_cast<long long>(total_), mean_loss, rate);
      std::fflush(stdout);
    } else if (every_ > 0 && step % every_ == 0) {
      std::printf("epoch %d %lld/%lld loss %.4f %.0f samples/s\n", epoch_, static_cast<long long>(done),
                  static_cast<long long>(total_), mean_loss, rate);
    }
  }
  void finish() const {
    if (tty_) std::printf("\n");
  }

 private:
  using clock = std::chrono::steady_clock;
  int epoch_;
  int64_t total_, every_;
  bool tty_;
  clock::time_point start_;
};

// Running sums kept where the training runs (float64, on the model's device) and read on the
// host only every `every` steps: on a GPU each read waits for all the queued work, so reading the
// loss every step would make the host and the device take turns instead of overlapping. On the
// CPU there is nothing to wait for, and every step is read.
class DeviceSums {
 public:
  DeviceSums(Device device, size_t count, int64_t every = 20)
      : sums_(zeros({static_cast<int64_t>(count)}, TensorOptions(kFloat64).device(device))),
        host_(count, 0.0),
        every_(device.is_cuda() ? every : 1) {}

  // sums[i] += value (a 0-d tensor on the device, any dtype), without recording a graph.
  void add(size_t i, const Tensor& value) {
    NoGradGuard no_grad;
    Tensor slot = sums_[static_cast<int64_t>(i)];
    slot += value.detach().to(kFloat64);
  }
  // sums[i] = value: a resumed epoch starts from the sums it had when it was saved.
  void set(size_t i, double value) {
    NoGradGuard no_grad;
    sums_[static_cast<int64_t>(i)].fill_(value);
    host_[i] = value;
  }
  // Copies the sums to the host when `step` is a multiple of `every` (or always); true if it did.
  bool refresh(int64_t step, bool always = false) {
    if (!always && step % every_ != 0) return false;
    host_ = sums_.cpu().to_vector<double>();
    return true;
  }
  double operator[](size_t i) const { return host_[i]; }  // as of the last refresh

 private:
  Tensor sums_;
  std::vector<double> host_;
  int64_t every_;
};

// Where a run resumed from a training checkpoint (Note [Training checkpoints]) starts: the
// loader's restored position, checked against this run's --epochs. `finished`: the checkpoint
// has done all of them (said on stdout; nothing to train). `epochs_changed`: it was saved by a
// run with another --epochs, whose schedule the caller re-derives.
struct ResumePoint {
  int epoch = 0;
  int64_t batch = 0;
  bool finished = false, epochs_changed = false;
};

inline ResumePoint resume_point(const TrainingState& state, const data::DataLoader& loader, const std::string& path,
                                int epochs) {
  const data::DataLoaderState at = loader.state_dict();
  EMBER_CHECK(at.epoch <= epochs, "--resume: '", path, "' has finished ", at.epoch,
              " epochs, beyond this run's --epochs ", epochs);
  ResumePoint r;
  r.epoch = static_cast<int>(at.epoch);
  r.batch = at.batch;
  r.finished = at.epoch == epochs;
  r.epochs_changed = state.get_int("epochs", 1, std::numeric_limits<int>::max()) != epochs;
  if (r.finished)
    std::printf("%s has finished all %d epochs: nothing to train (raise --epochs to train on)\n", path.c_str(), epochs);
  else
    std::printf("resumed from %s at epoch %d, batch %lld\n", path.c_str(), r.epoch + 1,
                static_cast<long long>(r.batch));
  return r;
}

// A double as text that reads back as the same double (checkpoint values).
inline std::string exact_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// Opens `path` for per-epoch rows; a run resumed after epoch 0 appends to the file it continues.
inline std::ofstream open_metrics(const std::string& path, const std::string& header, bool resumed) {
  std::ofstream out;
  if (path.empty()) return out;
  const bool append = resumed && std::ifstream(path).peek() != std::ifstream::traits_type::eof();
  out.open(path, append ? std::ios::app : std::ios::trunc);
  EMBER_CHECK(out.good(), "cannot write ", path);
  if (!append) out << header << '\n';
  return out;
}

}  // namespace ember::examples
