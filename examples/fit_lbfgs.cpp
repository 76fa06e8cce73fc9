// Full-batch logistic regression (softmax, with a small L2 penalty) on a small real tabular
// set, fitted three ways: L-BFGS with a strong-Wolfe line search, AdamW and SGD with momentum.
// L-BFGS runs first; the others then run until they reach its final loss, and the table
// shows the iterations, loss evaluations and time each one needed.
//   fit_lbfgs                                   # UCI digits from ../shared/data, else synthetic
//   fit_lbfgs --data iris --data-dir ../shared/data
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <ember/ember.h>

#include "cli.h"

using namespace ember;

namespace {

struct Problem {
  Tensor x, y;  // [N, F] float64 standardized, [N] int64
  int64_t classes;
  std::string name;
};

Problem load(const std::string& which, const std::string& dir, uint64_t seed) {
  Problem p;
  Tensor table;
  std::string source = "the synthetic data";  // for messages about the data
  if (which == "digits" && std::ifstream(dir + "/digits/digits.csv.gz")) {
    source = dir + "/digits/digits.csv.gz";
    table = data::read_csv(source);
    p.name = "UCI digits (1797 x 64)";
  } else if (which == "iris" && std::ifstream(dir + "/iris/iris.csv")) {
    source = dir + "/iris/iris.csv";
    table = data::read_csv(source, /*skip_header=*/true);
    p.name = "iris (150 x 4)";
  } else {
    // Three Gaussian blobs in 8 dimensions, for machines without the shared data.
    manual_seed(seed);
    const int64_t n = 600;
    Tensor labels = randint(0, 3, {n}).to(kFloat64);
    Tensor centers = randn({3, 8}, kFloat64) * 2.0;
    Tensor feats = randn({n, 8}, kFloat64) + centers.index_select(0, labels.to(kInt64));
    table = cat({feats, labels.unsqueeze(1)}, 1);
    p.name = "synthetic blobs (600 x 8)";
  }
  // Derived sizes come from the data: say what is wrong with the file, not with a reshape.
  EMBER_CHECK(table.dim() == 2 && table.size(1) >= 2 && table.size(0) >= 1, "'", source, "' has shape ",
              shape_str(table.sizes()), "; expected rows of features with the class label in the last column");
  const int64_t f = table.size(1) - 1;
  const Tensor labels = table.select(1, f).to(kFloat64).contiguous();
  const std::vector<double> values = labels.to_vector<double>();
  for (size_t row = 0; row < values.size(); ++row)
    EMBER_CHECK(
        std::isfinite(values[row]) && values[row] >= 0 && values[row] < 1000 && values[row] == std::floor(values[row]),
        "'", source, "': row ", row + 1, " has class label ", values[row], "; labels must be integers in [0, 1000)");
  p.x = table.narrow(1, 0, f).contiguous();
  p.y = labels.to(kInt64);
  const Tensor mean = p.x.mean({0}, true), std = p.x.std({0}, true, true);
  p.x = (p.x - mean) / where(std > 0, std, 1.0);
  p.classes = p.y.max().item<int64_t>() + 1;
  return p;
}

struct Run {
  int64_t iterations = 0, evaluations = 0;
  double seconds = 0, loss = 0, accuracy = 0;
  bool reached = false;
};

Run fit(const Problem& p, const std::string& method, double target, int64_t max_iterations) {
  manual_seed(1);
  nn::Linear model(p.x.size(1), p.classes);
  model->to(kFloat64);
  std::unique_ptr<optim::Optimizer> opt;
  if (method == "L-BFGS")
    opt = std::make_unique<optim::LBFGS>(
        model->parameters(), optim::LBFGSOptions(1.0).max_iter(1).history_size(20).line_search_fn("strong_wolfe"));
  else if (method == "AdamW")
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions(0.05).weight_decay(0));
  else
    opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.5).momentum(0.9));
  Run r;
  auto loss_fn = [&] {
    ++r.evaluations;
    return nn::functional::cross_entropy(model(p.x), p.y) + 5e-4 * model->weight.square().sum();
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (r.iterations < max_iterations) {
    opt->step([&] {
      opt->zero_grad();
      Tensor loss = loss_fn();
      loss.backward();
      return loss;
    });
    ++r.iterations;
    NoGradGuard no_grad;
    r.loss = (nn::functional::cross_entropy(model(p.x), p.y) + 5e-4 * model->weight.square().sum()).item<double>();
    if (r.loss <= target) {
      r.reached = true;
      break;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  NoGradGuard no_grad;
  r.accuracy = model(p.x).argmax(1).eq(p.y).to(kFloat64).mean().item<double>();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "digits", dir = "../shared/data";
  int64_t lbfgs_iterations = 100, max_iterations = 5000;
  uint64_t seed = 0;
  bool check = false;
  CLI::App app{"Logistic regression with L-BFGS vs AdamW vs SGD: iterations and time to the same loss."};
  app.option_defaults()->always_capture_default();
  app.add_option("--data", which, "digits, iris or synthetic")->check(CLI::IsMember({"digits", "iris", "synthetic"}));
  app.add_option("--data-dir", dir, "folder with digits/ and iris/ (synthetic data when absent)");
  app.add_option("--lbfgs-iterations", lbfgs_iterations, "L-BFGS iterations; its loss is the target")
      ->check(examples::cli::count(1, 1e7));
  app.add_option("--max-iterations", max_iterations, "give up on AdamW and SGD after this many")
      ->check(examples::cli::count(1, 1e9));
  app.add_option("--seed", seed, "seed of the synthetic data")->check(examples::cli::count(0, 18446744073709551615.0));
  app.add_flag("--check", check, "exit with status 1 unless L-BFGS fits to >= 90% training accuracy (for CI)");
  CLI11_PARSE(app, argc, argv);
  try {
    const Problem p = load(which, dir, seed);
    std::printf("%s, %lld classes; loss = cross-entropy + 5e-4 |W|^2, full batch, float64\n\n", p.name.c_str(),
                static_cast<long long>(p.classes));
    const Run lbfgs = fit(p, "L-BFGS", -1.0, lbfgs_iterations);
    const double target = lbfgs.loss * (1 + 1e-3);
    std::printf("target loss %.6f (L-BFGS after %lld iterations, +0.1 %%)\n\n", target,
                static_cast<long long>(lbfgs.iterations));
    std::printf(
        "| optimizer | iterations to target | loss evaluations | time | final loss | train accuracy |\n"
        "|---|---|---|---|---|---|\n");
    auto row = [](const char* name, const Run& r) {
      std::printf("| %s | %s%lld | %lld | %.3f s | %.6f | %.4f |\n", name, r.reached ? "" : "not reached in ",
                  static_cast<long long>(r.iterations), static_cast<long long>(r.evaluations), r.seconds, r.loss,
                  r.accuracy);
    };
    Run lbfgs_to_target = fit(p, "L-BFGS", target, lbfgs_iterations);
    row("L-BFGS + strong Wolfe", lbfgs_to_target);
    row("AdamW (lr 0.05)", fit(p, "AdamW", target, max_iterations));
    row("SGD (lr 0.5, momentum 0.9)", fit(p, "SGD", target, max_iterations));
    if (check && lbfgs.accuracy < 0.9) {
      std::fprintf(stderr, "L-BFGS reached only %.4f training accuracy\n", lbfgs.accuracy);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fit_lbfgs: %s\n", e.what());
    return 2;
  }
  return 0;
}
