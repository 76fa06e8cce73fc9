// A LibTorch program, ported to ember by its include alone: a DCGAN on MNIST. The generator
// upsamples noise with ConvTranspose2d (1 -> 7 -> 14 -> 28 pixels), the discriminator is a
// Sequential of strided convolutions, LeakyReLU and a Sigmoid, trained with BCELoss and Adam.
// Built from this one file against ember (EMBER_PORT) and against LibTorch (tools/libtorch_ports.sh).
//   dcgan DATA_ROOT [batches=200] [threads=2] [seed=7]
#ifdef EMBER_PORT
#include <ember/torch.h>
#else
#include <torch/torch.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

constexpr int64_t kNoise = 64;

struct GeneratorImpl : torch::nn::Module {
  GeneratorImpl()
      : up1(torch::nn::ConvTranspose2dOptions(kNoise, 128, 7).bias(false)),
        bn1(128),
        up2(torch::nn::ConvTranspose2dOptions(128, 64, 4).stride(2).padding(1).bias(false)),
        bn2(64),
        up3(torch::nn::ConvTranspose2dOptions(64, 1, 4).stride(2).padding(1)) {
    register_module("up1", up1);
    register_module("bn1", bn1);
    register_module("up2", up2);
    register_module("bn2", bn2);
    register_module("up3", up3);
  }
  torch::Tensor forward(torch::Tensor z) {                // [N, kNoise, 1, 1]
    auto x = torch::relu(bn1->forward(up1->forward(z)));  // [N, 128, 7, 7]
    x = torch::relu(bn2->forward(up2->forward(x)));       // [N, 64, 14, 14]
    return torch::tanh(up3->forward(x));                  // [N, 1, 28, 28] in [-1, 1]
  }
  torch::nn::ConvTranspose2d up1, up2, up3;
  torch::nn::BatchNorm2d bn1, bn2;
};
TORCH_MODULE(Generator);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA_ROOT [batches] [threads] [seed]\n", argv[0]);
    return 2;
  }
  const int64_t max_batches = argc > 2 ? std::atoll(argv[2]) : 200;
  torch::set_num_threads(argc > 3 ? std::atoi(argv[3]) : 2);
  torch::manual_seed(argc > 4 ? std::atoi(argv[4]) : 7);
  const torch::Device device(torch::kCPU);
  constexpr int64_t kBatch = 64;

  Generator generator;
  torch::nn::Sequential discriminator(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 64, 4).stride(2).padding(1)),  // 14 x 14
      torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 128, 4).stride(2).padding(1).bias(false)),  // 7 x 7
      torch::nn::BatchNorm2d(128), torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(128, 1, 7)),  // 1 x 1
      torch::nn::Sigmoid());
  generator->to(device);
  discriminator->to(device);

  auto dataset = torch::data::datasets::MNIST(argv[1])
                     .map(torch::data::transforms::Normalize<>(0.5, 0.5))
                     .map(torch::data::transforms::Stack<>());
  auto loader =
      torch::data::make_data_loader(std::move(dataset), torch::data::DataLoaderOptions().batch_size(kBatch).workers(2));

  torch::optim::Adam g_opt(generator->parameters(), torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
  torch::optim::Adam d_opt(discriminator->parameters(),
                           torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
  torch::nn::BCELoss bce;

  const auto start = std::chrono::steady_clock::now();
  int64_t step = 0;
  double d_sum = 0, g_sum = 0, real_sum = 0, fake_sum = 0;
  int64_t window = 0;
  while (step < max_batches) {
    for (torch::data::Example<>& batch : *loader) {
      if (step >= max_batches) break;
      const int64_t n = batch.data.size(0);
      // The discriminator: real images towards 0.9 (one-sided label smoothing), fakes towards 0.
      discriminator->zero_grad();
      torch::Tensor real = batch.data.to(device);
      torch::Tensor real_out = discriminator->forward(real).reshape({n});
      torch::Tensor d_real = bce(real_out, torch::full({n}, 0.9, device));
      torch::Tensor fake = generator->forward(torch::randn({n, kNoise, 1, 1}, device));
      torch::Tensor fake_out = discriminator->forward(fake.detach()).reshape({n});
      torch::Tensor d_fake = bce(fake_out, torch::zeros(n, device));
      torch::Tensor d_loss = d_real + d_fake;
      d_loss.backward();
      d_opt.step();
      // The generator: make the discriminator call its fakes real.
      generator->zero_grad();
      torch::Tensor g_out = discriminator->forward(fake).reshape({n});
      torch::Tensor g_loss = torch::binary_cross_entropy(g_out, torch::ones(n, device));
      g_loss.backward();
      g_opt.step();
      ++step;
      if (step > max_batches - 50) {  // averages over the last 50 batches
        d_sum += d_loss.item<double>();
        g_sum += g_loss.item<double>();
        real_sum += real_out.mean().item<double>();
        fake_sum += fake_out.mean().item<double>();
        ++window;
      }
      if (step % 50 == 0)
        std::printf("batch %ld: D loss %.4f, G loss %.4f, D(real) %.3f, D(fake) %.3f\n", static_cast<long>(step),
                    d_loss.item<double>(), g_loss.item<double>(), real_out.mean().item<double>(),
                    fake_out.mean().item<double>());
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    torch::NoGradGuard no_grad;
    generator->eval();
    torch::Tensor samples = (generator->forward(torch::randn({16, kNoise, 1, 1}, device)) + 1.0) / 2.0;
    torch::save(samples, "dcgan_samples.pt");
    torch::Tensor loaded;
    torch::load(loaded, "dcgan_samples.pt");
    AT_ASSERT(loaded.sizes() == samples.sizes());
  }
  torch::save(generator, "dcgan_generator.pt");
  const double w = static_cast<double>(window);
  std::printf("result dcgan d_loss=%.4f g_loss=%.4f d_real=%.4f d_fake=%.4f seconds=%.2f\n", d_sum / w, g_sum / w,
              real_sum / w, fake_sum / w, seconds);
  return 0;
}
