// DistributedDataParallel: the reducer of Note [DDP reducer].
#include "ember/nn/parallel/distributed.h"

#include <cstring>
#include <limits>
#include <ostream>
#include <utility>

#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"

namespace ember::nn {

using distributed::ReduceOp;

DistributedDataParallelImpl::DistributedDataParallelImpl(std::shared_ptr<Module> module,
                                                         std::shared_ptr<distributed::ProcessGroup> group,
                                                         DistributedDataParallelOptions options)
    : Module("DistributedDataParallel"),
      module_(std::move(module)),
      group_(std::move(group)),
      options_(std::move(options)),
      alive_(std::make_shared<bool>(true)) {
  EMBER_CHECK(module_ != nullptr, "DistributedDataParallel: the module is empty");
  EMBER_CHECK(group_ != nullptr, "DistributedDataParallel: the process group is null");
  EMBER_CHECK(options_.bucket_cap_mb() > 0 && options_.first_bucket_cap_mb() > 0,
              "DistributedDataParallel: bucket caps must be positive, got bucket_cap_mb ", options_.bucket_cap_mb(),
              " and first_bucket_cap_mb ", options_.first_bucket_cap_mb());
  register_module("module", module_);  // state_dict keys "module.<name>", as PyTorch's
  for (const auto& item : module_->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    EMBER_CHECK(item.value().is_floating_point(), "DistributedDataParallel: parameter '", item.key(), "' is ",
                item.value().dtype(), "; only floating parameters are averaged");
    params_.push_back(item.value());
    names_.push_back(item.key());
  }
  check_same_parameters_everywhere();
  // Every replica starts from rank 0's parameters and buffers.
  {
    NoGradGuard no_grad;
    std::vector<distributed::WorkPtr> works;
    for (const Tensor& p : module_->parameters()) works.push_back(group_->broadcast(p, 0));
    for (const Tensor& b : module_->buffers()) works.push_back(group_->broadcast(b, 0));
    for (auto& w : works) w->wait();
  }
  build_buckets();
  std::weak_ptr<bool> alive = alive_;
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].register_post_accumulate_grad_hook([this, alive, i](const Tensor&) {
      if (alive.lock()) mark_ready(i);
    });
}

// The shapes and dtypes of every parameter, compared across ranks: a mismatch (different
// models, or a different registration order) would average unrelated numbers silently.
void DistributedDataParallelImpl::check_same_parameters_everywhere() {
  uint64_t hash = params_.size();  // unsigned: the hash wraps around by design
  for (const Tensor& p : params_) {
    hash = hash * 1000003u + static_cast<uint64_t>(p.dtype());
    for (int64_t s : p.sizes()) hash = hash * 1000003u + static_cast<uint64_t>(s);
  }
  int64_t signature = 0;
  std::memcpy(&signature, &hash, sizeof hash);
  // Built on the host, exchanged on the parameters' device (NCCL carries only GPU tensors).
  const Device device = params_.empty() ? Device(kCPU) : params_.front().device();
  Tensor mine = full({2}, 0, kInt64);
  mine.data_ptr<int64_t>()[0] = signature;
  mine.data_ptr<int64_t>()[1] = static_cast<int64_t>(params_.size());
  mine = mine.to(device);
  std::vector<Tensor> all;
  for (int r = 0; r < group_->size(); ++r) all.push_back(empty({2}, TensorOptions(kInt64).device(device)));
  group_->all_gather(all, mine)->wait();
  for (Tensor& t : all) t = t.cpu();
  for (int r = 0; r < group_->size(); ++r)
    EMBER_CHECK(all[r].data_ptr<int64_t>()[0] == signature, "DistributedDataParallel: rank ", r, " has ",
                all[r].data_ptr<int64_t>()[1], " parameters with other shapes or dtypes than rank ", group_->rank(),
                " (", params_.size(), "); every rank must wrap the same model");
}

void DistributedDataParallelImpl::build_buckets() {
  const auto cap_bytes = [&](size_t bucket) {
    const double bytes = (bucket == 0 ? options_.first_bucket_cap_mb() : options_.bucket_cap_mb()) * 1024 * 1024;
    // A cap past int64's range (infinity included) holds every gradient: one bucket.
    return bytes < 0x1p62 ? static_cast<int64_t>(bytes) : std::numeric_limits<int64_t>::max();
  };
  // Reverse registration order: the last layers' gradients arrive first.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const int64_t b = p.numel() * static_cast<int64_t>(p.element_size());
    const bool new_bucket = groups.empty() || bytes >= cap_bytes(groups.size() - 1) ||
                            params_[groups.back().front()].dtype() != p.dtype() ||
                            params_[groups.back().front()].device() != p.device();
    if (new_bucket) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += b;
  }
  bucket_of_.assign(params_.size(), 0);
  views_.assign(params_.size(), Tensor());
  ready_.assign(params_.size(), false);
  for (const auto& members : groups) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t k : members) numel += params_[k].numel();
    const Tensor& first = params_[members.front()];
    bucket.flat = zeros({numel}, TensorOptions(first.dtype()).device(first.device()));
    int64_t offset = 0;
    for (size_t k : members) {
      bucket_of_[k] = buckets_.size();
      views_[k] = bucket.flat.narrow(0, offset, params_[k].numel()).view(params_[k].sizes());
      offset += params_[k].numel();
    }
    bucket.params = members;
    buckets_.push_back(std::move(bucket));
  }
}

std::vector<std::vector<size_t>> DistributedDataParallelImpl::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

Tensor DistributedDataParallelImpl::forward(const Tensor& input) {
  if (in_backward_) {  // the last backward failed before its end: drop what it launched
    for (Bucket& b : buckets_)
      if (b.work) std::exchange(b.work, nullptr)->wait();
    in_backward_ = false;
  }
  if (options_.broadcast_buffers() && is_training() && group_->size() > 1) {
    NoGradGuard no_grad;
    std::vector<distributed::WorkPtr> works;
    for (const Tensor& b : module_->buffers()) works.push_back(group_->broadcast(b, 0));
    for (auto& w : works) w->wait();
  }
  return (*module_)(input);
}

// A parameter's gradient has been accumulated into its .grad (the post-accumulate-grad hook).
void DistributedDataParallelImpl::mark_ready(size_t index) {
  if (!sync_) return;   // no_sync(): the gradient stays local
  if (!in_backward_) {  // the first gradient of this backward
    in_backward_ = true;
    std::fill(ready_.begin(), ready_.end(), false);
    for (Bucket& b : buckets_) b.pending = b.params.size();
    next_launch_ = 0;
    stats_ = {};
    std::weak_ptr<bool> alive = alive_;
    autograd::queue_callback([this, alive] {
      if (alive.lock()) finalize_backward();
    });
  }
  EMBER_CHECK(!ready_[index], "DistributedDataParallel: parameter '", names_[index],
              "' received its gradient twice in one backward (backward through a graph that uses the module twice "
              "with retain_graph, or a reentrant backward, is not supported)");
  ready_[index] = true;
  // The gradient moves into its bucket slot, and .grad becomes that slot.
  Tensor& grad = params_[index].mutable_grad();
  if (grad.data_ptr() != views_[index].data_ptr()) {
    views_[index].copy_(grad);
    grad = views_[index];
  }
  if (--buckets_[bucket_of_[index]].pending == 0) launch_ready_buckets(false);
  // MPI moves a nonblocking collective forward only inside MPI calls (Open MPI has no progress
  // thread for them): testing the oldest one in flight at every gradient keeps the all-reduces
  // running while backward computes.
  for (size_t b = 0; b < next_launch_; ++b)
    if (buckets_[b].work && !buckets_[b].work->is_completed()) break;
}

// Launches the all-reduce of every bucket that is complete, in bucket order (all ranks must
// issue the collectives in the same order, whatever order their gradients arrive in).
void DistributedDataParallelImpl::launch_ready_buckets(bool at_end) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.work = group_->all_reduce(b.flat, ReduceOp::AVG);
    ++(at_end ? stats_.launched_at_end : stats_.launched_during_backward);
  }
}

void DistributedDataParallelImpl::finalize_backward() {
  in_backward_ = false;
  std::vector<size_t> unused;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) unused.push_back(i);
  std::string unused_names;
  for (size_t i : unused) unused_names += (unused_names.empty() ? "" : ", ") + names_[i];
  if (!unused.empty() && !options_.find_unused_parameters()) {
    for (Bucket& b : buckets_)  // what already started must finish, or the ranks' collectives drift apart
      if (b.work) std::exchange(b.work, nullptr)->wait();
    throw Error("DistributedDataParallel: parameter(s) " + unused_names +
                " received no gradient in this backward; construct it with "
                "DistributedDataParallelOptions().find_unused_parameters(true) if some parameters may go unused");
  }
  // An unused parameter contributes zeros (or what it accumulated under no_sync) to its bucket.
  std::vector<bool> had_grad(params_.size(), true);
  for (size_t i : unused) {
    const Tensor& grad = params_[i].grad();
    had_grad[i] = grad.defined();
    if (grad.defined())
      views_[i].copy_(grad);
    else
      views_[i].zero_();
    ready_[i] = true;
    --buckets_[bucket_of_[i]].pending;
  }
  launch_ready_buckets(true);
  // Which parameters some rank used: those no rank used keep their .grad as it was.
  Tensor used;
  if (options_.find_unused_parameters()) {
    used = ones({static_cast<int64_t>(params_.size())}, kUInt8);
    for (size_t i : unused) used.data_ptr<uint8_t>()[i] = 0;
    used = used.to(params_.front().device());  // NCCL carries only GPU tensors
    group_->all_reduce(used, ReduceOp::MAX)->wait();
    used = used.cpu();
  }
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
  }
  for (size_t i : unused) {
    const bool used_somewhere = used.data_ptr<uint8_t>()[i] != 0;
    Tensor& grad = params_[i].mutable_grad();
    if (used_somewhere || had_grad[i])
      grad = views_[i];
    else
      grad = Tensor();
  }
}

void DistributedDataParallelImpl::pretty_print(std::ostream& os) const {
  os << "DistributedDataParallel(world_size=" << group_->size() << ", rank=" << group_->rank()
     << ", buckets=" << buckets_.size() << ")";
}

}  // namespace ember::nn
