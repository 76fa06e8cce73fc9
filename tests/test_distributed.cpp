// Process groups and DistributedDataParallel across real processes: this program runs under
// `mpirun -np 2` and `-np 3` (ctest's Distributed.* tests); every rank runs every test, and the
// collectives inside meet across the ranks. Collectives are checked against their definitions;
// DDP against one process training on the whole batch (Note [DDP reducer]).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <thread>

#include <unistd.h>

#include <ember/torch.h>  // (for the c10d spelling; ember's own is used everywhere else)

#include "helpers.h"
#include "random_arguments.h"

namespace ember {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;

std::shared_ptr<ProcessGroup> group;  // over every rank, made by main()

int rank() { return group->rank(); }
int world() { return group->size(); }

// ---- collectives ----

// rank r holds (r + 1) * (i + 1) at i; the expected results follow from that.
Tensor rank_tensor(int r, DType dtype, int64_t n = 5) {
  return (arange(n, kFloat64).add(1.0) * static_cast<double>(r + 1)).to(dtype);
}

TEST(Collectives, AllReduceEveryOpAndDtypeMatchesItsDefinition) {
  for (DType dtype : {kFloat32, kFloat64, kInt32, kInt64, kUInt8, kInt8, kFloat16, kBFloat16}) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::MIN, ReduceOp::AVG}) {
      if (op == ReduceOp::AVG && !is_floating(dtype)) continue;
      Tensor t = rank_tensor(rank(), dtype);
      group->all_reduce(t, op)->wait();
      const double ranks_sum = world() * (world() + 1) / 2.0;  // Σ (r + 1)
      const double factor = op == ReduceOp::SUM   ? ranks_sum
                            : op == ReduceOp::MAX ? world()
                            : op == ReduceOp::MIN ? 1.0
                                                  : ranks_sum / world();
      const Tensor expected = (arange(5, kFloat64).add(1.0) * factor).to(dtype);
      EXPECT_TRUE(testing::all_close(t.to(kFloat64), expected.to(kFloat64), 1e-2, 0))
          << dtype << " " << distributed::reduce_op_name(op) << ": " << t;
    }
  }
}

TEST(Collectives, BroadcastAllGatherReduceScatterBarrierSendRecv) {
  for (int root = 0; root < world(); ++root) {
    Tensor t = rank_tensor(rank(), kFloat32);
    group->broadcast(t, root)->wait();
    EXPECT_TRUE(testing::all_close(t, rank_tensor(root, kFloat32), 0, 0)) << "root " << root;
  }
  std::vector<Tensor> gathered;
  for (int r = 0; r < world(); ++r) gathered.push_back(empty({2, 3}, kInt64));
  group->all_gather(gathered, rank_tensor(rank(), kInt64, 6).view({2, 3}))->wait();
  for (int r = 0; r < world(); ++r)
    EXPECT_TRUE(testing::all_close(gathered[r], rank_tensor(r, kInt64, 6).view({2, 3}), 0, 0)) << "slot " << r;

  // reduce_scatter: rank r's block k is (r + 1) * (k + 1); rank k gets Σ_r (r + 1) * (k + 1).
  std::vector<Tensor> blocks;
  for (int k = 0; k < world(); ++k) blocks.push_back(full({4}, (rank() + 1.0) * (k + 1.0), kFloat32));
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG}) {
    Tensor out = empty({4}, kFloat32);
    group->reduce_scatter(out, blocks, op)->wait();
    const double sum = world() * (world() + 1) / 2.0 * (rank() + 1.0);
    EXPECT_TRUE(testing::all_close(out, full({4}, op == ReduceOp::SUM ? sum : sum / world(), kFloat32), 1e-6, 0));
  }
  group->barrier()->wait();

  // A ring: each rank sends its tensor to the next and receives the previous one's.
  const int next = (rank() + 1) % world(), previous = (rank() + world() - 1) % world();
  Tensor incoming = empty({5}, kFloat64);
  auto receiving = group->recv(incoming, previous, 7);
  auto sending = group->send(rank_tensor(rank(), kFloat64), next, 7);
  sending->wait();
  receiving->wait();
  EXPECT_TRUE(receiving->is_completed());
  EXPECT_TRUE(testing::all_close(incoming, rank_tensor(previous, kFloat64), 0, 0));
}

TEST(Collectives, BadArgumentsAreClearErrors) {
  EXPECT_ERROR_CONTAINS(group->all_reduce(Tensor()), "all_reduce(sum): the tensor is undefined");
  EXPECT_ERROR_CONTAINS(group->all_reduce(ones({3, 4}).t()), "must be contiguous");
  EXPECT_ERROR_CONTAINS(group->all_reduce(ones({3}, kInt32), ReduceOp::AVG), "avg needs a floating tensor");
  EXPECT_ERROR_CONTAINS(
      group->broadcast(ones({2}), world()),
      "the root rank " + std::to_string(world()) + " is outside the group of size " + std::to_string(world()));
  EXPECT_ERROR_CONTAINS(group->all_gather({ones({2})}, ones({2})), "1 outputs for a group of size");
  std::vector<Tensor> wrong(world(), ones({3}));
  EXPECT_ERROR_CONTAINS(group->all_gather(wrong, ones({2})), "outputs[0] is [3] float32 on cpu, expected [2] float32");
  EXPECT_ERROR_CONTAINS(group->send(ones({1}), 0, -1), "the tag must be non-negative");
  EXPECT_ERROR_CONTAINS(distributed::init_process_group("gloo"), "unknown back end 'gloo'");
  if (cuda::is_available()) EXPECT_ERROR_CONTAINS(group->all_reduce(ones({2}).cuda()), "carries CPU tensors");
}

// Bad input never crashes, checked at random (random_arguments.h) for the distributed API: the
// collectives, DDP and the pipeline, each called with awkward arguments on a group of this rank
// alone (a row of mesh_2d(group, 1)), so that no draw waits for another rank's. Each call must
// return or throw ember::Error. (Valid sends to oneself are not drawn: nothing would receive them.)
TEST(Collectives, RandomArgumentsReturnOrThrowAnEmberError) {
  using testing::Calls;
  using testing::Draw;
  const std::shared_ptr<ProcessGroup> alone = distributed::mesh_2d(*group, 1).row;
  ASSERT_EQ(alone->size(), 1);
  auto op = [](Draw& d) { return static_cast<ReduceOp>(d.below(5)); };
  auto peer = [](Draw& d) {  // never 0, this rank itself (2^62 and INT64_MIN truncate to 0 too)
    const int p = static_cast<int>(d.integer());
    return p == 0 ? 1 : p;
  };
  auto tensors = [](Draw& d) {
    std::vector<Tensor> list(static_cast<size_t>(d.below(3)));
    for (auto& t : list) t = d.coin() ? d.tensor() : d.tensor({3}, kFloat32);
    return list;
  };
  const Calls calls = {
      {"all_reduce", [&](Draw& d) { alone->all_reduce(d.tensor(), op(d))->wait(); }},
      {"broadcast", [&](Draw& d) { alone->broadcast(d.tensor(), static_cast<int>(d.integer()))->wait(); }},
      {"all_gather",
       [&](Draw& d) { alone->all_gather(tensors(d), d.coin() ? d.tensor() : d.tensor({3}, kFloat32))->wait(); }},
      {"reduce_scatter",
       [&](Draw& d) {
         alone->reduce_scatter(d.coin() ? d.tensor() : d.tensor({3}, kFloat32), tensors(d), op(d))->wait();
       }},
      {"send_recv",
       [&](Draw& d) {
         const Tensor t = d.tensor();
         const int tag = static_cast<int>(d.coin() ? d.integer() : 0);
         (d.coin() ? alone->send(t, peer(d), tag) : alone->recv(t, peer(d), tag))->wait();
       }},
      {"new_group",
       [&](Draw& d) {
         std::vector<int> ranks(static_cast<size_t>(d.below(3)));
         for (auto& r : ranks) r = static_cast<int>(d.coin() ? d.integer() : 0);
         (void)alone->new_group(ranks);
       }},
      {"ddp",
       [&](Draw& d) {
         nn::Linear local(3, 2);
         nn::DistributedDataParallel ddp(local, alone,
                                         nn::DistributedDataParallelOptions()
                                             .bucket_cap_mb(d.coin() ? d.real() : 1.0)
                                             .first_bucket_cap_mb(d.coin() ? d.real() : 1.0)
                                             .find_unused_parameters(d.coin()));
         const Tensor x = d.coin() ? d.tensor() : d.tensor({2, 3}, kFloat32);
         if (d.coin()) {
           auto guard = ddp->no_sync();
           ddp->forward(x).sum().backward();
         }
         ddp->forward(x).sum().backward();
       }},
      {"pipeline",
       [&](Draw& d) {
         nn::Sequential model(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
         std::vector<int64_t> balance;
         if (d.coin()) balance = {d.coin() ? 3 : d.integer()};
         nn::Pipeline pipe(model, alone,
                           nn::PipelineOptions()
                               .chunks(d.coin() ? 1 + d.below(4) : d.integer())
                               .schedule(d.coin() ? "gpipe" : (d.coin() ? "1f1b" : "2f2b"))
                               .balance(balance));
         const Tensor x = d.coin() ? d.tensor() : d.tensor({4, 3}, kFloat32);
         const Tensor y = d.coin() ? d.tensor() : d.tensor({4, 2}, kFloat32);
         (void)pipe.train_step(
             x, y, [](const Tensor& out, const Tensor& target) { return nn::functional::mse_loss(out, target); });
         (void)pipe.forward(x);
       }},
  };
  testing::expect_only_ember_errors(calls, Device(kCPU));
}

// A rank that does not join a collective: the others' wait() gives up after the timeout with an
// error naming the op and the rank, and can wait again once the late rank has joined.
// LibTorch's c10d spelling of the same collectives (distributed/c10d.h), as a ported program
// writes them.
TEST(Collectives, C10dNamesAsLibTorchSpellsThem) {
  auto pg = ::c10d::ProcessGroupMPI::createProcessGroupMPI();
  EXPECT_EQ(pg->getRank(), rank());
  EXPECT_EQ(pg->getSize(), world());
  std::vector<torch::Tensor> tensors = {torch::ones({3}) * (pg->getRank() + 1)};
  auto work = pg->allreduce(tensors);
  EXPECT_TRUE(work->wait());
  EXPECT_TRUE(work->isCompleted());
  const double total = world() * (world() + 1) / 2.0;
  EXPECT_TRUE(testing::all_close(tensors[0], torch::full({3}, total), 0, 0));
  ::c10d::AllreduceOptions max;
  max.reduceOp = ::c10d::ReduceOp::MAX;
  tensors[0] = torch::full({2}, static_cast<double>(pg->getRank()));
  pg->allreduce(tensors, max)->wait();
  EXPECT_EQ(tensors[0][0].item<float>(), static_cast<float>(world() - 1));
  std::vector<torch::Tensor> root = {torch::full({2}, pg->getRank() == 0 ? 5.0 : -1.0)};
  pg->broadcast(root)->wait();
  EXPECT_EQ(root[0][1].item<float>(), 5.0f);
  std::vector<std::vector<torch::Tensor>> gathered(1);
  for (int r = 0; r < world(); ++r) gathered[0].push_back(torch::zeros({1}));
  std::vector<torch::Tensor> mine = {torch::full({1}, static_cast<double>(pg->getRank()))};
  pg->allgather(gathered, mine)->wait();
  for (int r = 0; r < world(); ++r) EXPECT_EQ(gathered[0][r].item<float>(), static_cast<float>(r));
  pg->barrier()->wait();
  std::vector<torch::Tensor> two = {torch::ones({1}), torch::ones({1})};
  EXPECT_ERROR_CONTAINS(pg->allreduce(two), "takes a list of exactly one tensor");
  EXPECT_ERROR_CONTAINS(::c10d::ProcessGroupMPI::createProcessGroupMPI({0}), "a subset of the ranks");
}

TEST(Collectives, AMissingRankIsATimeoutErrorNotAHang) {
  const auto saved = group->timeout();
  group->set_timeout(std::chrono::milliseconds(300));
  Tensor t = ones({3});
  if (rank() == 0) {
    auto work = group->all_reduce(t);
    EXPECT_ERROR_CONTAINS(work->wait(), "all_reduce(sum) on rank 0 of " + std::to_string(world()) +
                                            ": not completed within the timeout of 300 ms");
    EXPECT_FALSE(work->is_completed());
    group->set_timeout(std::chrono::seconds(60));
    work->wait();  // the others have joined by now
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(900));
    group->set_timeout(std::chrono::seconds(60));
    group->all_reduce(t)->wait();
  }
  EXPECT_TRUE(testing::all_close(t, full({3}, world(), kFloat32), 0, 0));
  group->set_timeout(saved);
}

// A rank that dies in the middle of a collective: the job must end with a clear message, never
// hang. Disabled in the normal run (it kills the job); ctest's Distributed.a_rank_exits runs it
// alone and expects either the survivors' timeout error or mpirun's report of the dead rank.
TEST(Collectives, DISABLED_ARankThatExitsMidCollective) {
  group->set_timeout(std::chrono::seconds(10));
  if (rank() == world() - 1) std::_Exit(3);  // dies without a word, as a crashed process does
  Tensor t = ones({4});
  try {
    group->all_reduce(t)->wait();
  } catch (const Error& e) {
    std::cerr << "rank " << rank() << ": " << e.what() << "\n";
    std::_Exit(4);
  }
  ADD_FAILURE() << "the all_reduce completed without the dead rank";
}

// ---- DistributedDataParallel ----

nn::Sequential small_net() {
  return nn::Sequential(nn::Linear(6, 16), nn::Tanh(), nn::Linear(16, 8), nn::Tanh(), nn::Linear(8, 3));
}
Tensor mse(const Tensor& out, const Tensor& target) { return nn::functional::mse_loss(out, target); }

// Tiny buckets: every parameter in a bucket of its own, so several all-reduces overlap backward.
nn::DistributedDataParallelOptions tiny_buckets() {
  return nn::DistributedDataParallelOptions().bucket_cap_mb(1e-6).first_bucket_cap_mb(1e-6);
}

// The same global batch on every rank; rank r trains on rows [r·B/W, (r+1)·B/W).
struct Batch {
  Tensor x, y;
};
std::vector<Batch> global_batches(int steps, int64_t batch) {
  manual_seed(42);
  std::vector<Batch> out;
  for (int i = 0; i < steps; ++i) out.push_back({randn({batch, 6}), randn({batch, 3})});
  return out;
}
Tensor shard(const Tensor& t) {
  const int64_t per_rank = t.size(0) / world();
  return t.narrow(0, rank() * per_rank, per_rank);
}

template <class MakeOptimizer>
void expect_ddp_matches_one_process(const MakeOptimizer& make_optimizer, const char* name) {
  const int64_t batch = 12;  // divisible by 2 and 3
  const auto batches = global_batches(10, batch);
  // One process, the whole batch.
  manual_seed(100);
  nn::Sequential reference = small_net();
  auto ref_opt = make_optimizer(reference->parameters());
  for (const Batch& b : batches) {
    ref_opt->zero_grad();
    nn::functional::mse_loss(reference(b.x), b.y).backward();
    ref_opt->step();
  }
  // Every rank starts from other weights: DDP broadcasts rank 0's (made with seed 100).
  manual_seed(100 + rank());
  nn::Sequential local = small_net();
  nn::DistributedDataParallel ddp(local, group, tiny_buckets());
  auto opt = make_optimizer(ddp->parameters());
  for (const Batch& b : batches) {
    opt->zero_grad();
    nn::functional::mse_loss(ddp(shard(b.x)), shard(b.y)).backward();
    opt->step();
  }
  EXPECT_EQ(ddp->bucket_indices().size(), 6u) << "one bucket per parameter";
  EXPECT_GE(ddp->last_backward_stats().launched_during_backward, 5) << "buckets launched while backward ran";
  const auto expected = reference->parameters(), got = ddp->parameters();
  ASSERT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(testing::all_close(got[i], expected[i], 1e-5, 1e-6)) << name << ", parameter " << i;
}

TEST(DistributedDataParallel, MatchesOneProcessWithTheWholeBatch) {
  expect_ddp_matches_one_process(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).momentum(0.9));
      },
      "SGD");
  expect_ddp_matches_one_process(
      [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01)); },
      "AdamW");
}

// A bucket cap past int64's range in bytes (infinity, 1e300 MiB) holds every gradient in one
// bucket; converting it to bytes was undefined (UBSan, found by the random-arguments test).
TEST(DistributedDataParallel, AnUnboundedBucketCapHoldsEveryGradient) {
  for (double cap : {std::numeric_limits<double>::infinity(), 1e300}) {
    nn::Sequential local = small_net();  // six parameters
    // The first bucket closes after its first gradient; the next holds the other five.
    nn::DistributedDataParallel ddp(local, group,
                                    nn::DistributedDataParallelOptions().first_bucket_cap_mb(1e-6).bucket_cap_mb(cap));
    const auto buckets = ddp->bucket_indices();
    ASSERT_EQ(buckets.size(), 2u) << cap;
    EXPECT_EQ(buckets[1].size(), 5u) << cap;
    nn::DistributedDataParallel whole(local, group, nn::DistributedDataParallelOptions().first_bucket_cap_mb(cap));
    EXPECT_EQ(whole->bucket_indices().size(), 1u) << cap;
  }
}

TEST(DistributedDataParallel, NoSyncAccumulationEqualsOneBigBatch) {
  const int64_t micro = 4, micro_batch = 6;
  const auto batches = global_batches(micro, micro_batch * world());
  manual_seed(7);
  nn::Sequential reference = small_net();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1));
  Tensor all_x = cat({batches[0].x, batches[1].x, batches[2].x, batches[3].x});
  Tensor all_y = cat({batches[0].y, batches[1].y, batches[2].y, batches[3].y});
  nn::functional::mse_loss(reference(all_x), all_y).backward();
  ref_opt.step();

  manual_seed(7);
  nn::Sequential local = small_net();
  nn::DistributedDataParallel ddp(local, group);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
  for (int i = 0; i < micro; ++i) {
    const Tensor loss = nn::functional::mse_loss(ddp(shard(batches[i].x)), shard(batches[i].y)) / double(micro);
    if (i + 1 < micro) {
      auto no_sync = ddp->no_sync();
      loss.backward();
    } else {
      loss.backward();  // reduces everything accumulated
    }
  }
  opt.step();
  const auto expected = reference->parameters(), got = ddp->parameters();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(testing::all_close(got[i], expected[i], 1e-5, 1e-6)) << "parameter " << i;
}

// Two heads; which ones a rank uses is up to its input. Head b is used by rank 0 only, head c by
// no rank.
struct BranchyImpl : nn::Module {
  BranchyImpl() : Module("Branchy") {
    a = register_module("a", nn::Linear(4, 2));
    b = register_module("b", nn::Linear(4, 2));
    c = register_module("c", nn::Linear(4, 2));
  }
  Tensor forward(const Tensor& x) override { return use_b ? a(x) + b(x) : a(x); }
  nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
  bool use_b = false;
};
EMBER_MODULE(Branchy);

TEST(DistributedDataParallel, UnusedParametersAreAnErrorOrFound) {
  manual_seed(1);
  Branchy model;
  {
    nn::DistributedDataParallel strict(model, group);
    EXPECT_ERROR_CONTAINS(strict(ones({2, 4})).sum().backward(),
                          "parameter(s) b.weight, b.bias, c.weight, c.bias "
                          "received no gradient in this backward");
  }
  model->zero_grad();
  nn::DistributedDataParallel ddp(model, group, nn::DistributedDataParallelOptions().find_unused_parameters(true));
  model->use_b = rank() == 0;
  ddp(ones({2, 4})).sum().backward();
  EXPECT_FALSE(model->c->weight.grad().defined()) << "used by no rank: its .grad stays untouched";
  // b's gradient on rank 0 is ones(2, 4) summed over the batch: 2 per element; averaged over the ranks.
  ASSERT_TRUE(model->b->weight.grad().defined());
  EXPECT_TRUE(testing::all_close(model->b->weight.grad(), full({2, 4}, 2.0 / world(), kFloat32), 1e-6, 0));
  EXPECT_TRUE(testing::all_close(model->a->weight.grad(), full({2, 4}, 2.0, kFloat32), 1e-6, 0));
}

// With the GradScaler: an overflow on one rank reaches every rank through the average, so all
// of them skip the same step and stay identical.
TEST(DistributedDataParallel, AnOverflowOnOneRankSkipsTheStepEverywhere) {
  manual_seed(3);
  nn::Sequential local = small_net();
  nn::DistributedDataParallel ddp(local, group);
  optim::AdamW opt(ddp->parameters(), optim::AdamWOptions(1e-2));
  amp::GradScaler scaler;
  const auto batches = global_batches(3, 6 * world());
  local->parameters()[0].register_hook([&](const Tensor& g) {
    if (rank() != world() - 1 || scaler.skipped_steps() > 0) return Tensor();
    Tensor bad = g.clone();
    bad.view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<double>::infinity());
    return bad;
  });
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    scaler.scale(nn::functional::mse_loss(ddp(shard(batches[step].x)), shard(batches[step].y))).backward();
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  for (const Tensor& p : ddp->parameters()) {
    std::vector<Tensor> all(world(), Tensor());
    for (auto& t : all) t = empty_like(p);
    group->all_gather(all, p.detach().contiguous())->wait();
    for (int r = 1; r < world(); ++r) EXPECT_TRUE(testing::all_close(all[r], all[0], 0, 0)) << "rank " << r;
  }
}

// Ranks that step different parameters (pipeline stages): an overflow on the last rank skips
// the step on every rank when the scaler has the group, and on that rank alone without it.
TEST(GradScaler, WithAProcessGroupEveryRankSkipsTheStepOfAnyRanksOverflow) {
  for (const bool agreed : {true, false}) {
    SCOPED_TRACE(agreed ? "with the group" : "without");
    const bool skipped_at_0 = agreed || rank() == world() - 1;
    Tensor w = full({3}, rank() + 1.0).requires_grad_(true);
    optim::SGD opt({w}, optim::SGDOptions(0.5));
    amp::GradScaler scaler(amp::GradScalerOptions().init_scale(8.0).process_group(agreed ? group : nullptr));
    for (int step = 0; step < 2; ++step) {
      opt.zero_grad();
      const double poison = step == 0 && rank() == world() - 1 ? std::numeric_limits<double>::infinity() : 1.0;
      scaler.scale((w * poison).sum()).backward();
      scaler.step(opt);
      scaler.update();
      // Step 0 is skipped where the overflow is seen, step 1 taken everywhere (w -= 0.5 each).
      const int taken = (skipped_at_0 ? 0 : 1) + (step == 1 ? 1 : 0);
      EXPECT_TRUE(testing::all_close(w.detach(), full({3}, rank() + 1.0 - 0.5 * taken), 0, 0)) << "step " << step;
    }
    EXPECT_EQ(scaler.skipped_steps(), skipped_at_0 ? 1 : 0);
    EXPECT_EQ(scaler.get_scale(), skipped_at_0 ? 4.0 : 8.0);  // backed off once, or not at all
  }
}

TEST(DistributedDataParallel, StateDictNamesAndMismatchedModels) {
  manual_seed(0);
  nn::Sequential local = small_net();
  nn::DistributedDataParallel ddp(local, group);
  EXPECT_TRUE(ddp->state_dict().contains("module.0.weight"));
  // A rank with another model: every rank is told, none averages unrelated numbers.
  nn::Sequential odd = rank() == world() - 1 ? nn::Sequential(nn::Linear(6, 5)) : nn::Sequential(nn::Linear(6, 4));
  EXPECT_ERROR_CONTAINS(nn::DistributedDataParallel(odd, group),
                        "parameters with other shapes or dtypes than rank " + std::to_string(rank()));
}

// ---- Pipeline ----

// Every schedule and chunk count computes the gradients and loss of the unsplit model on the
// whole batch; 1F1B holds at most (stages − stage) micro-batches where GPipe holds all of them.
TEST(Pipeline, StagesOverRanksEqualTheWholeModel) {
  manual_seed(4);
  const Tensor x = randn({12, 6}), y = randn({12, 3});
  manual_seed(9);
  nn::Sequential reference = small_net();
  const Tensor expected_loss = nn::functional::mse_loss(reference(x), y);
  expected_loss.backward();
  const StateDict reference_params = reference->named_parameters();
  for (const char* schedule : {"gpipe", "1f1b"})
    for (int64_t chunks : {1, 3, 4}) {
      manual_seed(9);
      nn::Sequential model = small_net();  // every rank builds the same model and keeps its stage
      nn::Pipeline pipe(model, group, nn::PipelineOptions().chunks(chunks).schedule(schedule));
      const std::string where = std::string(schedule) + ", " + std::to_string(chunks) + " chunks";
      const Tensor loss =
          pipe.train_step(pipe.is_first() ? x : Tensor(), pipe.is_last() ? y : Tensor(),
                          [](const Tensor& out, const Tensor& t) { return nn::functional::mse_loss(out, t); });
      EXPECT_EQ(loss.defined(), pipe.is_last()) << where;
      if (pipe.is_last()) EXPECT_TRUE(testing::all_close(loss, expected_loss, 1e-6, 1e-7)) << where;
      const auto named = pipe.stage()->named_parameters();
      EXPECT_GT(named.size(), 0u);
      for (const auto& item : named) {
        ASSERT_TRUE(item.value().grad().defined()) << where << ": " << item.key();
        EXPECT_TRUE(testing::all_close(item.value().grad(), reference_params[item.key()].grad(), 1e-5, 1e-7))
            << where << ": " << item.key();
      }
      const int64_t limit = std::string(schedule) == "gpipe" ? chunks : std::min<int64_t>(chunks, world() - rank());
      EXPECT_EQ(pipe.peak_micro_batches_held(), limit) << where;
      // Inference through the stages gives the model's output on the last one.
      const Tensor out = pipe.forward(pipe.is_first() ? x : Tensor());
      if (pipe.is_last()) EXPECT_TRUE(testing::all_close(out, reference(x).detach(), 1e-6, 1e-7)) << where;
    }
}

// ---- 2-D parallel: subgroups, pipelines in data parallel ----

TEST(NewGroup, ASubgroupNumbersItsMembersInOrderAndCommunicatesAlone) {
  std::vector<int> evens;  // the even ranks, from the highest down
  for (int r = world() - 1; r >= 0; --r)
    if (r % 2 == 0) evens.push_back(r);
  const std::shared_ptr<ProcessGroup> sub = group->new_group(evens);
  ASSERT_EQ(sub != nullptr, rank() % 2 == 0);
  if (sub) {
    EXPECT_EQ(sub->size(), static_cast<int>(evens.size()));
    EXPECT_EQ(sub->rank(), static_cast<int>(std::find(evens.begin(), evens.end(), rank()) - evens.begin()));
    Tensor t = full({3}, rank() + 1, kInt64);
    sub->all_reduce(t)->wait();
    int64_t sum = 0;
    for (int r : evens) sum += r + 1;
    EXPECT_TRUE(testing::all_close(t, full({3}, sum, kInt64), 0, 0));
    Tensor b = full({2}, rank(), kFloat32);
    sub->broadcast(b, 0)->wait();  // from its rank 0: the highest even rank
    EXPECT_TRUE(testing::all_close(b, full({2}, evens.front(), kFloat32), 0, 0));
    const std::shared_ptr<ProcessGroup> nested = sub->new_group({0});
    EXPECT_EQ(nested != nullptr, sub->rank() == 0);
    if (nested) EXPECT_EQ(nested->size(), 1);
  }
  group->barrier()->wait();  // the world group still works, in order
  EXPECT_ERROR_CONTAINS(group->new_group({}), "ProcessGroup(mpi).new_group: the list of ranks is empty");
  EXPECT_ERROR_CONTAINS(group->new_group({0, 0}), "rank 0 is in the list twice");
  EXPECT_ERROR_CONTAINS(group->new_group({world()}), "the member rank " + std::to_string(world()) +
                                                         " is outside the group of size " + std::to_string(world()));
  // Each rank a list of its own: refused on every rank before any group is made.
  EXPECT_ERROR_CONTAINS(group->new_group({rank()}), "the ranks passed different lists of members");
  EXPECT_ERROR_CONTAINS(distributed::mesh_2d(*group, world() + 1), "mesh_2d: a group of " + std::to_string(world()) +
                                                                       " ranks does not divide into rows of " +
                                                                       std::to_string(world() + 1));
}

// D pipelines of S stages for every D·S = world: each pipeline trains on its share of the batch,
// and every stage ends with the gradients one process computes on the whole batch.
TEST(Pipeline, PipelinesInDataParallelHaveTheWholeBatchsGradients) {
  manual_seed(4);
  const Tensor x = randn({12, 6}), y = randn({12, 3});
  manual_seed(9);
  nn::Sequential reference = small_net();
  mse(reference(x), y).backward();
  const StateDict expected = reference->named_parameters();
  int layouts = 0;
  for (int stages = 1; stages <= world(); ++stages) {
    const int pipelines = world() / stages;
    if (world() % stages != 0 || 12 % (2 * pipelines) != 0) continue;  // shares of 2 micro-batches
    const int d = rank() / stages, s = rank() % stages;                // rank = d·S + s
    const distributed::Mesh2D mesh = distributed::mesh_2d(*group, stages);
    const std::shared_ptr<ProcessGroup>&pipeline_group = mesh.row, &replica_group = mesh.column;
    ASSERT_EQ(pipeline_group->size(), stages);
    ASSERT_EQ(pipeline_group->rank(), s);
    ASSERT_EQ(replica_group->size(), pipelines);
    ASSERT_EQ(replica_group->rank(), d);
    manual_seed(9);
    nn::Sequential model = small_net();
    nn::Pipeline pipe(model, pipeline_group,
                      nn::PipelineOptions().chunks(2).schedule("1f1b").data_parallel_group(replica_group));
    const int64_t share = 12 / pipelines;
    const Tensor loss = pipe.train_step(pipe.is_first() ? x.narrow(0, d * share, share) : Tensor(),
                                        pipe.is_last() ? y.narrow(0, d * share, share) : Tensor(), mse);
    if (pipe.is_last())  // this pipeline's own share
      EXPECT_TRUE(testing::all_close(loss, mse(reference(x.narrow(0, d * share, share)), y.narrow(0, d * share, share)),
                                     1e-5, 1e-7));
    const std::string where = std::to_string(pipelines) + " pipelines of " + std::to_string(stages) + " stages";
    for (const auto& item : pipe.stage()->named_parameters())
      EXPECT_TRUE(testing::all_close(item.value().grad(), expected[item.key()].grad(), 1e-5, 1e-7))
          << where << ": " << item.key();
    // The average starts inside the last micro-batch's backward, from DDP's hooks, not after it.
    if (!pipe.stage()->parameters().empty())
      EXPECT_GT(pipe.data_parallel()->last_backward_stats().launched_during_backward, 0) << where;
    ++layouts;
  }
  EXPECT_GE(layouts, 2);
}

TEST(Pipeline, BadSplitsAreClearErrors) {
  nn::Sequential model = small_net();
  EXPECT_ERROR_CONTAINS(nn::Pipeline(model, group, nn::PipelineOptions().balance({1})),
                        "the balance has 1 stages of 1 layers in all; the group has " + std::to_string(world()));
  EXPECT_ERROR_CONTAINS(nn::Pipeline(model, group, nn::PipelineOptions().schedule("zigzag")), "unknown schedule");
  EXPECT_ERROR_CONTAINS(nn::Pipeline(nn::Sequential(nn::Linear(2, 2)), group), "1 layers cannot fill");
  // Found by the random-arguments test: a balance entry near INT64_MAX overflowed the layer count;
  // an empty batch in 2^40 micro-batches allocated a vector of 2^40 (std::length_error).
  std::vector<int64_t> huge(static_cast<size_t>(world()), 1);
  huge[0] = std::numeric_limits<int64_t>::max();
  EXPECT_ERROR_CONTAINS(nn::Pipeline(model, group, nn::PipelineOptions().balance(huge)),
                        "every stage needs at least one of the model's 5 layers, the balance has 9223372036854775807");
  EXPECT_ERROR_CONTAINS(nn::Pipeline(model, group, nn::PipelineOptions().chunks(int64_t{1} << 40)),
                        "chunks must be between 1 and 1073741823, got 1099511627776");
  const std::shared_ptr<ProcessGroup> alone = distributed::mesh_2d(*group, 1).row;
  nn::Pipeline pipe(model, alone, nn::PipelineOptions().chunks(4));
  EXPECT_ERROR_CONTAINS(
      pipe.train_step(zeros({0, 6}), zeros({0, 3}), mse),
      "the first stage needs an input whose batch divides into 4 non-empty micro-batches, got [0, 6]");
  EXPECT_ERROR_CONTAINS(pipe.train_step(zeros({4, 6}), zeros({0, 3}), mse),
                        "the last stage needs a target whose batch divides into 4 non-empty micro-batches, got [0, 3]");
}

// ---- Pipeline checkpoints (Note [Model-parallel checkpoints]) ----

// One file for every rank: named after rank 0's process.
std::string shared_path(const std::string& name) {
  Tensor pid = tensor(std::vector<int64_t>{static_cast<int64_t>(getpid())});
  group->broadcast(pid, 0)->wait();
  return ::testing::TempDir() + "ember_" + name + "_" + std::to_string(pid.item<int64_t>()) + ".ckpt";
}

optim::AdamWOptions adamw() { return optim::AdamWOptions(0.01).weight_decay(0.1); }

// small_net() cut over every rank, each stage trained by its own AdamW.
struct PipelineRun {
  nn::Sequential model;
  nn::Pipeline pipe;
  optim::AdamW opt;
  TrainingState state{&*model, &opt};
  explicit PipelineRun(uint64_t seed)
      : model((manual_seed(seed), small_net())),
        pipe(model, group, nn::PipelineOptions().chunks(2).schedule("1f1b")),
        opt(pipe.stage()->parameters(), adamw()) {
    state.group = group.get();
    state.stage = &*pipe.stage();
  }
  Tensor step(const Tensor& x, const Tensor& y) {  // the loss, on the last rank
    opt.zero_grad();
    const Tensor loss = pipe.train_step(pipe.is_first() ? x : Tensor(), pipe.is_last() ? y : Tensor(), mse);
    opt.step();
    return loss;
  }
};

// The same model and optimizer in one process, on the whole batch.
struct WholeRun {
  nn::Sequential model;
  optim::AdamW opt;
  TrainingState state{&*model, &opt};
  explicit WholeRun(uint64_t seed) : model((manual_seed(seed), small_net())), opt(model->parameters(), adamw()) {}
  void step(const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    mse(model(x), y).backward();
    opt.step();
  }
};

void expect_close(const StateDict& actual, const StateDict& expected, double rtol, const std::string& what) {
  ASSERT_EQ(actual.keys(), expected.keys()) << what;
  for (const auto& item : expected)
    EXPECT_TRUE(testing::all_close(actual[item.key()], item.value(), rtol, 1e-7)) << what << ": " << item.key();
}

// The pipeline's file is the one-process run's: one process reads the weights and AdamW state of
// the same steps; the pipeline resumes it bit for bit, and one process resumes it as well.
TEST(PipelineCheckpoint, TheFileIsTheOneProcessRunsAndResumesBitForBit) {
  manual_seed(4);
  const Tensor x = randn({8, 6}), y = randn({8, 3});
  const std::string path = shared_path("pipeline");
  PipelineRun run(9);
  for (int i = 0; i < 3; ++i) run.step(x, y);
  randn({rank() + 1});  // each rank's generator at its own offset
  const uint64_t offset = default_generator().offset();
  Tensor rank0_offset = tensor(std::vector<int64_t>{static_cast<int64_t>(offset)});
  group->broadcast(rank0_offset, 0)->wait();
  save_checkpoint(run.state, path);

  WholeRun whole(9);
  for (int i = 0; i < 3; ++i) whole.step(x, y);
  WholeRun loaded(77);
  load_checkpoint(loaded.state, path);
  expect_close(loaded.model->state_dict(), whole.model->state_dict(), 1e-5, "weights");
  const optim::OptimizerState file = loaded.opt.state_dict(), expected = whole.opt.state_dict();
  expect_close(file.tensors, expected.tensors, 1e-5, "AdamW state");
  EXPECT_EQ(file.metadata, expected.metadata);  // steps, groups and options, numbered alike
  EXPECT_EQ(default_generator().offset(),
            static_cast<uint64_t>(rank0_offset.item<int64_t>()));  // one process: rank 0's
  const StateDict named = loaded.model->named_parameters();
  for (const auto& item : run.pipe.stage()->named_parameters())  // this rank's part, exactly as it held it
    EXPECT_TRUE(testing::all_close(named[item.key()], item.value(), 0, 0)) << item.key();

  // And the other way: stages resume one process's file.
  const std::string one_process_path = shared_path("one_process");
  if (rank() == 0) save_checkpoint(whole.state, one_process_path);
  group->barrier()->wait();
  PipelineRun from_whole(55);
  load_checkpoint(from_whole.state, one_process_path);
  const StateDict whole_named = whole.model->named_parameters();
  for (const auto& item : from_whole.pipe.stage()->named_parameters())
    EXPECT_TRUE(testing::all_close(item.value(), whole_named[item.key()], 0, 0)) << item.key();
  EXPECT_EQ(from_whole.opt.state_dict().metadata.at("state.0.step"), "3");

  PipelineRun resumed(123);
  load_checkpoint(resumed.state, path);
  EXPECT_EQ(default_generator().offset(), offset);  // each rank its own generator back
  for (int i = 0; i < 2; ++i) {
    const Tensor expected_loss = run.step(x, y), loss = resumed.step(x, y);
    if (run.pipe.is_last()) EXPECT_TRUE(testing::all_close(loss, expected_loss, 0, 0)) << "step " << i;
    loaded.step(x, y);
  }
  const StateDict continued = resumed.pipe.stage()->named_parameters(), one_process = loaded.model->named_parameters();
  for (const auto& item : run.pipe.stage()->named_parameters()) {
    EXPECT_TRUE(testing::all_close(continued[item.key()], item.value(), 0, 0)) << item.key();
    EXPECT_TRUE(testing::all_close(one_process[item.key()], item.value(), 1e-5, 1e-7)) << item.key();
  }
  group->barrier()->wait();
  if (rank() == 0) {
    std::remove(path.c_str());
    std::remove(one_process_path.c_str());
  }
}

// Whatever fails on one rank fails on every rank, with a message there: none waits for the others
// in a collective until the timeout.
TEST(PipelineCheckpoint, AFailureOnOneRankIsEveryRanks) {
  manual_seed(4);
  const Tensor x = randn({8, 6}), y = randn({8, 3});
  const std::string path = shared_path("failures");
  const int last = world() - 1;
  const std::string on_last = "failed on rank " + std::to_string(last);
  PipelineRun run(9);
  run.step(x, y);
  save_checkpoint(run.state, path);

  PipelineRun fresh(10);
  if (rank() == last)
    EXPECT_ERROR_CONTAINS(load_checkpoint(fresh.state, path + ".missing"), "cannot open");
  else
    EXPECT_ERROR_CONTAINS(load_checkpoint(fresh.state, path), on_last);

  TrainingState twice = run.state;
  twice.stage = &*run.model;  // every rank claims the whole model
  EXPECT_ERROR_CONTAINS(save_checkpoint(twice, path),
                        "'0.weight' is in the stages of " + std::to_string(world()) + " ranks");

  // Another model on one rank, of as many tensors: refused before anything travels.
  nn::Sequential other = small_net();
  if (rank() == last)
    other = nn::Sequential(nn::Linear(6, 16), nn::Tanh(), nn::Linear(16, 8), nn::Tanh(), nn::Linear(8, 4));
  optim::AdamW other_opt(other->parameters(), adamw());
  TrainingState different{&*other, &other_opt};
  different.group = group.get();
  different.stage = &*other;  // on every rank: the check of the models comes before that of the stages
  EXPECT_ERROR_CONTAINS(save_checkpoint(different, path), "the ranks' models differ in their tensors' names, shapes");

  nn::Linear stranger(2, 2);
  TrainingState odd = run.state;
  if (rank() == last) odd.stage = &*stranger;
  EXPECT_ERROR_CONTAINS(save_checkpoint(odd, path),
                        rank() == last ? "the stage's tensor 'weight' is not one of the model's" : on_last);

  optim::SGD sgd(run.pipe.stage()->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  sgd.step();  // momentum buffers from the gradients of run.step
  TrainingState mixed = run.state;
  if (rank() == last) mixed.optimizer = &sgd;
  EXPECT_ERROR_CONTAINS(
      save_checkpoint(mixed, path),
      rank() == 0 ? "rank " + std::to_string(last) + "'s optimizer is a SGD, rank 0's a AdamW" : "failed on rank 0");

  // A file whose optimizer has other groups than this run's stages step.
  const std::vector<Tensor> all = run.model->parameters();
  optim::AdamW grouped({optim::ParamGroup({all.front()}), optim::ParamGroup({all.begin() + 1, all.end()})}, adamw());
  TrainingState two_groups{&*run.model, &grouped};
  group->barrier()->wait();
  if (rank() == 0) save_checkpoint(two_groups, path);  // one process's file
  group->barrier()->wait();
  EXPECT_ERROR_CONTAINS(load_checkpoint(fresh.state, path),
                        "holds an optimizer with 2 parameter groups; this run's have 1");
  group->barrier()->wait();
  if (rank() == 0) std::remove(path.c_str());
}

// Prints the failures of ranks other than 0 (rank 0 keeps gtest's full report).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::cerr << "[rank " << rank_ << "] " << (result.file_name() ? result.file_name() : "") << ":"
                << result.line_number() << ": " << result.summary() << "\n";
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!ember::distributed::is_mpi_available()) {
    std::cout << "ember was built without MPI: nothing to test\n";
    return 0;
  }
  ember::group = ember::distributed::init_process_group(
      "mpi", ember::distributed::ProcessGroupOptions().timeout(std::chrono::seconds(60)));
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (ember::group->rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ember::RankFailurePrinter(ember::group->rank()));
  }
  const int result = RUN_ALL_TESTS();
  ember::group.reset();
  return result;
}
