// The NCCL back end (Note [Process groups]): CUDA tensors, one GPU per process. Its pieces:
// - Bootstrap: the ranks agree on NCCL's unique id through an MPI process group (rank 0 makes
//   it, a broadcast shares it; a lone process needs no MPI); the GPU is the launcher's local
//   rank modulo the devices seen.
// - Streams: every operation runs on the group's own stream. Before it, that stream waits for an
//   event recorded on the caller's current stream (the tensors' producers); after it, an event
//   marks the end, and the tensors are recorded as used on the group's stream for the caching
//   allocator. Work::wait() makes the caller's current stream wait for that event and returns:
//   the host does not wait, as in PyTorch (barrier() alone waits on the host).
// - Timeouts without a thread: each new operation and each wait() look at the operations in
//   flight; one unfinished after the group's timeout, or an asynchronous NCCL error, aborts the
//   communicator (ncclCommAbort) and throws an ember::Error naming the op and the rank. What it
//   cannot catch: a host that blocks on the stream (item(), a synchronize) behind a collective
//   that never completes waits inside CUDA; PyTorch's answer is a watchdog thread (planned).
// - Subgroups (new_group): ncclCommSplit of the group's communicator, each with its own stream.
// libnccl is opened on first use (cuda/lazy_library.h), so nothing loads it unless a program
// asks for this back end.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#include "ember/cuda/cuda.h"
#include "ember/cuda/lazy_library.h"
#include "ember/distributed/backends.h"
#include "ember/tensor/ops.h"

namespace ember::distributed {

bool is_nccl_available() { return true; }

namespace {

struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommSplit) comm_split;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
};
const Nccl& nccl() {
  static cuda::LazyLibrary library({"libnccl.so." + std::to_string(NCCL_MAJOR), "libnccl.so"}, "NCCL");
  auto get = [](auto& field, const char* name) {
    field = reinterpret_cast<std::decay_t<decltype(field)>>(library.symbol(name));
  };
  static const Nccl api = [&] {
    Nccl f{};
    get(f.get_unique_id, "ncclGetUniqueId");
    get(f.comm_init_rank, "ncclCommInitRank");
    get(f.comm_abort, "ncclCommAbort");
    get(f.comm_destroy, "ncclCommDestroy");
    // NCCL 2.18 and later; an older libnccl still serves everything else.
    f.comm_split = reinterpret_cast<decltype(f.comm_split)>(library.optional_symbol("ncclCommSplit"));
    get(f.comm_get_async_error, "ncclCommGetAsyncError");
    get(f.error_string, "ncclGetErrorString");
    get(f.all_reduce, "ncclAllReduce");
    get(f.broadcast, "ncclBroadcast");
    get(f.all_gather, "ncclAllGather");
    get(f.reduce_scatter, "ncclReduceScatter");
    get(f.send, "ncclSend");
    get(f.recv, "ncclRecv");
    return f;
  }();
  return api;
}

void check_nccl(ncclResult_t result, const std::string& what) {
  if (result != ncclSuccess) throw Error(what + ": NCCL error: " + nccl().error_string(result));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    case kInt8:
      return ncclInt8;
    case kUInt8:
    case kBool:
      return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return ncclSum;
    case ReduceOp::AVG:
      return ncclAvg;
    case ReduceOp::MAX:
      return ncclMax;
    case ReduceOp::MIN:
      return ncclMin;
  }
  return ncclSum;
}

struct Group;

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Group> group, std::string what, std::vector<Tensor> keep, bool host_wait)
      : group_(std::move(group)),
        what_(std::move(what)),
        keep_(std::move(keep)),
        host_wait_(host_wait),
        start_(std::chrono::steady_clock::now()) {}
  cuda::Event done{false};
  std::function<void()> finish;  // on the caller's stream, after it waited: copies out of staging
  bool is_completed() override { return done.query(); }
  void wait() override;
  const std::string& what() const { return what_; }
  std::chrono::steady_clock::time_point start() const { return start_; }

 private:
  std::shared_ptr<Group> group_;
  std::string what_;
  std::vector<Tensor> keep_;
  bool host_wait_;
  bool waited_ = false;
  std::chrono::steady_clock::time_point start_;
};

// What the group and its Works share.
struct Group {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  std::chrono::milliseconds timeout{};
  cuda::Stream stream;
  std::deque<std::weak_ptr<NcclWork>> in_flight;
  bool aborted = false;

  // The lazy watchdog: finished operations leave the list; an unfinished one past the timeout,
  // or an asynchronous NCCL error, aborts the communicator and throws.
  void check() {
    EMBER_CHECK(!aborted, "ProcessGroup(nccl) on rank ", rank, ": the communicator was aborted after an earlier error");
    ncclResult_t async = ncclSuccess;
    nccl().comm_get_async_error(comm, &async);
    if (async != ncclSuccess) fail("an operation", std::string("NCCL reported: ") + nccl().error_string(async));
    const auto now = std::chrono::steady_clock::now();
    while (!in_flight.empty()) {
      auto work = in_flight.front().lock();
      if (!work || work->is_completed()) {
        in_flight.pop_front();
        continue;
      }
      if (now - work->start() > timeout)
        fail(work->what(), "not completed within the timeout of " + std::to_string(timeout.count()) +
                               " ms (did every rank call it, in the same order, with the same shapes?)");
      break;
    }
  }
  [[noreturn]] void fail(const std::string& what, const std::string& why) {
    aborted = true;
    nccl().comm_abort(comm);
    comm = nullptr;
    throw Error(what + " on rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " + why +
                "; the NCCL communicator was aborted");
  }
  ~Group() {
    if (comm != nullptr) nccl().comm_destroy(comm);
  }
};

void NcclWork::wait() {
  group_->check();
  if (host_wait_) {
    const auto deadline = start_ + group_->timeout;
    while (!done.query()) {
      if (std::chrono::steady_clock::now() > deadline)
        group_->fail(what_, "not completed within the timeout of " + std::to_string(group_->timeout.count()) + " ms");
      std::this_thread::yield();
    }
  }
  if (waited_) return;
  waited_ = true;
  done.wait(cuda::current_stream(group_->device));  // the caller's later work waits for the result
  if (finish) finish();
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(const ProcessGroupOptions& options) : group_(std::make_shared<Group>()) {
    EMBER_CHECK(cuda::is_available(), "init_process_group(\"nccl\"): no CUDA device is available");
    // The ranks agree on NCCL's unique id through MPI; a lone process needs no MPI.
    const LaunchEnvironment env = launch_environment();
    ncclUniqueId id{};
    std::shared_ptr<ProcessGroup> bootstrap;
    if (env.world_size > 1) {
      bootstrap = make_mpi_process_group(options);
      group_->rank = bootstrap->rank();
      group_->size = bootstrap->size();
    }
    group_->device = env.local_rank % cuda::device_count();
    group_->timeout = options.timeout();
    Tensor bytes = zeros({static_cast<int64_t>(sizeof id)}, kUInt8);
    if (group_->rank == 0) {
      check_nccl(nccl().get_unique_id(&id), "init_process_group(\"nccl\")");
      std::memcpy(bytes.data_ptr(), &id, sizeof id);
    }
    if (bootstrap) bootstrap->broadcast(bytes, 0)->wait();
    std::memcpy(&id, bytes.data_ptr(), sizeof id);
    cuda::DeviceGuard guard(group_->device);
    check_nccl(nccl().comm_init_rank(&group_->comm, group_->size, id, group_->rank),
               "init_process_group(\"nccl\") on rank " + std::to_string(group_->rank) + " (GPU " +
                   std::to_string(group_->device) + ")");
    group_->stream = cuda::Stream::create(group_->device);
  }
  // A subgroup (new_group): its communicator, split from this one's.
  explicit NcclProcessGroup(std::shared_ptr<Group> group) : group_(std::move(group)) {}

  int rank() const override { return group_->rank; }
  int size() const override { return group_->size; }
  std::string backend_name() const override { return "nccl"; }
  std::chrono::milliseconds timeout() const override { return group_->timeout; }
  void set_timeout(std::chrono::milliseconds timeout) override {
    EMBER_CHECK(timeout.count() > 0, "ProcessGroup.set_timeout: the timeout must be positive");
    group_->timeout = timeout;
  }

  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override {
    const std::string what = std::string("all_reduce(") + reduce_op_name(op) + ")";
    check_tensor(tensor, what);
    check_reduction("nccl", tensor.dtype(), op, what);
    return launch(what, {tensor}, false, [&](cudaStream_t s) {
      return nccl().all_reduce(tensor.data_ptr(), tensor.data_ptr(), count(tensor), nccl_type(tensor.dtype()),
                               nccl_op(op), group_->comm, s);
    });
  }

  WorkPtr broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    check_peer("nccl", size(), root, "broadcast", "root");
    return launch("broadcast", {tensor}, false, [&](cudaStream_t s) {
      return nccl().broadcast(tensor.data_ptr(), tensor.data_ptr(), count(tensor), nccl_type(tensor.dtype()), root,
                              group_->comm, s);
    });
  }

  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override {
    check_tensor(input, "all_gather");
    check_list("nccl", size(), outputs, input, "all_gather", "outputs");
    const Tensor staging = gather_buffer(size(), input);
    auto work = launch("all_gather", {input, staging}, false, [&](cudaStream_t s) {
      return nccl().all_gather(input.data_ptr(), staging.data_ptr(), count(input), nccl_type(input.dtype()),
                               group_->comm, s);
    });
    work->finish = copy_out_of(staging, outputs);
    return work;
  }

  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    const std::string what = std::string("reduce_scatter(") + reduce_op_name(op) + ")";
    check_tensor(output, what);
    check_list("nccl", size(), inputs, output, what, "inputs");
    check_reduction("nccl", output.dtype(), op, what);
    const Tensor staging = scatter_buffer(inputs);
    return launch(what, {output, staging}, false, [&](cudaStream_t s) {
      return nccl().reduce_scatter(staging.data_ptr(), output.data_ptr(), count(output), nccl_type(output.dtype()),
                                   nccl_op(op), group_->comm, s);
    });
  }

  WorkPtr barrier() override {  // an all-reduce of one number, waited for on the host
    const Tensor one = ones({1}, TensorOptions(kFloat32).device(Device(kCUDA, group_->device)));
    return launch("barrier", {one}, true, [&](cudaStream_t s) {
      return nccl().all_reduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum, group_->comm, s);
    });
  }

  // ncclCommSplit: a collective over this group's communicator, no bootstrap needed. As the MPI
  // back end, the ranks first compare fingerprints of their lists, since a split of lists that
  // differ would build groups nobody asked for.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override {
    check_group_ranks("nccl", size(), ranks);
    EMBER_CHECK(nccl().comm_split != nullptr,
                "ProcessGroup(nccl).new_group: this libnccl has no ncclCommSplit "
                "(subgroups need NCCL 2.18 or later)");
    Fingerprint list;
    for (int r : ranks) list.add(static_cast<uint64_t>(r));
    const Device gpu(kCUDA, group_->device);
    for (const Spread& s : spread_over_ranks(*this, {list.value(), static_cast<int64_t>(ranks.size())}, gpu))
      EMBER_CHECK(s.same(), "ProcessGroup(nccl).new_group on rank ", rank(),
                  ": the ranks passed different lists of members (every rank must pass the same)");
    group_->check();
    const auto at = std::find(ranks.begin(), ranks.end(), rank());
    const bool member = at != ranks.end();
    auto made = std::make_shared<Group>();
    made->rank = static_cast<int>(at - ranks.begin());
    made->size = static_cast<int>(ranks.size());
    made->device = group_->device;
    made->timeout = group_->timeout;
    {
      cuda::DeviceGuard guard(group_->device);
      check_nccl(nccl().comm_split(group_->comm, member ? 0 : NCCL_SPLIT_NOCOLOR, member ? made->rank : 0, &made->comm,
                                   nullptr),
                 "ProcessGroup(nccl).new_group on rank " + std::to_string(rank()));
    }
    if (!member) return nullptr;
    made->stream = cuda::Stream::create(made->device);
    return std::make_shared<NcclProcessGroup>(std::move(made));
  }

  WorkPtr send(const Tensor& tensor, int dst, int tag) override {
    check_tensor(tensor, "send");
    check_peer("nccl", size(), dst, "send", "destination");
    EMBER_CHECK(tag >= 0, "send: the tag must be non-negative, got ", tag);  // NCCL orders by call, not tag
    return launch("send to rank " + std::to_string(dst), {tensor}, false, [&](cudaStream_t s) {
      return nccl().send(tensor.data_ptr(), count(tensor), nccl_type(tensor.dtype()), dst, group_->comm, s);
    });
  }

  WorkPtr recv(const Tensor& tensor, int src, int tag) override {
    check_tensor(tensor, "recv");
    check_peer("nccl", size(), src, "recv", "source");
    EMBER_CHECK(tag >= 0, "recv: the tag must be non-negative, got ", tag);
    return launch("recv from rank " + std::to_string(src), {tensor}, false, [&](cudaStream_t s) {
      return nccl().recv(tensor.data_ptr(), count(tensor), nccl_type(tensor.dtype()), src, group_->comm, s);
    });
  }

 private:
  // Runs `start` on the group's stream between the two events of Note [Process groups] above.
  template <class Start>
  std::shared_ptr<NcclWork> launch(const std::string& what, std::vector<Tensor> tensors, bool host_wait,
                                   const Start& start) {
    group_->check();
    const cuda::Stream caller = cuda::current_stream(group_->device);
    cuda::Event ready(false);
    ready.record(caller);
    ready.wait(group_->stream);
    {
      cuda::DeviceGuard guard(group_->device);
      check_nccl(start(reinterpret_cast<cudaStream_t>(group_->stream.handle())),
                 what + " on rank " + std::to_string(rank()));
    }
    for (const Tensor& t : tensors) cuda::record_stream(t, group_->stream);
    auto work = std::make_shared<NcclWork>(group_, what, std::move(tensors), host_wait);
    work->done.record(group_->stream);
    group_->in_flight.push_back(work);
    return work;
  }

  static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

  void check_tensor(const Tensor& t, const std::string& what) const {
    EMBER_CHECK(t.defined(), "ProcessGroup(nccl).", what, ": the tensor is undefined");
    EMBER_CHECK(t.device() == Device(kCUDA, group_->device), "ProcessGroup(nccl).", what,
                ": the NCCL back end carries tensors on this rank's GPU, cuda:", group_->device, ", got one on ",
                t.device());
    EMBER_CHECK(t.is_contiguous(), "ProcessGroup(nccl).", what, ": the tensor of shape ", shape_str(t.sizes()),
                " must be contiguous");
  }

  std::shared_ptr<Group> group_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options) {
  return std::make_shared<NcclProcessGroup>(options);
}

}  // namespace ember::distributed
