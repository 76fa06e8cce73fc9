#include "ember/nn/modules/rnn.h"

#include <cmath>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/functional.h"
#include "ember/nn/init.h"

namespace ember::nn {

RNNImplBase::RNNImplBase(std::string type_name, const RNNShape& s, int64_t gates)
    : Module(std::move(type_name)), shape(s), gates_(gates) {
  const std::string& name = this->type_name();
  EMBER_CHECK(s.input_size > 0 && s.hidden_size > 0 && s.num_layers > 0, name,
              ": input_size, hidden_size and num_layers must be positive, got ", s.input_size, ", ", s.hidden_size,
              ", ", s.num_layers);
  EMBER_CHECK(s.dropout >= 0 && s.dropout <= 1, name, ": dropout must be in [0, 1], got ", s.dropout);
  const int64_t directions = s.bidirectional ? 2 : 1;
  for (int64_t layer = 0; layer < s.num_layers; ++layer)
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t in = layer == 0 ? s.input_size : s.hidden_size * directions;
      const std::string suffix = "_l" + std::to_string(layer) + (direction == 1 ? "_reverse" : "");
      std::vector<Tensor> w;
      w.push_back(register_parameter("weight_ih" + suffix, empty({gates * s.hidden_size, in})));
      w.push_back(register_parameter("weight_hh" + suffix, empty({gates * s.hidden_size, s.hidden_size})));
      if (s.bias) {
        w.push_back(register_parameter("bias_ih" + suffix, empty({gates * s.hidden_size})));
        w.push_back(register_parameter("bias_hh" + suffix, empty({gates * s.hidden_size})));
      } else {
        w.resize(4);
      }
      weights_.push_back(w);
    }
  reset_parameters();
}

void RNNImplBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(shape.hidden_size));
  for (auto& w : weights_)
    for (Tensor& t : w)
      if (t.defined()) init::uniform_(t, -bound, bound);
}

std::vector<Tensor> RNNImplBase::all_weights() const {
  std::vector<Tensor> out;
  for (const auto& w : weights_)
    for (const Tensor& t : w)
      if (t.defined()) out.push_back(t);
  return out;
}

void RNNImplBase::pretty_print(std::ostream& os) const {
  os << type_name() << "(" << shape.input_size << ", " << shape.hidden_size;
  if (shape.num_layers != 1) os << ", num_layers=" << shape.num_layers;
  if (!shape.bias) os << ", bias=false";
  if (shape.batch_first) os << ", batch_first=true";
  if (shape.dropout != 0) os << ", dropout=" << shape.dropout;
  if (shape.bidirectional) os << ", bidirectional=true";
  os << ")";
}

std::tuple<Tensor, std::vector<Tensor>> RNNImplBase::run(const Tensor& input, std::vector<Tensor> initial,
                                                         const Cell& cell) {
  const std::string& name = type_name();
  EMBER_CHECK(input.defined(), name, ": the input is undefined");
  const bool batched = input.dim() == 3;
  EMBER_CHECK((input.dim() == 2 || batched) && input.size(-1) == shape.input_size, name, ": expected input ",
              shape.batch_first ? "[B, T, " : "[T, B, ", shape.input_size, "] or [T, ", shape.input_size,
              "], got shape ", shape_str(input.sizes()));
  // [T, B, F] from here on
  const Tensor x = !batched ? input.unsqueeze(1) : shape.batch_first ? input.transpose(0, 1) : input;
  const int64_t T = x.size(0), B = x.size(1), H = shape.hidden_size, D = shape.bidirectional ? 2 : 1;
  const Shape state_shape{shape.num_layers * D, B, H};
  for (Tensor& h : initial) {
    if (!h.defined()) {
      h = zeros(state_shape, TensorOptions(x.dtype()).device(x.device()));
      continue;
    }
    const Tensor given = h;
    if (!batched && h.dim() == 2) h = h.unsqueeze(1);
    EMBER_CHECK(h.sizes() == state_shape, name, ": expected a hidden state of shape ",
                shape_str(batched ? state_shape : Shape{state_shape[0], H}), ", got ", shape_str(given.sizes()));
  }
  std::vector<std::vector<Tensor>> finals(initial.size());  // per state, per layer and direction: [B, H]
  Tensor layer_input = x;
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    std::vector<Tensor> directions;
    for (int64_t direction = 0; direction < D; ++direction) {
      const std::vector<Tensor>& w = weights_[static_cast<size_t>(layer * D + direction)];
      const Tensor input_gates = linear(layer_input, w[0], w[2]);  // every step's input part at once: [T, B, G H]
      std::vector<Tensor> state;
      for (const Tensor& h : initial) state.push_back(h.select(0, layer * D + direction));
      std::vector<Tensor> steps(static_cast<size_t>(T));
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = direction == 0 ? s : T - 1 - s;
        cell(input_gates.select(0, t), w[1], w[3], state);
        steps[static_cast<size_t>(t)] = state[0];
      }
      directions.push_back(T > 0 ? stack(steps, 0) : zeros({0, B, H}, TensorOptions(x.dtype()).device(x.device())));
      for (size_t k = 0; k < state.size(); ++k) finals[k].push_back(state[k]);
    }
    layer_input = D == 1 ? directions[0] : cat(directions, 2);
    if (shape.dropout > 0 && is_training() && layer + 1 < shape.num_layers)
      layer_input = functional::dropout(layer_input, shape.dropout, true);
  }
  const Tensor output = !batched            ? layer_input.squeeze(1)
                        : shape.batch_first ? layer_input.transpose(0, 1)
                                            : layer_input;
  std::vector<Tensor> states;
  for (const auto& f : finals) states.push_back(batched ? stack(f, 0) : stack(f, 0).squeeze(1));
  return {output, states};
}

RNNImpl::RNNImpl(const RNNOptions& o) : RNNImplBase("RNN", RNNShape::of(o), 1), options(o) {
  EMBER_CHECK(o.nonlinearity() == "tanh" || o.nonlinearity() == "relu",
              "RNN: nonlinearity must be \"tanh\" or \"relu\", got \"", o.nonlinearity(), "\"");
}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, const Tensor& hx) {
  const bool relu_cell = options.nonlinearity() == "relu";
  auto [output, states] = run(input, {hx}, [&](const Tensor& gi, const Tensor& w_hh, const Tensor& b_hh, auto& s) {
    const Tensor pre = gi + linear(s[0], w_hh, b_hh);
    s[0] = relu_cell ? pre.relu() : pre.tanh();
  });
  return {output, states[0]};
}

LSTMImpl::LSTMImpl(const LSTMOptions& o) : RNNImplBase("LSTM", RNNShape::of(o), 4), options(o) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(const Tensor& input,
                                                                 std::optional<std::tuple<Tensor, Tensor>> hx) {
  std::vector<Tensor> initial(2);
  if (hx) initial = {std::get<0>(*hx), std::get<1>(*hx)};
  auto [output, states] = run(input, initial, [](const Tensor& gi, const Tensor& w_hh, const Tensor& b_hh, auto& s) {
    const std::vector<Tensor> g = (gi + linear(s[0], w_hh, b_hh)).chunk(4, 1);  // i, f, g, o
    s[1] = g[1].sigmoid() * s[1] + g[0].sigmoid() * g[2].tanh();
    s[0] = g[3].sigmoid() * s[1].tanh();
  });
  return {output, {states[0], states[1]}};
}

GRUImpl::GRUImpl(const GRUOptions& o) : RNNImplBase("GRU", RNNShape::of(o), 3), options(o) {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, const Tensor& hx) {
  auto [output, states] = run(input, {hx}, [](const Tensor& gi, const Tensor& w_hh, const Tensor& b_hh, auto& s) {
    const std::vector<Tensor> i = gi.chunk(3, 1), h = linear(s[0], w_hh, b_hh).chunk(3, 1);  // r, z, n
    const Tensor r = (i[0] + h[0]).sigmoid(), z = (i[1] + h[1]).sigmoid();
    const Tensor n = (i[2] + r * h[2]).tanh();
    s[0] = n + z * (s[0] - n);  // (1 - z) n + z h
  });
  return {output, states[0]};
}

}  // namespace ember::nn
