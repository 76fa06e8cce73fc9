// The MPI back end (Note [Process groups]): every operation is MPI's nonblocking form
// (MPI_Iallreduce, MPI_Ibcast, ...) on the group's own communicator, and its Work polls
// MPI_Testall, so that wait() can give up after the timeout. MPI carries no 16-bit floating
// type: float16 and bfloat16 travel as 16-bit integers and are reduced by ember's own MPI_Op
// (in float, rounded back), as NCCL does on GPUs. Calls into MPI are serialized by one mutex,
// whatever thread support the library provides.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <mutex>
#include <thread>

#include "ember/distributed/backends.h"
#include "ember/tensor/ops.h"

namespace ember::distributed {

bool is_mpi_available() { return true; }

namespace {

std::mutex& mpi_mutex() {
  static std::mutex m;
  return m;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw Error(what + ": MPI error: " + mpi_error(code));
}

// MPI from the first process group to the end of the program (MPI_Init is once per process).
class MpiRuntime {
 public:
  static MpiRuntime& get() {
    static MpiRuntime runtime;
    return runtime;
  }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialized_here_ && !finalized) MPI_Finalize();
  }

 private:
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "init_process_group(\"mpi\")");
    initialized_here_ = true;
  }
  bool initialized_here_ = false;
};

// ---- dtypes and ops ----

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt32:
      return MPI_INT32_T;
    case kInt64:
      return MPI_INT64_T;
    case kInt8:
      return MPI_INT8_T;
    case kUInt8:
    case kBool:
      return MPI_UINT8_T;
    case kFloat16:
    case kBFloat16:
      return MPI_UINT16_T;  // reduced by reduce_16bit
  }
  return MPI_DATATYPE_NULL;
}

template <class T, ReduceOp R>
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    b[i] = T(R == ReduceOp::MAX ? std::max(x, y) : R == ReduceOp::MIN ? std::min(x, y) : x + y);
  }
}

// The MPI_Op of a reduction of dtype t (AVG reduces as SUM, then divides).
MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t != kFloat16 && t != kBFloat16) {
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
        return MPI_SUM;
      case ReduceOp::MAX:
        return MPI_MAX;
      case ReduceOp::MIN:
        return MPI_MIN;
    }
  }
  // ember's own ops for the 16-bit types, made once (the caller holds mpi_mutex).
  static MPI_Op ops[2][3];
  static bool created[2][3] = {};
  const int kind = op == ReduceOp::MAX ? 1 : op == ReduceOp::MIN ? 2 : 0;
  MPI_Op& made = ops[t == kBFloat16][kind];
  if (!created[t == kBFloat16][kind]) {
    MPI_User_function* fn = nullptr;
    if (t == kFloat16)
      fn = kind == 0   ? reduce_16bit<Half, ReduceOp::SUM>
           : kind == 1 ? reduce_16bit<Half, ReduceOp::MAX>
                       : reduce_16bit<Half, ReduceOp::MIN>;
    else
      fn = kind == 0   ? reduce_16bit<BFloat16, ReduceOp::SUM>
           : kind == 1 ? reduce_16bit<BFloat16, ReduceOp::MAX>
                       : reduce_16bit<BFloat16, ReduceOp::MIN>;
    check_mpi(MPI_Op_create(fn, /*commute=*/1, &made), "MPI_Op_create");
    created[t == kBFloat16][kind] = true;
  }
  return made;
}

// ---- the group ----

struct GroupState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{};
  ~GroupState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<GroupState> group, std::string what, std::vector<Tensor> keep)
      : group_(std::move(group)), what_(std::move(what)), keep_(std::move(keep)) {}

  std::vector<MPI_Request> requests;
  std::function<void()> finish;  // after completion: copy out of staging, divide for AVG

  bool is_completed() override {
    if (done_) return true;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      int flag = 0;
      check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE),
                what_ + " on rank " + std::to_string(group_->rank));
      if (!flag) return false;
    }
    if (finish) finish();
    done_ = true;
    keep_.clear();
    return true;
  }

  void wait() override {
    const auto start = std::chrono::steady_clock::now(), deadline = start + group_->timeout;
    while (!is_completed()) {
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline)
        throw Error(what_ + " on rank " + std::to_string(group_->rank) + " of " + std::to_string(group_->size) +
                    ": not completed within the timeout of " + std::to_string(group_->timeout.count()) +
                    " ms (did every rank call it, in the same order, with the same shapes?)");
      // MPI moves a nonblocking operation forward only inside MPI calls, so poll without pause
      // (yielding the core to a rank that shares it); after 50 ms the peers are computing, not
      // communicating, and polling slows down so as not to take their cores.
      if (now - start < std::chrono::milliseconds(50))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  std::shared_ptr<GroupState> group_;
  std::string what_;
  std::vector<Tensor> keep_;  // the tensors MPI reads or writes, alive until it is done
  bool done_ = false;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(const ProcessGroupOptions& options) : state_(std::make_shared<GroupState>()) {
    MpiRuntime::get();
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm), "init_process_group(\"mpi\")");
    adopt(options.timeout());
  }
  // A subgroup's: `comm` is the caller's (held mpi_mutex) new communicator, now this group's.
  MpiProcessGroup(MPI_Comm comm, std::chrono::milliseconds timeout) : state_(std::make_shared<GroupState>()) {
    state_->comm = comm;
    adopt(timeout);
  }

  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  std::string backend_name() const override { return "mpi"; }
  std::chrono::milliseconds timeout() const override { return state_->timeout; }
  void set_timeout(std::chrono::milliseconds timeout) override {
    EMBER_CHECK(timeout.count() > 0, "ProcessGroup.set_timeout: the timeout must be positive");
    state_->timeout = timeout;
  }

  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override {
    const std::string what = std::string("all_reduce(") + reduce_op_name(op) + ")";
    check_tensor(tensor, what);
    check_reduction("mpi", tensor.dtype(), op, what);
    auto work = make_work(what, {tensor});
    launch(*work, what, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), count(tensor), mpi_type(tensor.dtype()),
                            mpi_op(op, tensor.dtype()), state_->comm, r);
    });
    if (op == ReduceOp::AVG) work->finish = divide_by_size(tensor);
    return work;
  }

  WorkPtr broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    check_peer("mpi", size(), root, "broadcast", "root");
    auto work = make_work("broadcast", {tensor});
    launch(*work, "broadcast", [&](MPI_Request* r) {
      return MPI_Ibcast(tensor.data_ptr(), count(tensor), mpi_type(tensor.dtype()), root, state_->comm, r);
    });
    return work;
  }

  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override {
    check_tensor(input, "all_gather");
    check_list("mpi", size(), outputs, input, "all_gather", "outputs");
    // One contiguous buffer of size() slots, copied into the outputs when done.
    const Tensor staging = gather_buffer(size(), input);
    auto work = make_work("all_gather", {input, staging});
    launch(*work, "all_gather", [&](MPI_Request* r) {
      return MPI_Iallgather(input.data_ptr(), count(input), mpi_type(input.dtype()), staging.data_ptr(), count(input),
                            mpi_type(input.dtype()), state_->comm, r);
    });
    work->finish = copy_out_of(staging, outputs);
    return work;
  }

  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    const std::string what = std::string("reduce_scatter(") + reduce_op_name(op) + ")";
    check_tensor(output, what);
    check_list("mpi", size(), inputs, output, what, "inputs");
    check_reduction("mpi", output.dtype(), op, what);
    const Tensor staging = scatter_buffer(inputs);
    auto work = make_work(what, {output, staging});
    launch(*work, what, [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(staging.data_ptr(), output.data_ptr(), count(output), mpi_type(output.dtype()),
                                       mpi_op(op, output.dtype()), state_->comm, r);
    });
    if (op == ReduceOp::AVG) work->finish = divide_by_size(output);
    return work;
  }

  WorkPtr barrier() override {
    auto work = make_work("barrier", {});
    launch(*work, "barrier", [&](MPI_Request* r) { return MPI_Ibarrier(state_->comm, r); });
    return work;
  }

  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override {
    check_group_ranks("mpi", size(), ranks);
    // Every rank must pass the same list: compare fingerprints first (within the timeout), since
    // MPI_Comm_split with lists that differ would build groups nobody asked for.
    Fingerprint list;
    for (int r : ranks) list.add(static_cast<uint64_t>(r));
    for (const Spread& s : spread_over_ranks(*this, {list.value(), static_cast<int64_t>(ranks.size())}))
      EMBER_CHECK(s.same(), "ProcessGroup(mpi).new_group on rank ", rank(),
                  ": the ranks passed different lists of members (every rank must pass the same)");
    const auto at = std::find(ranks.begin(), ranks.end(), rank());
    const bool member = at != ranks.end();
    MPI_Comm comm = MPI_COMM_NULL;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      check_mpi(MPI_Comm_split(state_->comm, member ? 0 : MPI_UNDEFINED, static_cast<int>(at - ranks.begin()), &comm),
                "ProcessGroup(mpi).new_group on rank " + std::to_string(rank()));
      if (!member) return nullptr;
      return std::make_shared<MpiProcessGroup>(comm, state_->timeout);
    }
  }

  WorkPtr send(const Tensor& tensor, int dst, int tag) override {
    check_tensor(tensor, "send");
    check_peer("mpi", size(), dst, "send", "destination");
    EMBER_CHECK(tag >= 0, "send: the tag must be non-negative, got ", tag);
    const std::string what = "send to rank " + std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
    auto work = make_work(what, {tensor});
    launch(*work, what, [&](MPI_Request* r) {
      return MPI_Isend(tensor.data_ptr(), count(tensor), mpi_type(tensor.dtype()), dst, tag, state_->comm, r);
    });
    return work;
  }

  WorkPtr recv(const Tensor& tensor, int src, int tag) override {
    check_tensor(tensor, "recv");
    check_peer("mpi", size(), src, "recv", "source");
    EMBER_CHECK(tag >= 0, "recv: the tag must be non-negative, got ", tag);
    const std::string what = "recv from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + ")";
    auto work = make_work(what, {tensor});
    launch(*work, what, [&](MPI_Request* r) {
      return MPI_Irecv(tensor.data_ptr(), count(tensor), mpi_type(tensor.dtype()), src, tag, state_->comm, r);
    });
    return work;
  }

 private:
  void adopt(std::chrono::milliseconds timeout) {              // the caller holds mpi_mutex
    MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN);  // errors as codes, reported as ember::Error
    MPI_Comm_rank(state_->comm, &state_->rank);
    MPI_Comm_size(state_->comm, &state_->size);
    state_->timeout = timeout;
  }

  std::shared_ptr<MpiWork> make_work(const std::string& what, std::vector<Tensor> keep) {
    return std::make_shared<MpiWork>(state_, what, std::move(keep));
  }

  template <class Start>
  void launch(MpiWork& work, const std::string& what, const Start& start) {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    work.requests.emplace_back();
    check_mpi(start(&work.requests.back()), what + " on rank " + std::to_string(rank()));
  }

  std::function<void()> divide_by_size(const Tensor& tensor) const {
    return [tensor, n = size()] {
      Tensor t = tensor;
      native::div_(t, full({}, n, TensorOptions(t.dtype())));
    };
  }

  static int count(const Tensor& t) { return static_cast<int>(t.numel()); }

  void check_tensor(const Tensor& t, const std::string& what) const {
    EMBER_CHECK(t.defined(), "ProcessGroup(mpi).", what, ": the tensor is undefined");
    EMBER_CHECK(t.device().is_cpu(), "ProcessGroup(mpi).", what, ": the MPI back end carries CPU tensors, got one on ",
                t.device(), " (the NCCL back end carries CUDA tensors)");
    EMBER_CHECK(t.is_contiguous(), "ProcessGroup(mpi).", what, ": the tensor of shape ", shape_str(t.sizes()),
                " must be contiguous");
    EMBER_CHECK(t.numel() <= INT_MAX, "ProcessGroup(mpi).", what, ": ", t.numel(),
                " elements are more than one MPI call carries (2^31 - 1); split the tensor");
  }

  std::shared_ptr<GroupState> state_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options) {
  return std::make_shared<MpiProcessGroup>(options);
}

}  // namespace ember::distributed
