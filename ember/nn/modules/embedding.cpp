#include "ember/nn/modules/embedding.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ember/autograd/custom_function.h"
#include "ember/autograd/grad_mode.h"
#include "ember/nn/init.h"

namespace ember::nn {

namespace {

TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }

void check_table(const Tensor& weight, const char* op) {
  EMBER_CHECK(weight.defined() && weight.dim() == 2 && is_floating(weight.dtype()), op,
              ": expects a floating weight [num_embeddings, embedding_dim], got ",
              weight.defined() ? std::string(dtype_name(weight.dtype())) + " " + shape_str(weight.sizes())
                               : std::string("an undefined tensor"));
}

void check_indices(const Tensor& indices, const char* op) {
  EMBER_CHECK(indices.defined() && (indices.dtype() == kInt64 || indices.dtype() == kInt32), op,
              ": expects int64 or int32 indices, got ",
              indices.defined() ? dtype_name(indices.dtype()) : "an undefined tensor");
}

// A padding_idx in [-num_embeddings, num_embeddings), as a row number.
std::optional<int64_t> padding_row(std::optional<int64_t> padding_idx, int64_t rows, const char* op) {
  if (!padding_idx) return std::nullopt;
  const int64_t p = *padding_idx;
  EMBER_CHECK(p >= -rows && p < rows, op, ": padding_idx ", p, " is out of range for ", rows, " embeddings");
  return p < 0 ? p + rows : p;
}

// PyTorch's embedding_renorm_ (Note [Embedding options]): the referenced rows whose norm exceeds
// max_norm scaled to max_norm / (norm + 1e-7) of themselves, in place, unrecorded. A row named
// twice is written twice with the same values.
void renorm_rows(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type, const char* op) {
  EMBER_CHECK(max_norm >= 0, op, ": max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  const Tensor idx = indices.reshape({-1}).to(kInt64);
  if (idx.numel() == 0) return;
  const Tensor rows = weight.index_select(0, idx);
  const Tensor norms = rows.norm(norm_type, 1, /*keepdim=*/true);
  const Tensor scale = where(norms > max_norm, max_norm / (norms + 1e-7), ones_like(norms));
  Tensor table = weight;  // (a handle: the write lands in the caller's weight)
  table.index_put_({idx}, rows * scale);
}

// The lookup whose gradient is divided, row by row, by how often each index occurs in `indices`.
struct FrequencyScaledLookup : autograd::Function<FrequencyScaledLookup> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& weight, const Tensor& indices) {
    ctx->save_for_backward({indices});
    ctx->saved_data["rows"] = weight.size(0);
    return ::ember::embedding(weight, indices);
  }
  static autograd::tensor_list backward(autograd::AutogradContext* ctx, autograd::tensor_list grads) {
    const Tensor idx = ctx->get_saved_variables()[0].reshape({-1}).to(kInt64);
    const int64_t rows = ctx->saved_data["rows"].toInt(), n = idx.numel();
    const Tensor g = grads[0].reshape({n, -1});
    const Tensor counts = zeros({rows}, like(g)).scatter_add(0, idx, ones({n}, like(g)));
    const Tensor scaled = g / counts.index_select(0, idx).unsqueeze(1);
    const Tensor where_to = idx.unsqueeze(1).expand({n, g.size(1)}).contiguous();
    return {zeros({rows, g.size(1)}, like(g)).scatter_add(0, where_to, scaled), Tensor()};
  }
};

// weight[indices] with the gradient rules of Note [Embedding options]: none for the padding row,
// divided by frequency when asked.
Tensor lookup(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding, bool scale_grad_by_freq) {
  Tensor out = scale_grad_by_freq ? FrequencyScaledLookup::apply(weight, indices) : ::ember::embedding(weight, indices);
  if (!padding) return out;
  // The padding row's value is looked up as usual, but no gradient flows back to it.
  const Tensor is_pad = (indices == *padding).unsqueeze(-1);
  return where(is_pad, ::ember::embedding(weight.detach(), indices), out);
}

// Bag b of a flattened input: entries [begin[b], begin[b + 1]).
std::vector<int64_t> bag_bounds(const Tensor& offsets, int64_t entries, bool include_last_offset, const char* op) {
  check_indices(offsets, op);
  EMBER_CHECK(offsets.dim() == 1, op, ": offsets must be 1-D, got ", shape_str(offsets.sizes()));
  std::vector<int64_t> bounds = offsets.to(kInt64).cpu().contiguous().to_vector<int64_t>();
  if (include_last_offset)
    EMBER_CHECK(!bounds.empty(), op, ": include_last_offset needs at least one offset (the end)");
  else
    bounds.push_back(entries);
  EMBER_CHECK(bounds.size() == 1 || bounds.front() == 0, op, ": offsets[0] has to be 0, got ", bounds.front());
  for (size_t b = 0; b + 1 < bounds.size(); ++b)
    EMBER_CHECK(bounds[b] <= bounds[b + 1] && bounds[b + 1] <= entries, op,
                ": offsets must be non-decreasing and at most ", entries, " (the number of indices), got ", bounds[b],
                " then ", bounds[b + 1]);
  return bounds;
}

}  // namespace

// ---- functional ----

namespace functional {

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& o) {
  const char* op = "embedding";
  check_table(weight, op);
  check_indices(input, op);
  EMBER_CHECK(!o.sparse(), op, ": sparse gradients are not in ember (sparse=true)");
  const std::optional<int64_t> padding = padding_row(o.padding_idx(), weight.size(0), op);
  if (o.max_norm()) renorm_rows(weight, input, *o.max_norm(), o.norm_type(), op);
  return lookup(weight, input, padding, o.scale_grad_by_freq());
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagFuncOptions& o) {
  const char* op = "embedding_bag";
  check_table(weight, op);
  check_indices(input, op);
  const std::string& mode = o.mode();
  EMBER_CHECK(mode == "sum" || mode == "mean" || mode == "max", op,
              ": mode must be \"sum\", \"mean\" or \"max\", got \"", mode, "\"");
  EMBER_CHECK(!o.sparse(), op, ": sparse gradients are not in ember (sparse=true)");
  EMBER_CHECK(input.dim() == 1 || input.dim() == 2, op,
              ": input must be 1-D (with offsets) or 2-D (one bag per row), got ", shape_str(input.sizes()));
  const Tensor& psw = o.per_sample_weights();
  if (psw.defined()) {
    EMBER_CHECK(mode == "sum", op, ": per_sample_weights are only supported for mode \"sum\", got \"", mode, "\"");
    EMBER_CHECK(psw.sizes() == input.sizes() && psw.dtype() == weight.dtype(), op, ": per_sample_weights must be ",
                dtype_name(weight.dtype()), " ", shape_str(input.sizes()),
                " (the input's shape, the weight's dtype), got ", dtype_name(psw.dtype()), " ", shape_str(psw.sizes()));
  }
  const std::optional<int64_t> padding = padding_row(o.padding_idx(), weight.size(0), op);
  if (o.max_norm()) renorm_rows(weight, input, *o.max_norm(), o.norm_type(), op);

  const Tensor flat = input.reshape({-1});
  const int64_t entries = flat.numel(), dim = weight.size(1);
  std::vector<int64_t> bounds;
  if (input.dim() == 2) {  // one bag per row, as PyTorch's offsets = arange(0, numel, row length)
    EMBER_CHECK(!o.offsets().defined(), op, ": offsets must be undefined when the input is 2-D");
    const int64_t rows = input.size(0), length = input.size(1);
    for (int64_t b = 0; b < rows; ++b) bounds.push_back(b * length);
    if (!o.include_last_offset()) bounds.push_back(entries);
  } else {
    EMBER_CHECK(o.offsets().defined(), op, ": a 1-D input needs offsets (where each bag starts)");
    bounds = bag_bounds(o.offsets(), entries, o.include_last_offset(), op);
  }
  const int64_t bags = std::max<int64_t>(0, static_cast<int64_t>(bounds.size()) - 1);

  // The members that count: inside a bag and not the padding row.
  const std::vector<int64_t> ids = flat.to(kInt64).cpu().contiguous().to_vector<int64_t>();
  std::vector<int64_t> member, bag_of, size(static_cast<size_t>(bags), 0);
  for (int64_t b = 0; b < bags; ++b)
    for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i)
      if (!padding || ids[i] != *padding) {
        member.push_back(i);
        bag_of.push_back(b);
        ++size[b];
      }
  const auto n = static_cast<int64_t>(member.size());
  const Device device = weight.device();
  const Tensor member_t = tensor<int64_t>(member).to(device);
  const Tensor rows = lookup(weight, flat.index_select(0, member_t), std::nullopt, o.scale_grad_by_freq());  // [n, D]

  if (mode == "max") {
    const int64_t longest = bags == 0 ? 0 : *std::max_element(size.begin(), size.end());
    if (longest == 0) return zeros({bags, dim}, like(weight));
    // Each bag's rows in a [bags, longest, D] block, short bags filled with a row of -inf.
    std::vector<int64_t> slot(static_cast<size_t>(bags * longest), n), next(static_cast<size_t>(bags), 0);
    for (int64_t k = 0; k < n; ++k) slot[bag_of[k] * longest + next[bag_of[k]]++] = k;
    const Tensor padded = cat({rows, full({1, dim}, -std::numeric_limits<double>::infinity(), like(weight))});
    const Tensor block = padded.index_select(0, tensor<int64_t>(slot).to(device)).view({bags, longest, dim});
    const Tensor best = std::get<0>(block.max(1));
    const Tensor empty_bag = (tensor<int64_t>(size).to(device) == 0).unsqueeze(1);
    return where(empty_bag, zeros({1, dim}, like(weight)), best);
  }
  Tensor contributions = rows;
  if (psw.defined()) contributions = rows * psw.reshape({-1}).index_select(0, member_t).unsqueeze(1);
  const Tensor where_to = tensor<int64_t>(bag_of).to(device).unsqueeze(1).expand({n, dim}).contiguous();
  Tensor out = zeros({bags, dim}, like(weight)).scatter_add(0, where_to, contributions);
  if (mode == "mean") {
    std::vector<double> count(size.begin(), size.end());
    for (double& c : count) c = std::max(c, 1.0);  // an empty bag: 0 / 1
    out = out / tensor<double>(count).to(device, weight.dtype()).unsqueeze(1);
  }
  return out;
}

}  // namespace functional

// ---- modules ----

namespace {
// The weight a table starts from: `given` (shared, as PyTorch's _weight) or fresh N(0, 1) rows.
Tensor starting_weight(const Tensor& given, int64_t rows, int64_t dim, const char* op) {
  if (!given.defined()) return empty({rows, dim});
  EMBER_CHECK(given.dim() == 2 && given.size(0) == rows && given.size(1) == dim && is_floating(given.dtype()), op,
              ": _weight must be a floating [", rows, ", ", dim, "], got ", dtype_name(given.dtype()), " ",
              shape_str(given.sizes()));
  return given.detach();
}

// N(0, 1) rows, the padding row zero: both tables' reset_parameters.
void reset_table(Tensor& weight, const std::optional<int64_t>& padding) {
  init::normal_(weight);
  if (padding) {
    NoGradGuard no_grad;
    weight.select(0, *padding).zero_();
  }
}

void print_table_options(std::ostream& os, const std::optional<double>& max_norm, double norm_type,
                         bool scale_grad_by_freq) {
  if (max_norm) os << ", max_norm=" << *max_norm;
  if (norm_type != 2.0) os << ", norm_type=" << norm_type;
  if (scale_grad_by_freq) os << ", scale_grad_by_freq=True";
}
}  // namespace

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
    : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : Module("Embedding"), options(o) {
  EMBER_CHECK(o.num_embeddings_ > 0 && o.embedding_dim_ > 0,
              "Embedding: sizes must be > 0, got num_embeddings=", o.num_embeddings_,
              ", embedding_dim=", o.embedding_dim_);
  EMBER_CHECK(!o.sparse_, "Embedding: sparse gradients are not in ember (sparse=true)");
  options.padding_idx_ = padding_row(o.padding_idx_, o.num_embeddings_, "Embedding");
  weight = register_parameter("weight", starting_weight(o._weight_, o.num_embeddings_, o.embedding_dim_, "Embedding"));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (!o._weight_.defined()) reset_parameters();
}

void EmbeddingImpl::reset_parameters() { reset_table(weight, options.padding_idx_); }

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  return functional::embedding(indices, weight,
                               functional::EmbeddingFuncOptions()
                                   .padding_idx(options.padding_idx_)
                                   .max_norm(options.max_norm_)
                                   .norm_type(options.norm_type_)
                                   .scale_grad_by_freq(options.scale_grad_by_freq_));
}

void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(" << options.num_embeddings_ << ", " << options.embedding_dim_;
  if (options.padding_idx_) os << ", padding_idx=" << *options.padding_idx_;
  print_table_options(os, options.max_norm_, options.norm_type_, options.scale_grad_by_freq_);
  os << ")";
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& o) {
  EMBER_CHECK(embeddings.defined() && embeddings.dim() == 2, "Embedding::from_pretrained: embeddings must be 2-D, got ",
              embeddings.defined() ? shape_str(embeddings.sizes()) : "an undefined tensor");
  Embedding table(EmbeddingOptions(embeddings.size(0), embeddings.size(1))
                      ._weight(embeddings)
                      .padding_idx(o.padding_idx())
                      .max_norm(o.max_norm())
                      .norm_type(o.norm_type())
                      .scale_grad_by_freq(o.scale_grad_by_freq())
                      .sparse(o.sparse()));
  table->weight.requires_grad_(!o.freeze());
  return table;
}

EmbeddingBagImpl::EmbeddingBagImpl(int64_t num_embeddings, int64_t embedding_dim)
    : EmbeddingBagImpl(EmbeddingBagOptions(num_embeddings, embedding_dim)) {}

EmbeddingBagImpl::EmbeddingBagImpl(const EmbeddingBagOptions& o) : Module("EmbeddingBag"), options(o) {
  EMBER_CHECK(o.num_embeddings_ > 0 && o.embedding_dim_ > 0,
              "EmbeddingBag: sizes must be > 0, got num_embeddings=", o.num_embeddings_,
              ", embedding_dim=", o.embedding_dim_);
  EMBER_CHECK(o.mode_ == "sum" || o.mode_ == "mean" || o.mode_ == "max",
              "EmbeddingBag: mode must be \"sum\", \"mean\" or \"max\", got \"", o.mode_, "\"");
  EMBER_CHECK(!o.sparse_, "EmbeddingBag: sparse gradients are not in ember (sparse=true)");
  options.padding_idx_ = padding_row(o.padding_idx_, o.num_embeddings_, "EmbeddingBag");
  weight =
      register_parameter("weight", starting_weight(o._weight_, o.num_embeddings_, o.embedding_dim_, "EmbeddingBag"));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (!o._weight_.defined()) reset_parameters();
}

void EmbeddingBagImpl::reset_parameters() { reset_table(weight, options.padding_idx_); }

Tensor EmbeddingBagImpl::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  return functional::embedding_bag(input, weight,
                                   functional::EmbeddingBagFuncOptions()
                                       .offsets(offsets)
                                       .max_norm(options.max_norm_)
                                       .norm_type(options.norm_type_)
                                       .scale_grad_by_freq(options.scale_grad_by_freq_)
                                       .mode(options.mode_)
                                       .per_sample_weights(per_sample_weights)
                                       .include_last_offset(options.include_last_offset_)
                                       .padding_idx(options.padding_idx_));
}

void EmbeddingBagImpl::pretty_print(std::ostream& os) const {
  os << "EmbeddingBag(" << options.num_embeddings_ << ", " << options.embedding_dim_;
  print_table_options(os, options.max_norm_, options.norm_type_, options.scale_grad_by_freq_);
  os << ", mode='" << options.mode_ << "'";
  if (options.include_last_offset_) os << ", include_last_offset=True";
  if (options.padding_idx_) os << ", padding_idx=" << *options.padding_idx_;
  os << ")";
}

EmbeddingBag EmbeddingBag::from_pretrained(const Tensor& embeddings, const EmbeddingBagFromPretrainedOptions& o) {
  EMBER_CHECK(embeddings.defined() && embeddings.dim() == 2,
              "EmbeddingBag::from_pretrained: embeddings must be 2-D, got ",
              embeddings.defined() ? shape_str(embeddings.sizes()) : "an undefined tensor");
  EmbeddingBag table(EmbeddingBagOptions(embeddings.size(0), embeddings.size(1))
                         ._weight(embeddings)
                         .max_norm(o.max_norm())
                         .norm_type(o.norm_type())
                         .scale_grad_by_freq(o.scale_grad_by_freq())
                         .mode(o.mode())
                         .sparse(o.sparse())
                         .include_last_offset(o.include_last_offset())
                         .padding_idx(o.padding_idx()));
  table->weight.requires_grad_(!o.freeze());
  return table;
}

}  // namespace ember::nn
