#pragma once
// Models shared by the benchmark programs.
#include <ember/ember.h>

namespace ember::bench {

// The small MNIST CNN of the benchmarks (input [N, 1, 28, 28], 10 classes).
inline nn::Sequential small_cnn() {
  using namespace nn;
  return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

// A character-level GPT like examples/train_charlm's: token and position embeddings, pre-norm
// transformer blocks, a final LayerNorm and a linear head. idx int64 [B, T] -> logits [B, T, vocab].
class TinyGptImpl : public nn::Module {
 public:
  TinyGptImpl(int64_t vocab, int64_t block, int64_t width, int64_t layers, int64_t heads)
      : Module("TinyGpt"),
        wte(register_module("wte", nn::Embedding(vocab, width))),
        wpe(register_module("wpe", nn::Embedding(block, width))),
        blocks(register_module("h", nn::Sequential())),
        ln_f(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({width})))),
        head(register_module("lm_head", nn::Linear(nn::LinearOptions(width, vocab).bias(false)))) {
    for (int64_t i = 0; i < layers; ++i) blocks->push_back(nn::TransformerBlock(width, heads));
  }
  Tensor forward(const Tensor& idx) override {
    const Tensor pos = arange(idx.size(1), TensorOptions(kInt64).device(idx.device()));
    return head(ln_f(blocks(wte(idx) + wpe(pos))));
  }
  nn::Embedding wte, wpe;
  nn::Sequential blocks;
  nn::LayerNorm ln_f;
  nn::Linear head;
};
EMBER_MODULE(TinyGpt);

inline Tensor rosenbrock(const Tensor& x) { return (1 - x[0]).square() + 100 * (x[1] - x[0].square()).square(); }

}  // namespace ember::bench
