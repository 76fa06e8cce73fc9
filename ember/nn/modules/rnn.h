#pragma once
// The recurrent layers: RNN (tanh or relu), LSTM and GRU, with PyTorch's equations, parameter
// names (weight_ih_l0, weight_hh_l0_reverse, ...) and layouts, so their state dicts load
// PyTorch's weights. Each time step is composed of recorded ops (one matmul for a layer's
// inputs at every step, then a matmul and the gates per step), so backward is backpropagation
// through time by the tape.
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

// The options the three share (LibTorch's names), declared in each options struct so that
// every setter returns that struct: LSTMOptions(8, 16).num_layers(2).batch_first(true).
#define EMBER_RNN_OPTIONS(Self)                                                                         \
  Self(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {} \
  EMBER_ARG(int64_t, input_size);                                                                       \
  EMBER_ARG(int64_t, hidden_size);                                                                      \
  EMBER_ARG(int64_t, num_layers) = 1;                                                                   \
  EMBER_ARG(bool, bias) = true;                                                                         \
  EMBER_ARG(bool, batch_first) = false; /* input and output [B, T, F] instead of [T, B, F] */           \
  EMBER_ARG(double, dropout) = 0.0;     /* on each layer's output but the last, in training */          \
  EMBER_ARG(bool, bidirectional) = false

struct RNNOptions {
  EMBER_RNN_OPTIONS(RNNOptions);
  EMBER_ARG(std::string, nonlinearity) = "tanh";  // "tanh" or "relu" (torch::kTanh, torch::kReLU)
};
struct LSTMOptions {
  EMBER_RNN_OPTIONS(LSTMOptions);
};
struct GRUOptions {
  EMBER_RNN_OPTIONS(GRUOptions);
};
#undef EMBER_RNN_OPTIONS

// The shared options as RNNImplBase keeps them.
struct RNNShape {
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  template <class Options>
  static RNNShape of(const Options& o) {
    return {o.input_size(), o.hidden_size(), o.num_layers(), o.bias(), o.batch_first(), o.dropout(), o.bidirectional()};
  }
};

// What RNN, LSTM and GRU share: the parameters of every layer and direction, and the walk over
// layers, directions and time steps. `gates` is 1 (RNN), 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n).
class RNNImplBase : public Module {
 public:
  RNNImplBase(std::string type_name, const RNNShape& shape, int64_t gates);
  void reset_parameters();  // every weight and bias ~ U(±1/√hidden_size), as PyTorch
  void pretty_print(std::ostream& os) const override;
  // weight_ih, weight_hh, bias_ih, bias_hh of each layer and direction, in PyTorch's order.
  std::vector<Tensor> all_weights() const;

  RNNShape shape;

 protected:
  // One layer and direction over the whole sequence: x [T, B, F] -> outputs [T, B, H]; state
  // holds h (and c for the LSTM) [B, H], updated to the last step's.
  using Cell = std::function<void(const Tensor& input_gates, const Tensor& weight_hh, const Tensor& bias_hh,
                                  std::vector<Tensor>& state)>;
  // input [T, B, F] or [B, T, F] (batch_first) or [T, F] (unbatched); initial states
  // [L D, B, H] each (or [L D, H] unbatched; undefined: zeros). Returns the output and the
  // final states.
  std::tuple<Tensor, std::vector<Tensor>> run(const Tensor& input, std::vector<Tensor> initial, const Cell& cell);

 private:
  int64_t gates_;
  std::vector<std::vector<Tensor>> weights_;  // [layer * directions + direction] -> ih, hh, b_ih, b_hh
};

// h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh) (or relu)
class RNNImpl : public RNNImplBase {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
  // (output, h_n)
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});

  RNNOptions options;
};
EMBER_MODULE(RNN);

// i, f, g, o = σ, σ, tanh, σ of (x W_ihᵀ + b_ih + h W_hhᵀ + b_hh) in four chunks;
// c' = f c + i g, h' = o tanh(c')
class LSTMImpl : public RNNImplBase {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  // (output, (h_n, c_n))
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input,
                                                         std::optional<std::tuple<Tensor, Tensor>> hx = std::nullopt);

  LSTMOptions options;
};
EMBER_MODULE(LSTM);

// r, z = σ(x W_i{r,z}ᵀ + b_i{r,z} + h W_h{r,z}ᵀ + b_h{r,z}); n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn));
// h' = (1 - z) n + z h
class GRUImpl : public RNNImplBase {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  // (output, h_n)
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});

  GRUOptions options;
};
EMBER_MODULE(GRU);

}  // namespace ember::nn
