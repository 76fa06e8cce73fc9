#pragma once
// Grad mode (Note [Grad mode is thread-local]): whether differentiable ops record the tape.
// It is per thread, so a data-loader worker or an evaluation thread under NoGradGuard does
// not change what a training thread records.
namespace ember {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Turns recording off for its scope (restores the previous state on exit; nestable).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Turns recording back on inside a NoGradGuard scope (LBFGS closures need it).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// Inference: no recording. (ember has no separate view/version tracking to switch off, so
// this is NoGradGuard under PyTorch's name.)
using InferenceMode = NoGradGuard;

// Anomaly mode: backward checks every gradient it produces for NaN/inf and throws an
// ember::Error naming the op whose backward produced it.
class AnomalyMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember
