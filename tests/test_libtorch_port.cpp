// LibTorch programs port with one include: each test is written the way a LibTorch C++ frontend
// program is (torch::, the frontend's macros and idioms), built against <ember/torch.h>, and
// checks the values: against PyTorch's reference files where a computation is PyTorch's
// (tools/gen_reference*.py), exactly where the answer is known.
#include <ember/torch.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "helpers.h"

namespace {

using ember::testing::all_close;

// ---- the data API: a CRTP dataset through map, Stack and make_data_loader ----

// Example i: data [1, 2, 2] filled with i, target i % 3.
struct Counting : torch::data::datasets::Dataset<Counting> {
  explicit Counting(size_t n) : n_(n) {}
  torch::data::Example<> get(size_t index) override {
    return {torch::full({1, 2, 2}, static_cast<double>(index)), torch::tensor({static_cast<int64_t>(index % 3)})[0]};
  }
  torch::optional<size_t> size() const override { return n_; }
  size_t n_;
};

TEST(LibTorchPort, CrtpDatasetMapStackAndLoader) {
  auto dataset =
      Counting(10).map(torch::data::transforms::Normalize<>(1.0, 2.0)).map(torch::data::transforms::Stack<>());
  EXPECT_EQ(dataset.size().value(), 10u);
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(4).workers(2));
  for (int epoch = 0; epoch < 2; ++epoch) {  // each pass over the loader is an epoch
    std::vector<int64_t> sizes;
    int64_t next = 0;
    for (torch::data::Example<>& batch : *loader) {
      const int64_t n = batch.data.size(0);
      sizes.push_back(n);
      EXPECT_EQ(batch.data.sizes(), (torch::Shape{n, 1, 2, 2}));
      for (int64_t k = 0; k < n; ++k, ++next) {
        EXPECT_DOUBLE_EQ(batch.data[k][0][1][1].item<double>(), (static_cast<double>(next) - 1.0) / 2.0);
        EXPECT_EQ(batch.target[k].item<int64_t>(), next % 3);
      }
    }
    EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  }
}

TEST(LibTorchPort, BatchesWithoutStackAreVectorsOfExamples) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(Counting(5), 2);
  std::vector<size_t> sizes;
  for (std::vector<torch::data::Example<>>& batch : *loader) {
    sizes.push_back(batch.size());
    EXPECT_EQ(batch[0].data.sizes(), (torch::Shape{1, 2, 2}));
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
}

// LibTorch's TensorDataset: examples without targets, stacked by Stack<TensorExample> or kept as
// a vector, through the same loader.
TEST(LibTorchPort, TensorDatasetOfDataOnlyExamples) {
  const torch::Tensor rows = torch::arange(15, torch::kFloat32).reshape({5, 3});
  torch::data::datasets::TensorDataset dataset(rows);
  EXPECT_EQ(dataset.size().value(), 5u);
  torch::data::TensorExample third = dataset.get(2);
  EXPECT_EQ(third->sizes(), (torch::Shape{3}));
  EXPECT_EQ((*third).to_vector<float>(), (std::vector<float>{6, 7, 8}));
  EXPECT_TRUE(third.data.shares_storage(rows)) << "a row is a view, as tensor[i] is";

  auto stacked = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      dataset.map(torch::data::transforms::Stack<torch::data::TensorExample>()),
      torch::data::DataLoaderOptions().batch_size(2).workers(2));
  std::vector<float> firsts;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (torch::data::TensorExample& batch : *stacked) {
      EXPECT_EQ(batch.data.size(1), 3);
      for (int64_t k = 0; k < batch.data.size(0); ++k) firsts.push_back(batch.data[k][0].item<float>());
    }
  EXPECT_EQ(firsts, (std::vector<float>{0, 3, 6, 9, 12, 0, 3, 6, 9, 12}));

  auto vectors = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      torch::data::datasets::TensorDataset({torch::ones({2}), torch::zeros({2}), torch::full({2}, 5.0)}), 2);
  std::vector<size_t> sizes;
  float total = 0;
  for (std::vector<torch::data::TensorExample>& batch : *vectors) {
    sizes.push_back(batch.size());
    for (const auto& e : batch) total += e->sum().item<float>();
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(total, 12.0f);

  EXPECT_ERROR_CONTAINS(dataset.get(5), "TensorDataset: index 5 is out of range for 5 examples of [5, 3]");
  EXPECT_ERROR_CONTAINS(torch::data::datasets::TensorDataset(torch::ones({})), "at least one dim");
  EXPECT_ERROR_CONTAINS(torch::data::datasets::TensorDataset(std::vector<torch::Tensor>{}), "no tensors to stack");
  EXPECT_ERROR_CONTAINS(torch::data::datasets::TensorDataset({torch::ones({2}), torch::ones({3})}), "stack");
  EXPECT_ERROR_CONTAINS(torch::data::transforms::Stack<torch::data::TensorExample>().apply_batch({}), "an empty batch");
}

TEST(LibTorchPort, RandomAndDistributedSamplers) {
  // RandomSampler (make_data_loader's default): every index once per epoch, a new order each
  // epoch, the same orders after the same manual_seed.
  auto orders = [] {
    torch::manual_seed(11);
    auto loader = torch::data::make_data_loader(Counting(12).map(torch::data::transforms::Stack<>()), 12);
    std::vector<std::vector<double>> out;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& batch : *loader) out.push_back(batch.data.flatten(1).select(1, 0).to_vector<double>());
    return out;
  };
  const auto a = orders(), b = orders();
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(std::set<double>(a[0].begin(), a[0].end()).size(), 12u);
  // DistributedRandomSampler: the replicas' slices cover the dataset (padded to equal sizes).
  std::multiset<int64_t> seen;
  for (size_t rank = 0; rank < 3; ++rank) {
    torch::data::samplers::DistributedRandomSampler sampler(10, 3, rank);
    EXPECT_EQ(sampler.size(), 4);
    for (int64_t i : sampler.indices(/*epoch=*/5)) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 12u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  EXPECT_EQ(torch::data::samplers::DistributedRandomSampler(10, 3, 0, /*allow_duplicates=*/false).size(), 3);
  EXPECT_ERROR_CONTAINS(torch::data::samplers::DistributedRandomSampler(10, 3, 3), "rank 3 is out of range for 3");
  // LibTorch's slices, position by position: [0, 1, 2, 3, 4] padded to [0, 1, 2, 3, 4, 0].
  using torch::data::samplers::DistributedSequentialSampler;
  const std::vector<std::vector<int64_t>> slices = {{0, 1}, {2, 3}, {4, 0}};
  for (size_t rank = 0; rank < 3; ++rank) EXPECT_EQ(DistributedSequentialSampler(5, 3, rank).indices(0), slices[rank]);
  EXPECT_EQ(DistributedSequentialSampler(5, 3, 2, /*allow_duplicates=*/false).indices(0), (std::vector<int64_t>{2}));
  // Bug: the padded list was built whole, as long as num_replicas (minutes for 2^62).
  const size_t huge = size_t{1} << 62;
  EXPECT_EQ(DistributedSequentialSampler(3, huge, huge - 1).indices(0),
            (std::vector<int64_t>{static_cast<int64_t>((huge - 1) % 3)}));
  EXPECT_ERROR_CONTAINS(DistributedSequentialSampler(3, size_t{1} << 63, 0), "must fit in int64");
}

TEST(LibTorchPort, MnistAsAValueDataset) {
  const std::string root = std::string(EMBER_SHARED_DATA_DIR) + "/mnist";
  if (!std::ifstream(root + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "no MNIST in " << root;
  auto test = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest);
  EXPECT_FALSE(test.is_train());
  EXPECT_EQ(test.size().value(), 10000u);
  const auto first = test.get(0);
  EXPECT_EQ(first.data.sizes(), (torch::Shape{1, 28, 28}));
  EXPECT_EQ(first.target.item<int64_t>(), 7);  // the first test digit is a 7
  EXPECT_LE(first.data.max().item<float>(), 1.0f);
  EXPECT_ERROR_CONTAINS(test.get(10000), "MNIST: index 10000 is out of range for 10000 images");
}

// ---- autograd: a custom Function and a gradient penalty ----

struct ScaledSquare : torch::autograd::Function<ScaledSquare> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, double c) {
    ctx->save_for_backward({x});
    ctx->saved_data["c"] = c;
    return x * x * c;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto x = ctx->get_saved_variables()[0];
    return {grads[0] * 2 * x * ctx->saved_data["c"].toDouble(), torch::Tensor()};
  }
};

TEST(LibTorchPort, CustomFunction) {
  auto x = torch::tensor({1.0, -2.0, 3.0}, torch::dtype(torch::kF64).requires_grad(true));
  auto y = ScaledSquare::apply(x, 1.5);
  y.sum().backward();
  EXPECT_TRUE(all_close(y.detach(), torch::tensor({1.5, 6.0, 13.5}), 0, 0));
  EXPECT_TRUE(all_close(x.grad(), torch::tensor({3.0, -6.0, 9.0}), 0, 0));
  EXPECT_EQ(y.grad_fn()->name(), "ScaledSquareBackward");
}

TEST(LibTorchPort, GradientPenaltyMatchesPyTorch) {
  const auto& ref = ember::testing::reference_grads();
  auto R = [&](const std::string& name) { return ember::testing::ref_tensor(ref, "double.gp." + name).clone(); };
  auto w1 = R("w1").requires_grad_(true), b1 = R("b1").requires_grad_(true);
  auto w2 = R("w2").requires_grad_(true), b2 = R("b2").requires_grad_(true);
  auto x = R("x").requires_grad_(true);
  namespace F = torch::nn::functional;
  auto critic = F::linear(torch::tanh(F::linear(x, w1, b1)), w2, b2);
  auto gx = torch::autograd::grad({critic.sum()}, {x}, /*grad_outputs=*/{}, /*retain_graph=*/true,
                                  /*create_graph=*/true)[0];
  auto penalty = (gx.norm(2, 1) - 1).pow(2).mean();
  penalty.backward();
  EXPECT_TRUE(all_close(gx, R("gx"), 1e-12, 1e-12));
  EXPECT_NEAR(penalty.item<double>(), R("penalty").item<double>(), 1e-12);
  EXPECT_TRUE(all_close(w1.grad(), R("grad_w1"), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(w2.grad(), R("grad_w2"), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(b1.grad(), R("grad_b1"), 1e-10, 1e-12));
}

// ---- modules: ConvTranspose2d and a DCGAN generator block against PyTorch ----

TEST(LibTorchPort, ConvTranspose2dMatchesPyTorch) {
  const auto& ref = ember::testing::reference_nn();
  torch::nn::ConvTranspose2d up(
      torch::nn::ConvTranspose2dOptions(4, 6, 3).stride(2).padding(1).output_padding(1).groups(2));
  torch::OrderedDict<torch::Tensor> state;
  for (const auto& [key, value] : ref)
    if (key.rfind("layer.conv_transpose2d.state.", 0) == 0)
      state.insert(key.substr(std::string("layer.conv_transpose2d.state.").size()), value.clone());
  up->load_state_dict(state);
  auto x = ember::testing::ref_tensor(ref, "layer.conv_transpose2d.in").clone().requires_grad_(true);
  auto y = up->forward(x);
  EXPECT_TRUE(all_close(y, ember::testing::ref_tensor(ref, "layer.conv_transpose2d.out"), 1e-4, 1e-5));
  y.backward(ember::testing::ref_tensor(ref, "layer.conv_transpose2d.gout"));
  EXPECT_TRUE(
      all_close(up->weight.grad(), ember::testing::ref_tensor(ref, "layer.conv_transpose2d.grad.weight"), 1e-4, 1e-5));
  for (const auto& p : up->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
}

// A module written as LibTorch programs write them: a by-value forward that does not override
// Module::forward, used inside a Sequential.
struct TimesTwoImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x * 2; }
};
TORCH_MODULE(TimesTwo);

struct SmallNet : torch::nn::Module {
  SmallNet() : fc(register_module("fc", torch::nn::Linear(3, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::log_softmax(fc->forward(x), /*dim=*/1); }
  torch::nn::Linear fc;
};

TEST(LibTorchPort, ModulesOptimizersAndLosses) {
  torch::nn::Sequential seq(TimesTwo(), torch::nn::Functional(torch::relu),
                            torch::nn::Functional(torch::leaky_relu, 0.5));
  EXPECT_TRUE(all_close(seq->forward(torch::tensor({-1.0f, 2.0f})), torch::tensor({0.0f, 4.0f}), 0, 0));

  torch::manual_seed(0);
  auto net = std::make_shared<SmallNet>();
  torch::optim::SGD optimizer(net->parameters(), /*lr=*/0.1);  // SGDOptions(lr) implicitly
  auto x = torch::randn({8, 3});
  auto target = torch::randint(0, 2, {8});
  auto out = net->forward(x);
  // ATen's spelling, the functional's and the module's agree.
  auto loss = torch::nll_loss(out, target);
  EXPECT_TRUE(all_close(loss, torch::nn::functional::nll_loss(out, target), 0, 0));
  auto summed = torch::nll_loss(out, target, /*weight=*/{}, torch::Reduction::Sum);
  EXPECT_NEAR(summed.item<double>(), loss.item<double>() * 8, 1e-5);
  EXPECT_NEAR(torch::nn::NLLLoss(torch::nn::NLLLossOptions().reduction(torch::kSum))(out, target).item<double>(),
              summed.item<double>(), 1e-6);
  EXPECT_ERROR_CONTAINS(torch::nll_loss(out, target, {}, 7), "nll_loss: reduction must be Reduction::None");
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
  EXPECT_LT(torch::nll_loss(net->forward(x), target).item<double>(), loss.item<double>());
  for (const auto& item : net->named_parameters()) EXPECT_EQ(item.key().rfind("fc.", 0), 0u);
  net->eval();
  EXPECT_FALSE(net->is_training());

  namespace F = torch::nn::functional;
  auto image = torch::arange(16.0).reshape({1, 1, 4, 4});
  EXPECT_TRUE(all_close(torch::max_pool2d(image, 2), F::max_pool2d(image, F::MaxPool2dFuncOptions(2)), 0, 0));
  EXPECT_EQ(torch::max_pool2d(image, 2).sizes(), (torch::Shape{1, 1, 2, 2}));
  EXPECT_TRUE(torch::dropout(image, 0.5, /*train=*/false).is_same(image));
  EXPECT_TRUE(F::dropout(image, F::DropoutFuncOptions().p(0.5).training(false)).is_same(image));
  EXPECT_TRUE(all_close(F::log_softmax(image, F::LogSoftmaxFuncOptions(3)), torch::log_softmax(image, 3), 0, 0));
  EXPECT_TRUE(all_close(F::mse_loss(image, image * 2, F::MSELossFuncOptions().reduction(torch::kSum)),
                        torch::mse_loss(image, image * 2, torch::Reduction::Sum), 0, 0));
}

// ---- tensor conveniences ----

TEST(LibTorchPort, TensorIdioms) {
  auto x = torch::arange(6.0).reshape({2, 3});
  EXPECT_TRUE(all_close(x.sum(1), torch::tensor({3.0f, 12.0f}), 0, 0));
  EXPECT_TRUE(all_close(torch::sum(x, 0), torch::tensor({3.0f, 5.0f, 7.0f}), 0, 0));
  EXPECT_TRUE(all_close(x.mean(1, /*keepdim=*/true), torch::tensor({1.0f, 4.0f}).reshape({2, 1}), 0, 0));
  EXPECT_EQ(x.sum({}).dim(), 0);  // {} still means every dim
  // (A bug this fixed: x.prod({}) chose the old prod(int64_t dim) overload, {} being 0, and
  // multiplied over dim 0 only.)
  EXPECT_EQ(x.prod({}).dim(), 0);
  EXPECT_EQ(x.prod(0).sizes(), (torch::Shape{3}));
  EXPECT_EQ(x.view(-1).sizes(), (torch::Shape{6}));
  EXPECT_EQ(torch::zeros(3).sizes(), (torch::Shape{3}));
  EXPECT_EQ(torch::empty(4, torch::kCPU).sizes(), (torch::Shape{4}));
  EXPECT_NEAR(x.norm(2, 1)[1].item<double>(), std::sqrt(9.0 + 16.0 + 25.0), 1e-6);
  EXPECT_EQ(torch::ones({2, 2}, torch::kF64).dtype(), torch::kDouble);
  EXPECT_EQ(torch::kLong, torch::kInt64);

  auto w = torch::ones({2, 2}, torch::requires_grad());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(torch::tensor({1.0, 2.0}, torch::requires_grad()).requires_grad());
  EXPECT_ERROR_CONTAINS(torch::zeros({2}, torch::TensorOptions(torch::kLong).requires_grad(true)),
                        "only tensors of floating point dtype can require gradients");
  (w * w).sum().backward();
  w.mutable_grad() = torch::zeros_like(w);  // assignable
  EXPECT_EQ(w.grad().sum().item<float>(), 0.0f);
  {
    torch::NoGradGuard no_grad;
    w.data().mul_(3);  // data(): the values without history
  }
  EXPECT_EQ(w.sum().item<float>(), 12.0f);

  auto m = torch::tensor({1.0f, 2.0f, 3.0f});
  m.ge_(2.0);  // in place: 1 where true, 0 where false, in m's dtype
  EXPECT_TRUE(all_close(m, torch::tensor({0.0f, 1.0f, 1.0f}), 0, 0));
  auto a = x.accessor<float, 2>();
  EXPECT_EQ(a[1][2], 5.0f);
  a[0][0] = 7.0f;
  EXPECT_EQ(x[0][0].item<float>(), 7.0f);
  EXPECT_ERROR_CONTAINS((x.accessor<float, 1>()), "accessor: expected a 1-d tensor, got shape [2, 3]");

  // Sizes print as LibTorch's IntArrayRef prints them; vec() copies them out.
  std::ostringstream printed;
  printed << x.sizes() << " " << x.t().strides() << " " << torch::zeros({}).sizes();
  EXPECT_EQ(printed.str(), "[2, 3] [1, 3] []");
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.push_back(1);
  const torch::IntArrayRef grown = x.view(sizes).sizes();
  EXPECT_EQ(grown, (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(torch::str("shape ", x.sizes()), "shape [2, 3]");

  EXPECT_EQ(torch::str("epoch ", 3, ": ", 0.5), "epoch 3: 0.5");
  EXPECT_ERROR_CONTAINS([&] { TORCH_CHECK(x.dim() == 3, "got ", x.dim(), " dims"); }(),
                        "Expected x.dim() == 3 to be true. got 2 dims");
  EXPECT_ERROR_CONTAINS([] { AT_ASSERT(false); }(), "Assertion failed: false");
}

// What the C++ frontend's tutorials and examples call beyond the above: each of these failed to
// compile against ember before (the values of the ops themselves are checked against PyTorch in
// test_reference.cpp).
TEST(LibTorchPort, ScalarsFactoriesAndTheLikeForms) {
  // item() as LibTorch's Scalar, with its checked integer conversions.
  auto x = torch::tensor({1.5f, 2.25f});
  EXPECT_EQ(x.sum().item().toFloat(), 3.75f);
  EXPECT_EQ(x.sum().item().toDouble(), 3.75);
  EXPECT_EQ(x.sum().item().toInt(), 3);
  EXPECT_EQ(torch::tensor({-7}).sum().item().toLong(), -7);
  EXPECT_TRUE(x.sum().item().toBool());
  EXPECT_ERROR_CONTAINS(torch::tensor(int64_t{1} << 40).item().toInt(),
                        "Scalar::toInt: value 1099511627776 cannot be converted without overflow");
  EXPECT_ERROR_CONTAINS(torch::tensor(1e300).item().toLong(), "Scalar::toLong: value 1e+300 cannot be converted");
  EXPECT_ERROR_CONTAINS(torch::tensor(std::nan("")).item().toInt(), "cannot be converted without overflow");
  EXPECT_EQ(torch::tensor(-2147483648.9).item().toInt(), -2147483648);  // truncated toward zero first

  // 0-d tensors from one number; int literals are int64 as in LibTorch.
  EXPECT_EQ(torch::tensor(3.5).dim(), 0);
  EXPECT_EQ(torch::tensor(3.5).dtype(), torch::kFloat64);
  EXPECT_EQ(torch::tensor(3.5f).dtype(), torch::kFloat32);
  EXPECT_EQ(torch::tensor(3).dtype(), torch::kInt64);
  EXPECT_EQ(torch::tensor(true).dtype(), torch::kBool);
  EXPECT_EQ(torch::tensor(3, torch::kFloat16).dtype(), torch::kFloat16);
  EXPECT_TRUE(torch::tensor(2.0, torch::requires_grad()).requires_grad());
  EXPECT_EQ(torch::tensor({0, 2, 1}).dtype(), torch::kInt64);  // class targets, as nll_loss takes them
  EXPECT_EQ(torch::tensor({0, 2, 1}, torch::requires_grad(false)).dtype(), torch::kInt64);
  EXPECT_EQ(torch::tensor({1.0, 2.0}, torch::requires_grad()).dtype(), torch::kFloat64);
  EXPECT_EQ(torch::tensor(std::vector<int32_t>{1, 2}).dtype(), torch::kInt32);  // an explicit type stays

  // *_like with options: what the options give, the tensor's dtype and device otherwise.
  auto h = torch::zeros({2, 3}, torch::kFloat16);
  EXPECT_EQ(torch::ones_like(h).dtype(), torch::kFloat16);
  EXPECT_EQ(torch::ones_like(h, torch::kFloat64).dtype(), torch::kFloat64);
  EXPECT_EQ(torch::zeros_like(h, torch::TensorOptions().requires_grad(true)).dtype(), torch::kFloat16);
  EXPECT_TRUE(torch::randn_like(h, torch::requires_grad()).requires_grad());
  EXPECT_EQ(torch::full_like(h, 7, torch::kInt32).sum().item<int64_t>(), 42);
  EXPECT_EQ(torch::empty_like(h, torch::kCPU).sizes(), h.sizes());
  EXPECT_EQ(torch::rand_like(h, torch::dtype(torch::kFloat32)).dtype(), torch::kFloat32);
  EXPECT_ERROR_CONTAINS(torch::ones_like(torch::Tensor()), "ones_like: the tensor is undefined");

  auto l = torch::logspace(0, 2, 3);
  EXPECT_EQ(l.dtype(), torch::kFloat32);
  EXPECT_TRUE(torch::allclose(l, torch::tensor({1.0f, 10.0f, 100.0f})));
  EXPECT_TRUE(torch::allclose(torch::logspace(1, 3, 3, 2.0, torch::kFloat64), torch::tensor({2.0, 4.0, 8.0}), 0, 0));
  EXPECT_ERROR_CONTAINS(torch::logspace(0, 1, 3, 10, torch::kInt64), "logspace: expected a floating dtype");

  // The split forms, elementwise max/min, addmm as a method, clamp_min/max.
  auto m = torch::arange(12.0f).reshape({3, 4});
  auto parts = m.split({1, 3}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].sizes(), (torch::Shape{3, 3}));
  EXPECT_TRUE(torch::equal(torch::max(m, 11 - m), torch::maximum(m, 11 - m)));
  EXPECT_TRUE(torch::equal(m.min(11 - m), torch::minimum(m, 11 - m)));
  EXPECT_TRUE(torch::allclose(m.addmm(m, torch::eye(4), 2, 0.5), m * 2.5));
  EXPECT_TRUE(torch::equal(m.clamp_min(3).clamp_max(5), m.clamp(3, 5)));
  EXPECT_TRUE((m + 1).allclose((m + 1) * 1.000001f));  // within rtol 1e-5
  EXPECT_FALSE(m.allclose(m + 1e-7f));                 // at 0 only atol 1e-8 applies, as in PyTorch
  EXPECT_TRUE(torch::isnan(torch::tensor({std::nan("")})).all().item<bool>());
  EXPECT_FALSE(torch::isinf(torch::tensor({1, 2})).any().item<bool>());  // integers: never
  EXPECT_TRUE(torch::isfinite(torch::tensor({1, 2})).all().item<bool>());
}

TEST(LibTorchPort, CompositeOpsRefuseBadArguments) {
  auto v = torch::randn({3}), m = torch::randn({2, 3});
  EXPECT_ERROR_CONTAINS(torch::dot(v, m), "dot: 1D tensors expected, but got 1D and 2D tensors");
  EXPECT_ERROR_CONTAINS(torch::dot(v, torch::randn({4})), "dot: inconsistent tensor size");
  EXPECT_ERROR_CONTAINS(torch::dot(v, v.to(torch::kFloat64)), "dot: expected both vectors to have same dtype");
  EXPECT_ERROR_CONTAINS(torch::outer(v, m), "outer: expected 1-D tensors, got shapes [3] and [2, 3]");
  EXPECT_ERROR_CONTAINS(m.flip({1, -1}), "flip: dim 1 appears multiple times in the list of dims");
  EXPECT_ERROR_CONTAINS(m.flip({2}), "flip: dimension out of range");
  EXPECT_ERROR_CONTAINS(m.roll({1, 2}, {0}), "roll: shifts and dimensions must align");
  EXPECT_ERROR_CONTAINS(m.roll({1, 2}), "roll: without dims, expected one shift, got [1, 2]");
  EXPECT_ERROR_CONTAINS(m.repeat_interleave(-1), "repeat_interleave: repeats can not be negative, got -1");
  EXPECT_ERROR_CONTAINS(m.repeat_interleave(torch::tensor({1, 2}), 1), "repeats must have the same size as input");
  EXPECT_ERROR_CONTAINS(m.repeat_interleave(torch::tensor({1.0, 2.0}), 0), "repeats has to be Long or Int tensor");
  EXPECT_ERROR_CONTAINS(m.repeat_interleave(torch::tensor({1, -2}), 0), "repeats can not be negative, got -2");
  EXPECT_ERROR_CONTAINS(m.repeat_interleave(int64_t{1} << 62, 1), "overflow int64");
  EXPECT_ERROR_CONTAINS(torch::isclose(v, v.to(torch::kFloat64)), "isclose: float32 did not match float64");
  EXPECT_ERROR_CONTAINS(torch::isclose(v, v, -1), "isclose: rtol and atol must be non-negative");
  EXPECT_ERROR_CONTAINS(torch::tensor({true}).floor(), "floor: not implemented for bool tensors");
  EXPECT_TRUE(torch::equal(torch::tensor({-3, 4}).round(), torch::tensor({-3, 4})));  // integers: a copy
  // Flip and roll of empty, 0-d and size-1 dims are copies, never views.
  auto s = torch::tensor(2.0);
  EXPECT_FALSE(s.flip({0}).is_same(s));
  EXPECT_EQ(s.roll(3).item<double>(), 2.0);
  EXPECT_EQ(torch::zeros({0, 2}).roll({1, 1}, {0, 1}).sizes(), (torch::Shape{0, 2}));
  EXPECT_EQ(s.repeat_interleave(3).sizes(), (torch::Shape{3}));
}

TEST(LibTorchPort, LayersInitAndParameterGroups) {
  namespace F = torch::nn::functional;
  // ReLU(inplace): overwrites its input where the tape would not record it, else leaves it.
  auto relu = torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true));
  auto a = torch::tensor({-1.0f, 2.0f});
  auto out = relu(a);
  EXPECT_TRUE(torch::equal(a, torch::tensor({0.0f, 2.0f})));
  EXPECT_TRUE(out.is_same(a));
  auto w = torch::tensor({-1.0f, 2.0f}, torch::requires_grad());
  auto y = relu(w * 1.0f);
  y.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({0.0f, 1.0f})));
  std::ostringstream printed;
  printed << *relu;
  EXPECT_EQ(printed.str(), "ReLU(inplace=true)");

  auto pool = torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({1, 2}));
  EXPECT_EQ(pool(torch::randn({1, 3, 4, 4})).sizes(), (torch::Shape{1, 3, 1, 2}));

  // kaiming_normal_ with LibTorch's tags: std = gain / sqrt(fan_out), gain sqrt(2) for ReLU.
  torch::manual_seed(5);
  auto weight = torch::empty({256, 64, 3, 3});
  torch::nn::init::kaiming_normal_(weight, 0.0, torch::kFanOut, torch::kReLU);
  EXPECT_NEAR(weight.std().item<double>(), std::sqrt(2.0 / (256 * 9)), 0.002);
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0), torch::kFanIn, torch::kLeakyReLU);
  EXPECT_LE(weight.abs().max().item<double>(), std::sqrt(6.0 / 6.0 / (64 * 9)) + 1e-6);

  // Losses through their options, as modules and as functions.
  auto p = torch::randn({4, 3}), t = torch::randn({4, 3});
  EXPECT_TRUE(torch::allclose(torch::nn::HuberLoss(torch::nn::HuberLossOptions().delta(2.0))(p, t),
                              F::smooth_l1_loss(p, t, F::SmoothL1LossFuncOptions().beta(2.0)) * 2.0));
  EXPECT_TRUE(torch::allclose(torch::nn::SmoothL1Loss(torch::nn::SmoothL1LossOptions().reduction("sum"))(p, t),
                              F::smooth_l1_loss(p, t, "sum")));
  EXPECT_ERROR_CONTAINS(F::huber_loss(p, t, "mean", 0), "huber_loss: delta must be > 0, got 0");

  // Parameters as one vector and back.
  auto net = torch::nn::Linear(3, 2);
  auto flat = torch::nn::utils::parameters_to_vector(net->parameters());
  ASSERT_EQ(flat.sizes(), (torch::Shape{8}));
  EXPECT_TRUE(torch::equal(flat.narrow(0, 0, 6), net->weight.reshape({-1})));
  torch::nn::utils::vector_to_parameters(torch::arange(8.0f), net->parameters());
  EXPECT_EQ(net->bias[1].item<float>(), 7.0f);
  EXPECT_FALSE(net->weight.grad_fn());  // still a leaf
  EXPECT_ERROR_CONTAINS(torch::nn::utils::vector_to_parameters(torch::zeros({7}), net->parameters()),
                        "vector_to_parameters: the parameters hold 8 elements, the vector 7");

  // Parameter groups with their own options, LibTorch's way.
  auto other = torch::nn::Linear(3, 1);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net->parameters());
  groups.emplace_back(other->parameters(), std::make_unique<torch::optim::SGDOptions>(0.5));
  torch::optim::SGD sgd(std::move(groups), torch::optim::SGDOptions(0.1));
  EXPECT_EQ(sgd.param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(sgd.param_groups()[1].options().get_lr(), 0.5);
  for (auto& group : sgd.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(0.01);
  EXPECT_EQ(sgd.param_groups()[1].options().get_lr(), 0.01);
}

TEST(LibTorchPort, NewTensorsUnbindClipSwapaxesGroupNorm) {
  auto h = torch::randn({2, 3}).to(torch::kFloat64);
  auto z = h.new_zeros({4});
  EXPECT_EQ(z.dtype(), torch::kFloat64);
  EXPECT_EQ(z.sum().item<double>(), 0.0);
  EXPECT_EQ(h.new_ones({2, 2}).sum().item<double>(), 4.0);
  EXPECT_EQ(h.new_full({3}, 2.5).sum().item<double>(), 7.5);
  EXPECT_EQ(h.new_empty({5}).sizes(), (torch::Shape{5}));
  auto rows = h.unbind();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[1].shares_storage(h));  // views
  EXPECT_TRUE(torch::equal(torch::unbind(h, -1)[2], h.select(1, 2)));
  EXPECT_ERROR_CONTAINS(torch::tensor(1.0).unbind(), "unbind: a 0-d tensor has no dimension to unbind");
  EXPECT_TRUE(torch::equal(h.clip(-0.5, 0.5), h.clamp(-0.5, 0.5)));
  EXPECT_TRUE(torch::equal(torch::clip(h, 0), h.clamp_min(0)));
  EXPECT_TRUE(torch::equal(h.swapaxes(0, 1), h.t()));
  auto gn = torch::nn::GroupNorm(torch::nn::GroupNormOptions(2, 4).eps(1e-3).affine(false));
  EXPECT_EQ(gn->eps, 1e-3);
  EXPECT_FALSE(gn->weight.defined());
  EXPECT_ERROR_CONTAINS(torch::nn::GroupNorm(torch::nn::GroupNormOptions(3, 4)), "must be divisible by num_groups");
  namespace F = torch::nn::functional;
  EXPECT_ERROR_CONTAINS(F::normalize(torch::tensor({1, 2})), "normalize: expected a floating tensor, got int64");
  EXPECT_TRUE(torch::allclose(F::normalize(torch::zeros({2, 3})), torch::zeros({2, 3})));  // eps keeps 0 / 0 away
}

// The fourth sweep: the 1-D layers, padding, PReLU and InstanceNorm as a LibTorch program builds
// them (their values against PyTorch are in tests/reference/ops.bin).
TEST(LibTorchPort, OneDimLayersPaddingPReLUAndInstanceNorm) {
  namespace nn = torch::nn;
  namespace F = torch::nn::functional;
  torch::manual_seed(3);
  nn::Conv1d conv(nn::Conv1dOptions(4, 6, 3).stride(2).padding(1).groups(2));
  EXPECT_EQ(conv->weight.sizes(), (torch::Shape{6, 2, 3}));
  auto x = torch::randn({2, 4, 9});
  EXPECT_TRUE(all_close(conv(x), F::conv1d(x, conv->weight, conv->bias, 2, 1, 1, 2), 0, 0));
  EXPECT_EQ(conv(x).sizes(), (torch::Shape{2, 6, 5}));
  std::ostringstream printed;
  printed << *conv;
  EXPECT_EQ(printed.str(), "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), groups=2)");
  nn::MaxPool1d max_pool(nn::MaxPool1dOptions(3).stride(2));
  nn::AvgPool1d avg_pool(nn::AvgPool1dOptions(2));
  EXPECT_EQ(max_pool(x).sizes(), (torch::Shape{2, 4, 4}));
  EXPECT_TRUE(all_close(avg_pool(x).select(2, 0), (x.select(2, 0) + x.select(2, 1)) / 2, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(max_pool(x).select(2, 1), x.narrow(2, 2, 3).amax({2}), 0, 0));

  // Padding layers: F::pad with their mode; one number pads every side.
  auto img = torch::arange(12, torch::kFloat32).reshape({1, 1, 3, 4});
  nn::ReflectionPad2d reflect(nn::ReflectionPad2dOptions({1, 1, 2, 0}));
  EXPECT_TRUE(all_close(reflect(img), F::pad(img, F::PadFuncOptions({1, 1, 2, 0}).mode(torch::kReflect)), 0, 0));
  EXPECT_EQ(reflect(img)[0][0][0][0].item<float>(), 9.0f);  // row 2, column 1 of the input
  EXPECT_EQ(nn::ZeroPad2d(2)(img).sizes(), (torch::Shape{1, 1, 7, 8}));
  EXPECT_EQ(nn::ReplicationPad1d(3)(torch::tensor({1.0, 2.0})).sum().item<double>(), 1.0 * 4 + 2.0 * 4);
  nn::ConstantPad1d constant(nn::ConstantPad1dOptions({1, 2}, 3.5));
  EXPECT_EQ(constant(torch::zeros({2, 1})).sum().item<double>(), 2 * 3 * 3.5);
  printed.str("");
  printed << *constant << " " << *reflect;
  EXPECT_EQ(printed.str(), "ConstantPad1d(padding=(1, 2), value=3.5) ReflectionPad2d((1, 1, 2, 0))");
  EXPECT_ERROR_CONTAINS(nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 1})), "expected 4 padding amounts");
  EXPECT_ERROR_CONTAINS(reflect(torch::zeros({1, 1, 1, 4})), "reflect padding (2, 0) must be less than dim 2's size 1");
  EXPECT_ERROR_CONTAINS(F::pad(img, F::PadFuncOptions({1, 2, 3})), "padding length must be divisible by 2");
  EXPECT_ERROR_CONTAINS(F::pad(img, F::PadFuncOptions({1, 1}).mode("mirror")), "mode must be 'constant'");
  EXPECT_ERROR_CONTAINS(F::pad(img, F::PadFuncOptions({-3, -2})),
                        "cropping (-3, -2) of dim 3 (size 4) leaves a negative size");

  // PReLU: one learned slope per channel (dim 1), its gradient the sum of that channel's negative inputs.
  nn::PReLU prelu(nn::PReLUOptions().num_parameters(3).init(0.1));
  EXPECT_TRUE(all_close(prelu->weight, torch::full({3}, 0.1), 0, 0));
  auto v = torch::tensor({-1.0f, 2.0f, -3.0f, 4.0f, -5.0f, 6.0f}).reshape({2, 3});
  prelu(v).sum().backward();
  EXPECT_TRUE(all_close(prelu->weight.grad(), torch::tensor({-1.0f, -5.0f, -3.0f}), 0, 0));
  EXPECT_ERROR_CONTAINS(prelu(torch::zeros({2, 4})), "3 weights need an input with 3 channels in dim 1");

  // InstanceNorm1d with running statistics: each sample's channel is normalized on its own; the
  // running mean moves by momentum toward the batch's mean of the per-sample means.
  nn::InstanceNorm1d norm(nn::InstanceNorm1dOptions(2).track_running_stats(true).momentum(0.5));
  auto s = torch::tensor({1.0f, 3.0f, 10.0f, 30.0f, 5.0f, 7.0f, -2.0f, 2.0f}).reshape({2, 2, 2});
  auto y = norm(s);
  EXPECT_TRUE(all_close(y.select(2, 0), torch::full({2, 2}, -1.0f), 1e-4, 1e-4));  // (x - mean) / sqrt(var + eps)
  EXPECT_TRUE(
      all_close(norm->running_mean, torch::tensor({0.5f * (2.0f + 6.0f) / 2, 0.5f * (20.0f + 0.0f) / 2}), 1e-6, 1e-6));
  // The unbiased per-sample variances (2, 200; 2, 8), averaged over the batch, moved halfway from 1.
  EXPECT_TRUE(all_close(norm->running_var, torch::tensor({0.5f + 0.5f * 2.0f, 0.5f + 0.5f * 104.0f}), 1e-5, 1e-5));
  norm->eval();
  auto e = norm(s);  // normalized with the running statistics now
  EXPECT_NEAR(e[0][0][0].item<float>(), (1.0f - 2.0f) / std::sqrt(1.5f + 1e-5f), 1e-5);
  EXPECT_TRUE(all_close(norm(s[1]), e[1], 0, 0)) << "an unbatched input is one sample";
  EXPECT_FALSE(nn::InstanceNorm2d(3)->weight.defined()) << "PyTorch's default: affine=false";
  EXPECT_ERROR_CONTAINS(nn::InstanceNorm2d(3)(torch::zeros({2, 3})), "expected a 4-D (batched) or 3-D (unbatched)");
  EXPECT_ERROR_CONTAINS(F::instance_norm(torch::zeros({2, 3})), "at least one spatial dim");
}

TEST(LibTorchPort, MathDiagonalsAndRemainders) {
  auto m = torch::arange(12, torch::kFloat64).reshape({3, 4});
  EXPECT_TRUE(m.diagonal().shares_storage(m)) << "a view of a contiguous matrix, as PyTorch's";
  EXPECT_EQ(m.trace().item<double>(), 0 + 5 + 10);
  EXPECT_TRUE(torch::equal(torch::diag(torch::tensor({1, 2})), torch::tensor({1, 0, 0, 2}).reshape({2, 2})));
  EXPECT_ERROR_CONTAINS(torch::diag(torch::zeros({2, 2, 2})),
                        "diag: expected a 1-D or 2-D tensor, got shape [2, 2, 2]");
  EXPECT_ERROR_CONTAINS(torch::diagonal(m, 0, 1, -1), "diagonal: dimensions cannot be identical 1, -1");
  EXPECT_ERROR_CONTAINS(torch::trace(torch::zeros({2})), "trace: expected a matrix, got shape [2]");
  auto [var, mean] = torch::var_mean(m, 1);
  EXPECT_TRUE(all_close(var, m.var(1), 0, 0));
  EXPECT_TRUE(all_close(mean, m.mean({1}), 0, 0));
  // Integer remainders: a zero divisor throws (PyTorch's ZeroDivisionError); INT64_MIN % -1,
  // which traps on x86 (and crashes PyTorch 1.13), is 0.
  auto a = torch::tensor({std::numeric_limits<int64_t>::min(), int64_t{7}});
  EXPECT_TRUE(torch::equal(torch::remainder(a, -1), torch::zeros({2}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(a.fmod(torch::tensor({int64_t{-1}, int64_t{-3}})), torch::tensor({int64_t{0}, int64_t{1}})));
  EXPECT_ERROR_CONTAINS(torch::remainder(a, 0), "remainder: ZeroDivisionError");
  EXPECT_ERROR_CONTAINS(a.fmod(torch::tensor({int64_t{1}, int64_t{0}})), "fmod: ZeroDivisionError");
  EXPECT_ERROR_CONTAINS(torch::remainder(torch::tensor({true}), torch::tensor({true})),
                        "not implemented for dtype bool");
  EXPECT_TRUE(std::isnan(torch::remainder(torch::tensor({5.0}), 0.0).item<double>()));
  EXPECT_NEAR(torch::atan2(torch::tensor({1.0}), torch::tensor({-1.0})).item<double>(), 3 * M_PI / 4, 1e-15);
  EXPECT_EQ(torch::atan2(torch::tensor({1}), torch::tensor({1})).dtype(), torch::kFloat32);
  EXPECT_NEAR(torch::tensor({8.0}).log2().item<double>(), 3.0, 0.0);
}

TEST(LibTorchPort, SaveAndLoadTensorsAndRefusePyTorchArchives) {
  const std::string path = ::testing::TempDir() + "/ember_port_tensor.pt";
  auto t = torch::randn({3, 4});
  torch::save(t, path);
  torch::Tensor back;
  torch::load(back, path);
  EXPECT_TRUE(all_close(back, t, 0, 0));
  std::vector<torch::Tensor> list = {t, torch::arange(5)}, list_back;
  torch::save(list, path);
  torch::load(list_back, path);
  ASSERT_EQ(list_back.size(), 2u);
  EXPECT_TRUE(all_close(list_back[1], torch::arange(5), 0, 0));
  EXPECT_ERROR_CONTAINS(torch::load(back, path), "holds 2 tensors");
  // A file torch.save wrote (tools/gen_reference_nn.py), and a legacy pickle.
  torch::Tensor from_pytorch;
  EXPECT_ERROR_CONTAINS(torch::load(from_pytorch, std::string(EMBER_REFERENCE_DIR) + "/torch_save.pt"),
                        "this is a zip archive, the format of PyTorch's torch.save and LibTorch's torch::save");
  EXPECT_ERROR_CONTAINS(torch::load(from_pytorch, std::string(EMBER_REFERENCE_DIR) + "/torch_save.pt"),
                        "safetensors.torch.save_file");
  {
    std::ofstream pickle(path, std::ios::binary);
    pickle << '\x80' << '\x02' << "legacy";
  }
  EXPECT_ERROR_CONTAINS(torch::load(from_pytorch, path), "this is a Python pickle");
  std::remove(path.c_str());
}

}  // namespace
