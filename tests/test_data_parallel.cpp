// nn::DataParallel on the CPU (Note [DataParallel replicas]): the replicas share the one device
// here, so the math must be exactly that of the module run on each chunk of the batch — the same
// outputs, gradients summed into the module's own parameters, the same SGD trajectory — while
// every replica runs on a thread of its own with the caller's grad mode and autocast.
#include <set>
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

using namespace nn;

Sequential make_mlp() { return Sequential(Linear(5, 8), Tanh(), Linear(8, 3)); }

Sequential make_cnn() {
  return Sequential(Conv2d(Conv2dOptions(2, 4, 3).padding(1)), BatchNorm2d(4), ReLU(), Flatten(), Linear(4 * 5 * 5, 3));
}

// A copy of `from`'s parameters and buffers in a fresh module of the same architecture.
template <class Make>
Sequential copy_of(const Sequential& from, Make make) {
  Sequential to = make();
  to->to(kFloat64);
  to->load_state_dict(from->state_dict());
  return to;
}

std::vector<Device> cpus(int n) { return std::vector<Device>(static_cast<size_t>(n), Device(kCPU)); }

Tensor grad_of(const Sequential& m, const std::string& name) { return m->named_parameters()[name].grad(); }

TEST(DataParallel, MatchesTheModuleOnTheWholeBatchWithGradientsSummedAcrossReplicas) {
  for (int replicas : {2, 3}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    manual_seed(1);
    Sequential model = make_mlp();
    model->to(kFloat64);
    Sequential single = copy_of(model, make_mlp);
    DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(replicas)));

    // 7 rows: chunks of 3, 3, 1 over three replicas (4, 3 over two), as torch.chunk splits.
    const Tensor x = randn({7, 5}, kFloat64), target = randn({7, 3}, kFloat64);
    const Tensor out = dp(x);
    const Tensor expected = single(x);
    EXPECT_TRUE(testing::all_close(out, expected, 1e-13, 1e-13));
    functional::mse_loss(out, target).backward();
    functional::mse_loss(expected, target).backward();
    for (const auto& p : single->named_parameters())
      EXPECT_TRUE(testing::all_close(grad_of(model, p.key()), p.value().grad(), 1e-12, 1e-13)) << p.key();

    // One set of weights: the module's. Ten SGD steps through DataParallel follow the module's own.
    optim::SGD opt_dp(dp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD opt_single(single->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < 10; ++step) {
      opt_dp.zero_grad();
      opt_single.zero_grad();
      functional::mse_loss(dp(x), target).backward();
      functional::mse_loss(single(x), target).backward();
      opt_dp.step();
      opt_single.step();
    }
    for (const auto& p : single->named_parameters())
      EXPECT_TRUE(testing::all_close(model->named_parameters()[p.key()], p.value(), 1e-11, 1e-12)) << p.key();
  }
}

TEST(DataParallel, OwnsTheModuleParametersOnlyUnderModuleDotNames) {
  Sequential model = make_mlp();
  DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(3)));
  const auto names = dp->named_parameters();
  ASSERT_EQ(names.size(), 4u);  // the replicas hold none of their own
  EXPECT_EQ(names.items()[0].key(), "module.0.weight");
  EXPECT_TRUE(names.items()[0].value().is_same(model->named_parameters()["0.weight"]));
  EXPECT_EQ(dp->replica(1)->named_parameters().size(), 0u);
  EXPECT_TRUE(dp->replica(0) == model.module());
  std::ostringstream os;
  os << *dp;
  EXPECT_EQ(os.str().rfind("DataParallel(\n  (module): Sequential(\n", 0), 0u) << os.str();  // as PyTorch prints it
  EXPECT_EQ(dp->devices(), cpus(3));
}

// Batch norm in training mode normalizes each chunk by its own statistics (as PyTorch's
// DataParallel, which is not SyncBatchNorm), and only replica 0's running statistics — the
// module's own — persist.
TEST(DataParallel, BatchNormUsesEachChunksStatisticsAndKeepsReplicaZerosRunningStats) {
  manual_seed(2);
  Sequential model = make_cnn();
  model->to(kFloat64);
  Sequential first = copy_of(model, make_cnn), second = copy_of(model, make_cnn);
  DataParallel dp(model, make_cnn, DataParallelOptions().devices(cpus(2)));

  const Tensor x = randn({8, 2, 5, 5}, kFloat64);
  const Tensor out = dp(x);
  const Tensor expected = cat({first(x.narrow(0, 0, 4)), second(x.narrow(0, 4, 4))}, 0);
  EXPECT_TRUE(testing::all_close(out, expected, 1e-12, 1e-13));
  for (const std::string buffer : {"1.running_mean", "1.running_var", "1.num_batches_tracked"})
    EXPECT_TRUE(testing::all_close(model->named_buffers()[buffer], first->named_buffers()[buffer], 1e-13, 0)) << buffer;

  out.pow(2.0).sum().backward();
  expected.pow(2.0).sum().backward();
  for (const auto& p : first->named_parameters())
    EXPECT_TRUE(testing::all_close(grad_of(model, p.key()), p.value().grad() + grad_of(second, p.key()), 1e-11, 1e-12))
        << p.key();

  // In eval mode the running statistics are used, so DataParallel equals the whole module.
  dp->eval();
  first->load_state_dict(model->state_dict());
  first->eval();
  const NoGradGuard no_grad;
  EXPECT_TRUE(testing::all_close(dp(x), first(x), 1e-12, 1e-13));
}

TEST(DataParallel, EveryReplicaRunsOnAThreadOfItsOwnWithTheCallersGradModeAndAutocast) {
  Sequential model = make_mlp();
  DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(3)));
  std::mutex mutex;
  std::vector<std::thread::id> thread_of(3);
  std::vector<bool> grad_enabled(3);
  std::vector<DType> output_dtype(3);
  for (size_t i = 0; i < 3; ++i) {
    dp->replica(i)->register_forward_hook(
        [&, i](Module&, const TensorList&, const Tensor& out) -> std::optional<Tensor> {
          const std::lock_guard<std::mutex> lock(mutex);
          thread_of[i] = std::this_thread::get_id();
          grad_enabled[i] = GradMode::is_enabled();
          output_dtype[i] = out.dtype();
          return std::nullopt;
        });
  }
  const Tensor x = randn({6, 5});
  {
    const NoGradGuard no_grad;
    const autocast::AutocastGuard bf16(kCPU, kBFloat16);
    const Tensor y = dp(x);
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(thread_of[0], std::this_thread::get_id());  // replica 0 on the caller's thread
  EXPECT_EQ(std::set<std::thread::id>(thread_of.begin(), thread_of.end()).size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(grad_enabled[i]) << i;
    EXPECT_EQ(output_dtype[i], kBFloat16) << i;
  }
  const Tensor y = dp(x);  // and back: grad mode on, no autocast
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(y.dtype(), kFloat32);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(grad_enabled[i]) << i;
    EXPECT_EQ(output_dtype[i], kFloat32) << i;
  }
}

TEST(DataParallel, AShortBatchUsesFewerReplicasAndABatchOfOneOnlyTheModule) {
  Sequential model = make_mlp();
  DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(3)));
  std::vector<int> calls(3);
  for (size_t i = 0; i < 3; ++i) dp->replica(i)->register_forward_pre_hook([&, i](Module&) { ++calls[i]; });
  EXPECT_EQ(dp(randn({2, 5})).sizes(), (Shape{2, 3}));  // two chunks of one row
  EXPECT_EQ(calls, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(dp(randn({1, 5})).sizes(), (Shape{1, 3}));
  EXPECT_EQ(calls, (std::vector<int>{2, 1, 0}));
}

TEST(DataParallel, ScattersAndGathersAlongTheGivenDimension) {
  manual_seed(3);
  Sequential model = make_mlp();
  Sequential single = make_mlp();
  single->load_state_dict(model->state_dict());
  DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(2)).dim(1));
  const Tensor x = randn({3, 4, 5});  // Linear maps the last dimension; dim 1 is a batch dimension
  EXPECT_TRUE(testing::all_close(dp(x), single(x), 1e-6, 1e-6));
}

// On CUDA: every device, or two replicas on cuda:0 where there is one (the replicas then share a
// device and its allocator from two threads). The same outputs and summed gradients as the module
// on the whole batch, to float32's rounding. Runs where a GPU is lent (tools/gpu_check.sh).
TEST(DataParallel, OnCudaMatchesTheModule) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<Device> devices;
  for (int i = 0; i < cuda::device_count(); ++i) devices.emplace_back(kCUDA, i);
  if (devices.size() == 1) devices.push_back(devices[0]);
  manual_seed(4);
  Sequential model = make_cnn(), single = make_cnn();
  single->load_state_dict(model->state_dict());
  model->to(devices[0]);
  single->to(devices[0]);
  DataParallel dp(model, make_cnn, DataParallelOptions().devices(devices));
  const int64_t per_replica = 3, batch = per_replica * static_cast<int64_t>(devices.size());
  const Tensor x = randn({batch, 2, 5, 5}).to(devices[0]);
  const Tensor out = dp(x);
  ASSERT_EQ(out.device(), devices[0]);
  // Batch norm normalizes each chunk by its own statistics: the module on each chunk.
  std::vector<Tensor> chunks;
  for (int64_t i = 0; i < batch; i += per_replica) chunks.push_back(single(x.narrow(0, i, per_replica)));
  const Tensor expected = cat(chunks, 0);
  EXPECT_TRUE(testing::all_close(out.cpu(), expected.cpu(), 1e-5, 1e-5));
  out.pow(2.0).sum().backward();
  expected.pow(2.0).sum().backward();
  for (const auto& p : single->named_parameters())
    EXPECT_TRUE(testing::all_close(grad_of(model, p.key()).cpu(), p.value().grad().cpu(), 1e-4, 1e-4)) << p.key();
}

// A custom module whose forward reads its parameter through a field it never bound.
struct Unbound : Module {
  Tensor scale;
  Unbound() : Module("Unbound") { scale = register_parameter("scale", ones({5})); }
  Tensor forward(const Tensor& x) override { return x * scale; }
};

struct Failing : Module {
  Tensor weight;
  Failing() : Module("Failing") {
    weight = register_parameter("weight", ones({5}));
    bind_attribute("weight", weight);
  }
  Tensor forward(const Tensor& x) override {
    EMBER_CHECK(x.size(0) != 2, "Failing: a chunk of ", x.size(0), " rows");
    return x * weight;
  }
};

TEST(DataParallel, BadUseThrowsErrorsThatSayWhatIsWrong) {
  Sequential model = make_mlp();
  EXPECT_ERROR_CONTAINS(
      DataParallel(
          model, [] { return Sequential(Linear(5, 8), Tanh(), Linear(8, 4)); }, DataParallelOptions().devices(cpus(2))),
      "of another architecture: parameters [0.weight [8, 5], 0.bias [8], 2.weight [4, 8]");
  EXPECT_ERROR_CONTAINS(DataParallel(
                            model, [&] { return model; }, DataParallelOptions().devices(cpus(2))),
                        "must return a new module (it returned the module itself)");
  EXPECT_ERROR_CONTAINS(DataParallelImpl(model.module(), nullptr, DataParallelOptions().devices(cpus(2))),
                        "2 devices need a function that makes the replicas");
  EXPECT_ERROR_CONTAINS(DataParallel(model, make_mlp, DataParallelOptions().devices({Device(kCUDA, 0), Device(kCPU)})),
                        "the module must be on devices[0] = cuda:0, but its parameter '0.weight' is on cpu");
  EXPECT_ERROR_CONTAINS(DataParallel(model, make_mlp, DataParallelOptions().devices({Device(kCPU), Device(kCUDA, 7)})),
                        "device cuda:7 does not exist");
  EXPECT_ERROR_CONTAINS(DataParallelImpl(
                            std::make_shared<Unbound>(), [] { return std::make_shared<Unbound>(); },
                            DataParallelOptions().devices(cpus(2))),
                        "Unbound (the module itself) reads its parameter 'scale' through no bound field");

  DataParallel dp(model, make_mlp, DataParallelOptions().devices(cpus(2)).dim(2));
  EXPECT_ERROR_CONTAINS(dp(randn({4, 5})), "DataParallel: dim 2 is out of range for an input of shape [4, 5]");
  EXPECT_ERROR_CONTAINS(dp(Tensor()), "DataParallel: the input is undefined");

  DataParallelImpl failing(
      std::make_shared<Failing>(), [] { return std::make_shared<Failing>(); }, DataParallelOptions().devices(cpus(2)));
  EXPECT_EQ(failing.forward(ones({6, 5})).sizes(), (Shape{6, 5}));  // chunks of 3 and 3
  EXPECT_ERROR_CONTAINS(failing.forward(ones({5, 5})), "DataParallel: replica 1 on cpu: Failing: a chunk of 2 rows");
  EXPECT_ERROR_CONTAINS(failing.forward(ones({4, 5})), "DataParallel: replica 0 on cpu: Failing: a chunk of 2 rows");
  EXPECT_EQ(failing.forward(ones({6, 5})).sizes(), (Shape{6, 5}));  // and it still works afterwards
}

}  // namespace
}  // namespace ember
