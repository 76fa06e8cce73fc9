#pragma once
// Pruning masks (torch.nn.utils.prune), technique 8's first half.
//
// Note [Pruning reparametrization]: pruning `weight` of a module moves the parameter to
// `weight_orig` (the same tensor: optimizers that hold it keep training it), adds a buffer
// `weight_mask` (1 keeps an entry, 0 removes it) and a forward pre-hook (prune::Hook) that sets the
// module's `weight` attribute to `weight_orig * weight_mask` before every call (Note [Tensor
// attributes]). Gradients therefore reach only the surviving entries of `weight_orig`, and
// state_dict() holds PyTorch's keys (`weight_orig`, `weight_mask`), so a pruned checkpoint loads on
// either side. Pruning the same tensor again composes, as PyTorch's PruningContainer does: the
// new method sees only what survives (the unpruned entries, or the live channels of a structured
// method), so an amount given as a fraction is a share of what remains. remove() makes the
// pruning permanent: `weight` is a parameter again, holding orig * mask.
//
//     prune::l1_unstructured(*fc, "weight", 0.5);        // half of fc's weights, smallest |w| first
//     prune::ln_structured(*conv, "weight", 0.25, 2, 0); // a quarter of the output channels, by L2 norm
//     prune::remove(*fc, "weight");
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.h"
#include "ember/nn/modules/linear.h"

namespace ember::nn::utils::prune {

// How much to prune: a count of entries (or channels), or a fraction in [0, 1] of them, rounded
// half to even as Python's round(): Amount(3) prunes 3, Amount(0.3) prunes round(0.3 n).
class Amount {
 public:
  Amount(int count) : Amount(static_cast<int64_t>(count)) {}  // NOLINT: prune(..., 3)
  Amount(int64_t count);                                      // NOLINT
  Amount(double fraction);                                    // NOLINT: prune(..., 0.3)
  int64_t of(int64_t n, const char* op) const;                // how many of n to prune (an error when more than n)
  std::string str() const;

 private:
  bool is_count_;
  int64_t count_ = 0;
  double fraction_ = 0;
};

enum class PruningType { Unstructured, Structured, Global };

// A pruning method (PyTorch's BasePruningMethod): computes a new mask for a tensor given the mask
// it has so far. A method is stateless once made; prune::apply adds it to the tensor's hook.
class Method {
 public:
  virtual ~Method() = default;
  virtual const char* name() const = 0;
  virtual PruningType type() const = 0;
  // `t`: the importance scores (by default the tensor itself), `default_mask`: the mask so far
  // (ones when not pruned yet), same shape. Returns the new mask, same shape and dtype as t.
  virtual Tensor compute_mask(const Tensor& t, const Tensor& default_mask) const = 0;
  // The channel dimension of a structured method (an error for the others).
  virtual int64_t dim() const;
};
using MethodPtr = std::shared_ptr<const Method>;

MethodPtr L1Unstructured(Amount amount);      // zero the `amount` entries of smallest |t|
MethodPtr RandomUnstructured(Amount amount);  // zero `amount` entries drawn at random
// Zero the `amount` channels along `dim` of smallest Lₙ norm (n: 1, 2, any p > 0, ±infinity).
MethodPtr LnStructured(Amount amount, double n, int64_t dim = -1);
MethodPtr RandomStructured(Amount amount, int64_t dim = -1);
MethodPtr CustomFromMask(Tensor mask);  // mask ∘ the mask so far
MethodPtr Identity();                   // leaves the mask as it is (pruning without pruning)

// The forward pre-hook of one pruned tensor: sets `tensor_name` to orig * mask before each call.
// `methods` is the PruningContainer: every method applied to this tensor, in order.
struct Hook {
  std::string tensor_name;
  std::vector<MethodPtr> methods;
  Tensor masked(Module& module) const;  // <name>_orig * <name>_mask
  std::optional<TensorList> operator()(Module& module, const TensorList& inputs) const;
};

// Prunes `name` of `module` with `method` (Note [Pruning reparametrization]). importance_scores,
// when given, rank the entries in place of the tensor itself (same shape).
void apply(Module& module, const std::string& name, const MethodPtr& method, const Tensor& importance_scores = {});

void l1_unstructured(Module& module, const std::string& name, Amount amount, const Tensor& importance_scores = {});
void random_unstructured(Module& module, const std::string& name, Amount amount);
void ln_structured(Module& module, const std::string& name, Amount amount, double n, int64_t dim,
                   const Tensor& importance_scores = {});
void random_structured(Module& module, const std::string& name, Amount amount, int64_t dim);
void custom_from_mask(Module& module, const std::string& name, const Tensor& mask);
void identity(Module& module, const std::string& name);

// One threshold over several tensors: `method` (unstructured: L1Unstructured, RandomUnstructured)
// sees them as one vector, so the amount counts over all of them together and each gets its share
// of the mask (through custom_from_mask). Already pruned tensors rank by their masked values.
struct Target {
  std::shared_ptr<Module> module;
  std::string name;
};
void global_unstructured(const std::vector<Target>& targets, const MethodPtr& method,
                         const std::vector<Tensor>& importance_scores = {});

// Makes the pruning of `name` permanent: `name` becomes a parameter holding orig * mask, and the
// `_orig` parameter, the `_mask` buffer and the hook go (an error when `name` is not pruned).
void remove(Module& module, const std::string& name);
// Whether any module in the tree has a pruned tensor.
bool is_pruned(Module& module);
// The pruning hook of `name` on `module`, or null.
const Hook* find_hook(Module& module, const std::string& name);

// How many entries are zero: per prunable tensor (the weights and biases of the tree's modules,
// as the forward sees them) and over all of them together.
struct SparsityRow {
  std::string name;  // dotted, as in state_dict ("0.weight")
  int64_t zeros = 0, total = 0;
  double fraction() const { return total == 0 ? 0.0 : static_cast<double>(zeros) / static_cast<double>(total); }
};
struct Sparsity {
  std::vector<SparsityRow> rows;
  SparsityRow global;  // name "global"
};
Sparsity sparsity(Module& module);
std::ostream& operator<<(std::ostream& os, const Sparsity& s);

// ---- pruning that saves compute (nn/prune_shrink.cpp) ----

// Physically removes dead output channels: in a Sequential, each Linear or Conv2d whose weight has
// rows (output channels) that are all zero loses them, and so does the next Linear or Conv2d's
// input, with the elementwise layers, BatchNorm, pooling and Flatten between the two followed (a
// dead channel's constant output, its bias through those layers, is folded into the next layer's
// bias). The result computes the same outputs with smaller dense layers. Pruned tensors are made
// permanent first (remove). Dropout counts as inference's identity. A pair it cannot follow
// exactly (another layer type between them, grouped convolutions, a padded convolution after a
// channel whose constant is not zero, a padded AvgPool2d) is left as it is and said in the report;
// the last layer's outputs are the model's and stay.
struct ShrinkReport {
  struct Pair {
    std::string producer, consumer;  // child names in the Sequential
    int64_t channels = 0, removed = 0;
    std::string skipped;  // why nothing was removed, or empty
  };
  std::vector<Pair> pairs;
  int64_t parameters_before = 0, parameters_after = 0;
};
ShrinkReport shrink(Module& sequential);
std::ostream& operator<<(std::ostream& os, const ShrinkReport& r);

// ---- unstructured sparsity as a sparse layer (nn/prune_sparse.cpp) ----

// A Linear whose weight is stored in CSR (crow int64 [out + 1], col int64 [nnz], values float32
// [nnz], bias float32 [out]): the forward costs only the stored weights. Inference only (it records
// nothing on the tape); float32 on the CPU.
class SparseLinearImpl : public Module {
 public:
  explicit SparseLinearImpl(const LinearImpl& linear);
  Tensor forward(const Tensor& x) override;
  double sparsity() const;  // the share of the weight's entries not stored
  void pretty_print(std::ostream& os) const override;
  int64_t in_features, out_features;
  Tensor crow, col, values, bias;
};
// The sparsity above which SparseLinear beats the dense Linear, measured with bench/quant_report's
// CSR rows on this project's machines (1024 -> 1024, batch 64: 0.82x at 70 % zeros, 1.1x at 80 %,
// 1.9x at 90 %, 3.9x at 99 %): sparsify's default.
constexpr double kSparseLinearCrossover = 0.8;
// Replaces every Linear below `model` whose weight (as its forward sees it) has at least
// `min_sparsity` zeros by a SparseLinear; pruned weights are made permanent first. Returns how many.
int sparsify(Module& model, double min_sparsity = kSparseLinearCrossover);

}  // namespace ember::nn::utils::prune
