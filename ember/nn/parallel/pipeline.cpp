// Pipeline stages over ranks: Note [Pipeline schedules] in pipeline.h.
#include "ember/nn/parallel/pipeline.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "ember/autograd/grad_mode.h"

namespace ember::nn {

namespace {
constexpr int64_t kMaxDims = 6;  // activations between stages: up to 6 dimensions

// Tags: a micro-batch's activation goes forward with 2m, its gradient back with 2m + 1.
int forward_tag(int64_t micro) { return static_cast<int>(2 * micro); }
int backward_tag(int64_t micro) { return static_cast<int>(2 * micro + 1); }
}  // namespace

Pipeline::Pipeline(const Sequential& model, std::shared_ptr<distributed::ProcessGroup> group, PipelineOptions options)
    : group_(std::move(group)), options_(std::move(options)) {
  EMBER_CHECK(group_ != nullptr, "Pipeline: the process group is null");
  // (a micro-batch's tags, 2m and 2m + 1, are ints)
  EMBER_CHECK(options_.chunks() >= 1 && options_.chunks() <= (std::numeric_limits<int>::max() - 1) / 2,
              "Pipeline: chunks must be between 1 and ", (std::numeric_limits<int>::max() - 1) / 2, ", got ",
              options_.chunks());
  EMBER_CHECK(options_.schedule() == "gpipe" || options_.schedule() == "1f1b", "Pipeline: unknown schedule '",
              options_.schedule(), "' (gpipe or 1f1b)");
  const int64_t layers = static_cast<int64_t>(model->size()), stages = group_->size();
  std::vector<int64_t> balance = options_.balance();
  if (balance.empty()) {
    EMBER_CHECK(layers >= stages, "Pipeline: ", layers, " layers cannot fill ", stages, " stages");
    for (int64_t s = 0; s < stages; ++s) balance.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  }
  int64_t total = 0;
  for (int64_t b : balance) {
    EMBER_CHECK(b >= 1 && b <= layers, "Pipeline: every stage needs at least one of the model's ", layers,
                " layers, the balance has ", b);
    total += b;  // (at most stages x layers: no overflow)
  }
  EMBER_CHECK(static_cast<int64_t>(balance.size()) == stages && total == layers, "Pipeline: the balance has ",
              balance.size(), " stages of ", total, " layers in all; the group has ", stages, " ranks and the model ",
              layers, " layers");
  for (int64_t s = 0; s < group_->rank(); ++s) first_layer_ += balance[s];
  for (int64_t k = 0; k < balance[group_->rank()]; ++k) {
    const int64_t index = first_layer_ + k;
    stage_->push_back(std::to_string(index), (*model)[index]);  // named as in the whole model
  }
  const auto params = stage_->parameters();
  device_ = params.empty() ? Device(kCPU) : params.front().device();
  // Note [Pipelines in data parallel]: with D pipelines of S stages (D·S ranks), stage s of
  // every pipeline forms a data-parallel group of D ranks, each pipeline training on its own
  // share of the batch. The stage runs under DistributedDataParallel over that group: the
  // micro-batches but the last accumulate locally (no_sync), and the last one's backward
  // launches the buckets' all-reduces as their gradients arrive, overlapping the rest of that
  // backward. Every pipeline then holds the gradients of the mean loss over all the shares.
  if (options_.data_parallel_group()) replicas_ = DistributedDataParallel(stage_, options_.data_parallel_group());
}

void Pipeline::send_activation(const Tensor& t, int dst, int64_t micro) {
  EMBER_CHECK(t.dim() <= kMaxDims, "Pipeline: an activation between stages has ", t.dim(), " dimensions (at most ",
              kMaxDims, ")");
  Tensor header = full({kMaxDims + 2}, 0, kInt64);
  int64_t* h = header.data_ptr<int64_t>();
  h[0] = t.dim();
  h[1] = static_cast<int64_t>(t.dtype());
  for (int64_t d = 0; d < t.dim(); ++d) h[2 + d] = t.size(d);
  header = header.to(device_);
  const Tensor data = t.to(device_).contiguous();
  sends_.push_back(group_->send(header, dst, forward_tag(micro)));
  sends_.push_back(group_->send(data, dst, forward_tag(micro)));  // after the header: MPI keeps their order
  sent_.push_back(header);
  sent_.push_back(data);
}

Tensor Pipeline::recv_activation(int src, int64_t micro, bool requires_grad) {
  Tensor header = empty({kMaxDims + 2}, TensorOptions(kInt64).device(device_));
  group_->recv(header, src, forward_tag(micro))->wait();
  header = header.cpu();
  const int64_t* h = header.data_ptr<int64_t>();
  EMBER_CHECK(h[0] >= 0 && h[0] <= kMaxDims && h[1] >= 0 && h[1] < kNumDTypes,
              "Pipeline: a malformed activation header from rank ", src);
  Shape sizes(h + 2, h + 2 + h[0]);
  Tensor x = empty(sizes, TensorOptions(static_cast<DType>(h[1])).device(device_));
  group_->recv(x, src, forward_tag(micro))->wait();
  if (requires_grad && x.is_floating_point()) x.requires_grad_(true);
  return x;
}

Tensor Pipeline::train_step(const Tensor& input, const Tensor& target, const LossFn& loss_fn) {
  const int64_t chunks = options_.chunks(), stages = group_->size(), s = group_->rank();
  if (is_first())
    EMBER_CHECK(input.defined() && input.dim() >= 1 && input.size(0) >= chunks && input.size(0) % chunks == 0,
                "Pipeline.train_step: the first stage needs an input whose batch divides into ", chunks,
                " non-empty micro-batches, got ", input.defined() ? shape_str(input.sizes()) : "an undefined tensor");
  if (is_last()) {
    EMBER_CHECK(loss_fn != nullptr, "Pipeline.train_step: the last stage needs a loss function");
    EMBER_CHECK(target.defined() && target.dim() >= 1 && target.size(0) >= chunks && target.size(0) % chunks == 0,
                "Pipeline.train_step: the last stage needs a target whose batch divides into ", chunks,
                " non-empty micro-batches, got ", target.defined() ? shape_str(target.sizes()) : "an undefined tensor");
  }
  auto micro_slice = [&](const Tensor& t, int64_t m) {
    const int64_t n = t.size(0) / chunks;
    return t.narrow(0, m * n, n);
  };
  struct InFlight {
    Tensor input, output;  // output: the stage's output, or on the last stage the micro-batch's loss
  };
  // Grown as micro-batches start: a middle stage does not know the batch, and allocates nothing
  // for micro-batches that never arrive (the first stage refused them).
  std::vector<InFlight> flight;
  int64_t held = 0;
  peak_held_ = 0;
  Tensor loss_sum;

  auto forward_one = [&](int64_t m) {
    EnableGradGuard grad;
    if (static_cast<size_t>(m) >= flight.size()) flight.resize(static_cast<size_t>(m) + 1);
    InFlight& f = flight[static_cast<size_t>(m)];
    f.input = is_first() ? micro_slice(input, m) : recv_activation(static_cast<int>(s - 1), m, true);
    const Tensor y = replicas_ ? replicas_(f.input) : stage_(f.input);
    if (is_last()) {
      f.output = loss_fn(y, micro_slice(target, m)) / static_cast<double>(chunks);
      const Tensor l = f.output.detach();
      loss_sum = loss_sum.defined() ? loss_sum + l : l;
    } else {
      send_activation(y.detach(), static_cast<int>(s + 1), m);
      f.output = y;
    }
    peak_held_ = std::max(peak_held_, ++held);
  };
  auto backward_one = [&](int64_t m) {
    InFlight& f = flight[static_cast<size_t>(m)];
    std::optional<DistributedDataParallelImpl::NoSyncGuard> local;  // only the last micro-batch syncs
    if (replicas_ && m != chunks - 1) local.emplace(*replicas_);
    if (is_last()) {
      f.output.backward();
    } else {
      Tensor grad = empty(f.output.sizes(), TensorOptions(f.output.dtype()).device(f.output.device()));
      group_->recv(grad, static_cast<int>(s + 1), backward_tag(m))->wait();
      f.output.backward(grad);
    }
    if (!is_first()) {
      const Tensor g = f.input.grad().defined() ? f.input.grad() : zeros_like(f.input);
      sends_.push_back(group_->send(g.contiguous(), static_cast<int>(s - 1), backward_tag(m)));
      sent_.push_back(g);
    }
    f = InFlight();  // the micro-batch's activations are freed here
    --held;
  };

  if (options_.schedule() == "gpipe") {
    for (int64_t m = 0; m < chunks; ++m) forward_one(m);
    for (int64_t m = 0; m < chunks; ++m) backward_one(m);
  } else {  // 1F1B
    const int64_t warmup = std::min(stages - s - 1, chunks);
    for (int64_t m = 0; m < warmup; ++m) forward_one(m);
    for (int64_t m = warmup; m < chunks; ++m) {
      forward_one(m);
      backward_one(m - warmup);
    }
    for (int64_t m = chunks - warmup; m < chunks; ++m) backward_one(m);
  }
  for (auto& w : sends_) w->wait();
  sends_.clear();
  sent_.clear();
  return is_last() ? loss_sum : Tensor();
}

Tensor Pipeline::forward(const Tensor& input) {
  NoGradGuard no_grad;
  if (is_first())
    EMBER_CHECK(input.defined(), "Pipeline.forward: the first stage needs an input, got an undefined tensor");
  const Tensor x = is_first() ? input : recv_activation(group_->rank() - 1, 0, false);
  const Tensor y = stage_(x);
  if (!is_last()) send_activation(y, group_->rank() + 1, 0);
  for (auto& w : sends_) w->wait();
  sends_.clear();
  sent_.clear();
  return is_last() ? y : Tensor();
}

}  // namespace ember::nn
