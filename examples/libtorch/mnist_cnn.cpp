// A LibTorch program, ported to ember by its include alone: an MNIST CNN trained through the C++
// frontend's data pipeline (datasets::MNIST, Normalize, Stack, make_data_loader), with
// BatchNorm2d, Dropout2d and SGD with momentum. Built twice from this one file: against ember
// (EMBER_PORT, examples/CMakeLists.txt) and, where Debian's libtorch-dev is installed, against
// LibTorch 1.13 (bench/CMakeLists.txt); tools/libtorch_ports.sh runs both and compares.
//   mnist_cnn DATA_ROOT [epochs=1] [batches_per_epoch=all] [threads=2] [seed=1]
// DATA_ROOT holds the four uncompressed MNIST files (LibTorch reads no .gz; ember reads both).
#ifdef EMBER_PORT
#include <ember/torch.h>
#else
#include <torch/torch.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(torch::nn::Conv2dOptions(1, 16, 3).padding(1)),
        bn1(16),
        conv2(torch::nn::Conv2dOptions(16, 32, 3).padding(1)),
        drop2(torch::nn::Dropout2dOptions(0.1)),
        fc1(32 * 7 * 7, 64),
        fc2(64, 10) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("drop2", drop2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1->forward(conv1->forward(x))), 2);    // [N, 16, 14, 14]
    x = torch::max_pool2d(drop2->forward(torch::relu(conv2->forward(x))), 2);  // [N, 32, 7, 7]
    x = torch::relu(fc1->forward(x.flatten(1)));
    x = torch::dropout(x, /*p=*/0.3, /*train=*/is_training());
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d drop2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA_ROOT [epochs] [batches_per_epoch] [threads] [seed]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 1;
  const int64_t max_batches = argc > 3 ? std::atoll(argv[3]) : -1;
  torch::set_num_threads(argc > 4 ? std::atoi(argv[4]) : 2);
  torch::manual_seed(argc > 5 ? std::atoi(argv[5]) : 1);
  const torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto train_set = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTrain)
                       .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                       .map(torch::data::transforms::Stack<>());
  const size_t train_size = train_set.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set), torch::data::DataLoaderOptions().batch_size(64).workers(2));
  auto test_set = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest)
                      .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                      .map(torch::data::transforms::Stack<>());
  const size_t test_size = test_set.size().value();
  auto test_loader = torch::data::make_data_loader(std::move(test_set), 1000);

  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  std::printf("%zu training images, %zu test images, %zu parameters\n", train_size, test_size,
              model->parameters().size());

  const auto start = std::chrono::steady_clock::now();
  double last_loss = 0, accuracy = 0;
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    double loss_sum = 0;
    int64_t batches = 0;
    for (auto& batch : *train_loader) {
      if (max_batches >= 0 && batches >= max_batches) break;
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(data), targets);
      AT_ASSERT(!std::isnan(loss.template item<float>()));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    last_loss = loss_sum / static_cast<double>(batches);

    torch::NoGradGuard no_grad;
    model->eval();
    double test_loss = 0;
    int64_t correct = 0;
    for (const auto& batch : *test_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      auto output = model->forward(data);
      test_loss += torch::nll_loss(output, targets, /*weight=*/{}, torch::Reduction::Sum).template item<double>();
      correct += output.argmax(1).eq(targets).sum().template item<int64_t>();
    }
    accuracy = static_cast<double>(correct) / static_cast<double>(test_size);
    std::printf("epoch %ld: train loss %.4f, test loss %.4f, test accuracy %.2f %%\n", static_cast<long>(epoch),
                last_loss, test_loss / static_cast<double>(test_size), 100 * accuracy);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  torch::save(model, "mnist_cnn_model.pt");
  std::printf("result mnist_cnn train_loss=%.4f accuracy=%.4f seconds=%.2f\n", last_loss, accuracy, seconds);
  return 0;
}
