// The dispatch point (Note [The dispatch point]): every public op call passes through it, a
// policy sees (op, inputs) and may replace the inputs, and the tape records what ran.
#include <cstring>
#include <set>
#include <thread>

#include "ember/tensor/backend.h"
#include "helpers.h"

namespace ember {
namespace {

using dispatch::Call;
using dispatch::OpId;

// Records what it sees: "name@depth" per call, in order.
struct Recorder : dispatch::Policy {
  std::vector<std::string> seen, finished;
  std::vector<size_t> input_counts;
  void before(Call& call) override {
    seen.push_back(std::string(dispatch::op_name(call.op)) + "@" + std::to_string(call.depth));
    input_counts.push_back(call.inputs.size());
  }
  void after(const Call& call) override { finished.push_back(dispatch::op_name(call.op)); }
};

// Casts the float32 operands of mm to float64: autocast's mechanism, with another dtype.
struct MmInDouble : dispatch::Policy {
  void before(Call& call) override {
    if (call.op != OpId::mm) return;
    for (Tensor* t : call.inputs)
      if (t->defined() && t->dtype() == kFloat32) *t = t->to(kFloat64);
  }
};

TEST(Dispatch, EveryPublicOpCallPassesThroughWithItsTensorInputs) {
  Recorder rec;
  const Tensor a = ones({2, 3}), b = ones({3, 4});
  {
    dispatch::PolicyGuard guard(rec);
    const Tensor c = add(mm(a, b), 1.0).sum({1});
    (void)c;
    const Tensor parts = cat({a, a}, 0);  // a tensor list: each element is an input
    (void)parts;
  }
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"mm@0", "add_scalar@0", "sum@0", "cat@0"}));
  EXPECT_EQ(rec.input_counts, (std::vector<size_t>{2, 1, 1, 2}));
  EXPECT_EQ(rec.finished, (std::vector<std::string>{"mm", "add_scalar", "sum", "cat"}));
  (void)add(a, a);  // the guard is gone: nothing more is seen
  EXPECT_EQ(rec.seen.size(), 4u);
}

TEST(Dispatch, MethodsAndOperatorsDispatchToo) {
  Recorder rec;
  const Tensor a = ones({2, 2});
  dispatch::PolicyGuard guard(rec);
  (void)a.exp();
  (void)(a * 2.0);
  (void)(a > 0.5);
  (void)a.view({4});
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"exp@0", "mul_scalar@0", "gt_scalar@0", "view@0"}));
}

TEST(Dispatch, OpsInsideAnOpAreSeenDeeper) {
  Recorder rec;
  const Tensor a = randn({2, 3, 4}).requires_grad_(), b = randn({4, 5});
  dispatch::PolicyGuard guard(rec);
  (void)matmul(a, b);  // differentiable matmul is written with public views and mm
  ASSERT_FALSE(rec.seen.empty());
  EXPECT_EQ(rec.seen.front(), "matmul@0");
  EXPECT_NE(std::find(rec.seen.begin(), rec.seen.end(), "mm@1"), rec.seen.end());
}

TEST(Dispatch, AnInplaceOpsSelfIsNotAReplaceableInput) {
  Recorder rec;
  Tensor a = zeros({3});
  {
    dispatch::PolicyGuard guard(rec);
    a.add_(ones({3}));
  }
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"add_@0"}));
  EXPECT_EQ(rec.input_counts, (std::vector<size_t>{1}));
  EXPECT_EQ(a.sum().item<float>(), 3.0f);
}

TEST(Dispatch, APolicyReplacesInputsAndTheTapeCastsGradientsBack) {
  MmInDouble policy;
  const Tensor a = tensor<float>({1, 2, 3, 4}, Shape{2, 2}).requires_grad_();
  const Tensor b = tensor<float>({0.5f, -1, 2, 0.25f}, Shape{2, 2}).requires_grad_();
  Tensor c;
  {
    dispatch::PolicyGuard guard(policy);
    c = mm(a, b);
  }
  EXPECT_EQ(c.dtype(), kFloat64);  // mm ran on the replaced (float64) inputs
  EXPECT_TRUE(testing::all_close(c, mm(a, b).to(kFloat64)));
  c.sum().backward();
  // The casts were recorded: float32 leaves get float32 gradients, d sum(a b) / da = 1 b^T.
  ASSERT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_TRUE(testing::all_close(a.grad(), ones({2, 2}).mm(b.detach().t())));
  EXPECT_TRUE(testing::all_close(b.grad(), a.detach().t().mm(ones({2, 2}))));
}

TEST(Dispatch, OpsAPolicyCallsAreSeenOneDeeper) {
  Recorder rec;
  MmInDouble cast;
  dispatch::PolicyGuard outer(rec);
  dispatch::PolicyGuard inner(cast);
  (void)mm(ones({2, 2}), ones({2, 2}));
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"mm@0", "to@1", "to@1"}));
}

TEST(Dispatch, NestedGuardsRunInnermostNearestTheOp) {
  struct Tagger : dispatch::Policy {
    std::vector<std::string>* log;
    std::string tag;
    Tagger(std::vector<std::string>* l, std::string t) : log(l), tag(std::move(t)) {}
    void before(Call&) override { log->push_back(tag + "+"); }
    void after(const Call&) override { log->push_back(tag + "-"); }
  };
  std::vector<std::string> log;
  Tagger outer(&log, "outer"), inner(&log, "inner");
  dispatch::PolicyGuard g1(outer);
  dispatch::PolicyGuard g2(inner);
  (void)neg(ones({1}));
  EXPECT_EQ(log, (std::vector<std::string>{"outer+", "inner+", "inner-", "outer-"}));
}

TEST(Dispatch, PoliciesBelongToTheirThread) {
  Recorder rec;
  dispatch::PolicyGuard guard(rec);
  std::thread other([] { (void)exp(ones({2})); });
  other.join();
  EXPECT_TRUE(rec.seen.empty());
}

TEST(Dispatch, AfterRunsWhenTheOpThrows) {
  Recorder rec;
  dispatch::PolicyGuard guard(rec);
  EXPECT_ERROR_CONTAINS(mm(ones({2, 3}), ones({4, 5})), "mm");
  EXPECT_EQ(rec.finished, (std::vector<std::string>{"mm"}));
}

TEST(Dispatch, EveryOpHasADistinctName) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(OpId::kCount); ++i) names.insert(dispatch::op_name(static_cast<OpId>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(OpId::kCount));
  EXPECT_STREQ(dispatch::op_name(OpId::add_scalar), "add_scalar");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// A back end entered in the registry for the CUDA device type (Note [Back-end registry]):
// host memory, a few kernels forwarded to the CPU's and counted, the rest unsupported.
class CountingBackend final : public Backend {
 public:
  const char* name() const override { return "counting"; }
  Allocator* allocator(int) override { return cpu_allocator(); }
  void fill(const Tensor& dst, const Scalar& value) override {
    ++calls;
    cpu_backend().fill(dst, value);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) override {
    ++calls;
    cpu_backend().binary(op, a, b, out, alpha);
  }
  void copy_across(const Tensor& src, const Tensor& dst, bool) override {  // both sides are host memory
    ++calls;
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
  }
  int calls = 0;
};

// Enters a back end for a device type for its scope, then restores the one before.
class BackendScope {
 public:
  BackendScope(DeviceType type, Backend& b) : type_(type), previous_(backend(type)) { register_backend(type, b); }
  ~BackendScope() { register_backend(type_, previous_); }

 private:
  DeviceType type_;
  Backend& previous_;
};

TEST(BackendRegistry, TheDeviceTypeChoosesTheBackEnd) {
  CountingBackend counting;
  BackendScope scope(kCUDA, counting);
  const Tensor a = full({3}, 2.0, kCUDA), b = full({3}, 0.5, kCUDA);
  const Tensor c = a * b;
  EXPECT_EQ(c.device(), Device(kCUDA));
  EXPECT_EQ(c.cpu().to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(counting.calls, 4);  // two fills, one multiply, one copy to the host
  EXPECT_ERROR_CONTAINS(a.exp(), "unary: not available on the counting back end");
  EXPECT_EQ(full({2}, 1.0).sum().item<float>(), 2.0f) << "the CPU's back end is untouched";
}

}  // namespace
}  // namespace ember
