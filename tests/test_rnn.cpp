// RNN, LSTM and GRU against PyTorch (tools/gen_reference_nn.py, "rnn.*"): PyTorch's weights
// loaded by their names (a strict load: the same keys and shapes), the same input and initial
// states; the output, the final states and every gradient must agree.
#include <functional>

#include "helpers.h"

namespace ember {
namespace {

using States = std::vector<Tensor>;
// A case: its module, and forward(input, initial states) -> {output, final states...}.
struct RnnCase {
  std::shared_ptr<nn::Module> module;
  std::function<States(const Tensor&, const States&)> forward;
};

template <class Holder>
RnnCase one_state(Holder m) {
  return {m.ptr(), [m](const Tensor& x, const States& s) {
            auto [out, hn] = m->forward(x, s.empty() ? Tensor() : s[0]);
            return States{out, hn};
          }};
}

RnnCase make_case(const std::string& name) {
  using namespace nn;
  if (name == "lstm" || name == "lstm_2layer_bidir_batch_first") {
    LSTM m = name == "lstm" ? LSTM(3, 5) : LSTM(LSTMOptions(3, 4).num_layers(2).bidirectional(true).batch_first(true));
    return {m.ptr(), [m](const Tensor& x, const States& s) {
              auto [out, hc] = s.empty() ? m->forward(x) : m->forward(x, std::make_tuple(s[0], s[1]));
              return States{out, std::get<0>(hc), std::get<1>(hc)};
            }};
  }
  if (name == "gru") return one_state(GRU(GRUOptions(3, 5).num_layers(2)));
  if (name == "gru_bidir_unbatched") return one_state(GRU(GRUOptions(3, 4).bidirectional(true)));
  if (name == "rnn_relu_nobias") return one_state(RNN(RNNOptions(3, 4).nonlinearity(kReLU).bias(false)));
  if (name == "rnn_tanh_2layer") return one_state(RNN(RNNOptions(2, 3).num_layers(2).batch_first(true)));
  throw Error("no case " + name);
}

class RnnTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(RnnTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam()), base = "rnn." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  const auto at = [&](const std::string& key) { return testing::ref_tensor(ref, base + key); };
  RnnCase c = make_case(name);
  StateDict state;
  for (const auto& [key, t] : ref)
    if (key.rfind(base + "state.", 0) == 0) state.insert(key.substr(base.size() + 6), t.clone());
  c.module->load_state_dict(state);
  c.module->to(device);
  const double rtol = device.is_cuda() ? 1e-3 : 1e-4, atol = device.is_cuda() ? 1e-4 : 1e-5;

  const Tensor x = at("in").to(device, false, true).set_requires_grad(true);
  States initial;
  for (const char* key : {"h0", "c0"})
    if (ref.count(base + key)) initial.push_back(at(key).to(device, false, true).set_requires_grad(true));
  const States results = c.forward(x, initial);
  const std::vector<std::string> keys{"out", "hn", "cn"};
  Tensor loss = zeros({}, TensorOptions().device(device));
  for (size_t k = 0; k < results.size(); ++k) {
    EXPECT_TRUE(testing::all_close(results[k].cpu(), at(keys[k]), rtol, atol)) << name << " " << keys[k];
    loss = loss + (results[k] * at("g" + keys[k]).to(device)).sum();
  }
  loss.backward();
  EXPECT_TRUE(testing::all_close(x.grad().cpu(), at("grad_in"), rtol, atol)) << name << " input gradient";
  for (size_t k = 0; k < initial.size(); ++k)
    EXPECT_TRUE(testing::all_close(initial[k].grad().cpu(), at(k == 0 ? "grad_h0" : "grad_c0"), rtol, atol))
        << name << " initial state gradient " << k;
  for (const auto& p : c.module->named_parameters())
    EXPECT_TRUE(testing::all_close(p.value().grad().cpu(), at("grad." + p.key()), rtol, atol))
        << name << " gradient of " << p.key();
}

INSTANTIATE_TEST_SUITE_P(NN, RnnTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA),
                                            ::testing::Values("lstm", "lstm_2layer_bidir_batch_first", "gru",
                                                              "gru_bidir_unbatched", "rnn_relu_nobias",
                                                              "rnn_tanh_2layer")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param);
                         });

TEST(Rnn, GradientsMatchFiniteDifferencesThroughTime) {
  nn::LSTM lstm(nn::LSTMOptions(2, 3).num_layers(2).bidirectional(true));
  nn::GRU gru(2, 3);
  lstm->to(kFloat64);
  gru->to(kFloat64);
  const auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& x) {
        auto [out, hc] = lstm->forward(x[0]);
        auto [gout, h] = gru->forward(x[0]);
        return out.sum(2) + std::get<1>(hc).sum() + gout.sum(2) * h.sum();
      },
      {randn({4, 2, 2}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Rnn, OptionsNamesAndRefusals) {
  nn::LSTM lstm(nn::LSTMOptions(8, 16).num_layers(2).batch_first(true).dropout(0.1));
  EXPECT_EQ(lstm->named_parameters().size(), 8u);
  EXPECT_EQ(lstm->named_parameters()["weight_ih_l1"].sizes(), (Shape{64, 16}));
  std::ostringstream os;
  os << *lstm;
  EXPECT_NE(os.str().find("LSTM(8, 16, num_layers=2, batch_first=true, dropout=0.1)"), std::string::npos) << os.str();
  EXPECT_ERROR_CONTAINS(lstm->forward(zeros({2, 3, 7})),
                        "LSTM: expected input [B, T, 8] or [T, 8], got shape [2, 3, 7]");
  EXPECT_ERROR_CONTAINS(lstm->forward(zeros({2, 3, 8}), std::make_tuple(zeros({1, 2, 16}), zeros({2, 2, 16}))),
                        "LSTM: expected a hidden state of shape [2, 2, 16], got [1, 2, 16]");
  EXPECT_ERROR_CONTAINS(nn::GRU(0, 4), "GRU: input_size, hidden_size and num_layers must be positive");
  EXPECT_ERROR_CONTAINS(nn::RNN(nn::RNNOptions(2, 3).nonlinearity("sigmoid")),
                        "RNN: nonlinearity must be \"tanh\" or \"relu\", got \"sigmoid\"");
  // An empty sequence: no steps, the initial states come back.
  auto [out, h] = nn::GRU(2, 3)->forward(zeros({0, 4, 2}));
  EXPECT_EQ(out.sizes(), (Shape{0, 4, 3}));
  EXPECT_EQ(h.sizes(), (Shape{1, 4, 3}));
}

}  // namespace
}  // namespace ember
