#pragma once
// What the example trainers share: a progress line (a redrawn bar on a terminal, a plain line
// every `every` steps in a log) and the per-epoch metrics CSV that a resumed run appends to.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

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
