// What pruning costs in accuracy on real MNIST (technique 8): the MLP of train_mnist trained once
// (SGD with momentum, 3 epochs), then for each method and sparsity a copy of it pruned, tested,
// fine-tuned one epoch with the masks in place, and tested again. Prints a markdown table and
// writes an HTML report (inline SVG) with accuracy against sparsity, before and after the
// fine-tuning epoch. The unpruned model gets the same extra epoch, so the fine-tuned curves
// compare against it rather than against the 3-epoch model.
//   build/bench/bench/prune_report [mnist folder] [report.html]
// (defaults: ../shared/data/mnist, prune_report.html)
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ember/ember.h>

#include "../examples/report.h"
#include "timing.h"

namespace {

using namespace ember;
namespace prune = nn::utils::prune;

nn::Sequential mlp() {
  using namespace nn;
  return Sequential(Flatten(), Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10));
}

void train_epoch(nn::Sequential& model, data::DataLoader& loader, optim::Optimizer& opt) {
  model->train();
  for (const data::Batch& b : loader) {
    opt.zero_grad();
    nn::functional::cross_entropy(model(b.data), b.target).backward();
    opt.step();
  }
}

double accuracy(nn::Sequential& model, const std::vector<data::Batch>& test) {
  model->eval();
  NoGradGuard no_grad;
  int64_t right = 0, all = 0;
  for (const data::Batch& b : test) {
    right += model(b.data).argmax(1).eq(b.target).sum().item<int64_t>();
    all += b.target.size(0);
  }
  return static_cast<double>(right) / static_cast<double>(all);
}

// The Linear layers' weights; channel pruning leaves the last (its outputs are the classes).
void apply(const std::string& method, nn::Sequential& model, double amount) {
  std::vector<prune::Target> weights;
  for (const auto& item : model->named_modules())
    if (item.value()->as<nn::LinearImpl>()) weights.push_back({item.value(), "weight"});
  if (method == "global L1") return prune::global_unstructured(weights, prune::L1Unstructured(amount));
  for (size_t i = 0; i < weights.size(); ++i) {
    if (method == "L1 unstructured") prune::l1_unstructured(*weights[i].module, "weight", amount);
    if (method == "L2 channels" && i + 1 < weights.size())
      prune::ln_structured(*weights[i].module, "weight", amount, 2, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "../shared/data/mnist", out = argc > 2 ? argv[2] : "prune_report.html";
  if (!std::filesystem::exists(root)) {
    std::printf("prune_report: no MNIST at %s (see ../shared/data/README)\n", root.c_str());
    return 1;
  }
  manual_seed(0);
  const auto norm = data::transforms::normalize({0.1307}, {0.3081});
  auto train = data::map(std::make_shared<data::MNIST>(root, true), norm);
  auto test_set = data::map(std::make_shared<data::MNIST>(root, false), norm);
  data::DataLoader loader(train, data::DataLoaderOptions().batch_size(64).shuffle(true).seed(1));
  std::vector<data::Batch> test;
  for (const data::Batch& b : data::DataLoader(test_set, data::DataLoaderOptions().batch_size(1000))) test.push_back(b);

  nn::Sequential base = mlp();
  {
    optim::SGD opt(base->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    for (int epoch = 0; epoch < 3; ++epoch) train_epoch(base, loader, opt);
  }
  const StateDict trained = base->state_dict();
  // One copy of the trained model, pruned (or not) and fine-tuned with a fresh optimizer.
  auto run = [&](const std::string& method, double amount, double& pruned, double& tuned) {
    nn::Sequential model = mlp();
    model->load_state_dict(trained);
    if (amount > 0) apply(method, model, amount);
    pruned = accuracy(model, test);
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    train_epoch(model, loader, opt);
    tuned = accuracy(model, test);
  };
  double unpruned = 0, unpruned_tuned = 0;
  run("none", 0, unpruned, unpruned_tuned);

  const std::vector<double> amounts = {0.5, 0.7, 0.8, 0.9, 0.95};
  const std::vector<std::string> methods = {"L1 unstructured", "global L1", "L2 channels"};
  examples::Report report("ember: accuracy against sparsity, MNIST MLP 784-256-128-10");
  std::vector<examples::Report::Series> after_pruning, after_tuning;
  std::vector<std::vector<std::string>> rows;
  std::printf("MLP 784-256-128-10, 3 epochs: test accuracy %.2f %% (%.2f %% after a 4th epoch)\n\n", 100 * unpruned,
              100 * unpruned_tuned);
  std::printf("| method | sparsity | after pruning | after 1 epoch of fine-tuning |\n|---|---|---|---|\n");
  for (const std::string& method : methods) {
    examples::Report::Series a{method, {100 * unpruned}}, t{method, {100 * unpruned_tuned}};
    for (double amount : amounts) {
      double pruned = 0, tuned = 0;
      run(method, amount, pruned, tuned);
      a.y.push_back(100 * pruned);
      t.y.push_back(100 * tuned);
      std::printf("| %s | %.0f %% | %.2f %% | %.2f %% |\n", method.c_str(), 100 * amount, 100 * pruned, 100 * tuned);
      std::fflush(stdout);
      rows.push_back({method, bench::fmt("%.0f %%", 100 * amount), bench::fmt("%.2f %%", 100 * pruned),
                      bench::fmt("%.2f %%", 100 * tuned)});
    }
    after_pruning.push_back(a);
    after_tuning.push_back(t);
  }
  report.paragraph(bench::fmt("Trained 3 epochs: %.2f %% test accuracy", 100 * unpruned) +
                   bench::fmt(" (%.2f %% after a 4th epoch, the fine-tuned curves' reference).", 100 * unpruned_tuned) +
                   " Points: sparsity 0, 50, 70, 80, 90, 95 % of each Linear's weights (L2 channels: of the rows of "
                   "the two hidden layers).");
  report.line_chart("Test accuracy after pruning (no fine-tuning)", "sparsity: 0, 50, 70, 80, 90, 95 %", "accuracy (%)",
                    after_pruning);
  report.line_chart("Test accuracy after one epoch of fine-tuning", "sparsity: 0, 50, 70, 80, 90, 95 %", "accuracy (%)",
                    after_tuning);
  report.table({"method", "sparsity", "after pruning", "after 1 epoch of fine-tuning"}, rows);
  report.write(out);
  std::printf("\nreport: %s\n", out.c_str());
  return 0;
}
