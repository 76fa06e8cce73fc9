#include "ember/io/model_parallel_state.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "ember/distributed/process_group.h"
#include "ember/tensor/generator.h"

namespace ember::io {

namespace {

using nlohmann::ordered_json;

constexpr int kModelTag = 1 << 14;  // above the pipeline's micro-batch tags (2 per micro-batch)
constexpr int kOptimizerTag = kModelTag + 1;

Device wire_device(const TrainingState& state) {
  if (state.group->backend_name() != "nccl") return Device(kCPU);
  const std::vector<Tensor> params = state.model->parameters();
  return params.empty() ? Device(kCPU) : params.front().device();
}

// A copy of `t` that the process group can carry, alive until the send completes.
Tensor on_wire(const Tensor& t, Device wire) { return t.detach().to(wire).contiguous(); }

// "state.<i>.<rest>" -> (i, rest); nullopt for other keys.
std::optional<std::pair<int64_t, std::string>> split_state_key(const std::string& key) {
  if (key.compare(0, 6, "state.") != 0) return std::nullopt;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos || dot == 6) return std::nullopt;
  int64_t index = 0;
  for (size_t i = 6; i < dot; ++i) {
    if (key[i] < '0' || key[i] > '9' || index > (int64_t{1} << 40)) return std::nullopt;
    index = index * 10 + (key[i] - '0');
  }
  return std::make_pair(index, key.substr(dot + 1));
}

std::string state_key(int64_t index, const std::string& rest) { return "state." + std::to_string(index) + "." + rest; }

// The options of each parameter group in an optimizer state's "param_groups".
std::vector<ordered_json> group_options(const optim::OptimizerState& state, const std::string& what) {
  const auto it = state.metadata.find("param_groups");
  EMBER_CHECK(it != state.metadata.end(), what, ": the optimizer state has no param_groups");
  ordered_json groups;
  try {
    groups = ordered_json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": the optimizer's param_groups is not valid JSON: " + e.what());
  }
  EMBER_CHECK(groups.is_array(), what, ": the optimizer's param_groups is not a list");
  std::vector<ordered_json> options;
  for (const auto& g : groups) {
    EMBER_CHECK(g.is_object() && g.contains("options") && g.contains("params") && g["params"].is_array(), what,
                ": a parameter group of the optimizer state is malformed");
    options.push_back(g["options"]);
  }
  return options;
}

// An optimizer's param_groups: group g's options and the next group_sizes[g] indices, counting
// from 0 over all groups (how Optimizer::state_dict numbers parameters).
std::string numbered_param_groups(const std::vector<ordered_json>& options, const std::vector<int64_t>& group_sizes) {
  ordered_json groups = ordered_json::array();
  int64_t next = 0;
  for (size_t g = 0; g < options.size(); ++g) {
    ordered_json group;
    group["options"] = options[g];
    group["params"] = ordered_json::array();
    for (int64_t i = 0; i < group_sizes[g]; ++i) group["params"].push_back(next++);
    groups.push_back(group);
  }
  return groups.dump();
}

// Only per-parameter state can be split by parameter: refuse anything else (LBFGS's history).
void check_only_parameter_state(const optim::OptimizerState& state, const std::string& what) {
  for (const auto& [key, value] : state.metadata)
    EMBER_CHECK(key == "optimizer" || key == "param_groups" || split_state_key(key), what, ": the optimizer keeps '",
                key, "', state beyond its parameters', which a model-parallel checkpoint cannot split by stage");
  for (const auto& item : state.tensors)
    EMBER_CHECK(split_state_key(item.key()), what, ": the optimizer keeps the tensor '", item.key(),
                "', state beyond its parameters', which a model-parallel checkpoint cannot split by stage");
}

// The entries' names, shapes and dtypes, which every rank's model must share.
int64_t model_fingerprint(const StateDict& entries) {
  distributed::Fingerprint f;
  for (const auto& item : entries) {
    for (char ch : item.key()) f.add(static_cast<unsigned char>(ch));
    for (int64_t d : item.value().sizes()) f.add(static_cast<uint64_t>(d));
    f.add(static_cast<uint64_t>(item.value().dtype()) + 0x100);
  }
  return f.value();
}

}  // namespace

void on_every_rank(const TrainingState& state, const std::string& what, const std::function<void()>& body) {
  distributed::ProcessGroup& group = *state.group;
  std::exception_ptr failure;
  try {
    body();
  } catch (...) {
    failure = std::current_exception();
  }
  Tensor failed = zeros({group.size()}, kInt64);  // 1 where a rank failed
  if (failure) failed.data_ptr<int64_t>()[group.rank()] = 1;
  Tensor agreed = failed.to(wire_device(state));
  group.all_reduce(agreed)->wait();
  if (failure) std::rethrow_exception(failure);
  const std::vector<int64_t> flags = agreed.to_vector<int64_t>();
  std::string ranks;
  for (size_t r = 0; r < flags.size(); ++r)
    if (flags[r] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  EMBER_CHECK(ranks.empty(), what, ": failed on rank ", ranks, " (its own error says why)");
}

ModelParallelLayout agree_layout(const TrainingState& state, const std::string& what) {
  distributed::ProcessGroup& group = *state.group;
  ModelParallelLayout layout;
  layout.wire = wire_device(state);
  std::vector<int64_t> group_of;               // per entry: optimizer group + 1, 0 if this rank steps it not
  std::unordered_set<const TensorImpl*> held;  // the stage's tensors
  on_every_rank(state, what, [&] {
    EMBER_CHECK(state.stage != nullptr, what, ": a TrainingState with a group needs the stage this rank trains");
    layout.entries = state.model->state_dict();
    std::unordered_map<const TensorImpl*, size_t> entry_of;  // a tensor's first entry
    for (size_t e = 0; e < layout.entries.size(); ++e)
      entry_of.emplace(layout.entries.items()[e].value().impl().get(), e);
    for (const auto& item : state.stage->state_dict()) {
      EMBER_CHECK(entry_of.count(item.value().impl().get()), what, ": the stage's tensor '", item.key(),
                  "' is not one of the model's");
      held.insert(item.value().impl().get());
    }
    group_of.assign(layout.entries.size(), 0);
    const auto& groups = state.optimizer->param_groups();
    for (size_t g = 0; g < groups.size(); ++g)
      for (const Tensor& p : groups[g].params()) {
        const auto it = entry_of.find(p.impl().get());
        EMBER_CHECK(it != entry_of.end() && held.count(p.impl().get()), what,
                    ": the optimizer steps a tensor of shape ", shape_str(p.sizes()), " that is not one of ",
                    it == entry_of.end() ? "the model's" : "this rank's stage's");
        group_of[it->second] = static_cast<int64_t>(g) + 1;
        layout.local_to_whole.push_back(static_cast<int64_t>(it->second));  // an entry for now
      }
  });
  const int64_t n = static_cast<int64_t>(layout.entries.size());
  const int64_t n_groups = static_cast<int64_t>(state.optimizer->param_groups().size());

  // Every rank the same model (names, shapes, dtypes) and as many groups, or the tables below
  // and the transfers after them would not line up.
  const int64_t fingerprint = model_fingerprint(layout.entries);
  const std::vector<distributed::Spread> spread =
      distributed::spread_over_ranks(group, {n, fingerprint, n_groups}, layout.wire);
  EMBER_CHECK(spread[0].same(), what, ": the ranks' models have between ", spread[0].min, " and ", spread[0].max,
              " tensors; every rank must build the whole model");
  EMBER_CHECK(spread[1].same(), what,
              ": the ranks' models differ in their tensors' names, shapes or dtypes; every rank must build the "
              "whole model");
  EMBER_CHECK(spread[2].same(), what, ": the ranks' optimizers have between ", spread[2].min, " and ", spread[2].max,
              " parameter groups; every rank's must have as many");

  // Per entry: how many stages hold it, the sum of their ranks, its optimizer group + 1.
  Tensor table = zeros({3, n}, kInt64);
  int64_t* cells = table.data_ptr<int64_t>();
  for (int64_t e = 0; e < n; ++e) {
    const bool mine = held.count(layout.entries.items()[e].value().impl().get()) != 0;
    cells[e] = mine ? 1 : 0;
    cells[n + e] = mine ? group.rank() : 0;
    cells[2 * n + e] = group_of[e];
  }
  Tensor agreed = table.to(layout.wire);
  group.all_reduce(agreed)->wait();
  const std::vector<int64_t> sums = agreed.to_vector<int64_t>();
  layout.owner.assign(n, -1);
  for (int64_t e = 0; e < n; ++e) {
    EMBER_CHECK(sums[e] <= 1, what, ": '", layout.entries.items()[e].key(), "' is in the stages of ", sums[e],
                " ranks; each tensor must belong to one stage");
    if (sums[e] == 1) layout.owner[e] = static_cast<int>(sums[n + e]);
  }
  // The one-process numbering: groups in order, each group's parameters in the model's order.
  layout.whole_index.assign(n, -1);
  layout.group_sizes.assign(n_groups, 0);
  int64_t next = 0;
  for (int64_t g = 1; g <= n_groups; ++g)
    for (int64_t e = 0; e < n; ++e)
      if (sums[2 * n + e] == g) {
        layout.whole_index[e] = next++;
        ++layout.group_sizes[g - 1];
      }
  for (int64_t& index : layout.local_to_whole) index = layout.whole_index[index];
  return layout;
}

GatheredState gather_state(const TrainingState& state, const ModelParallelLayout& layout) {
  distributed::ProcessGroup& group = *state.group;
  const int rank = group.rank();
  GatheredState out;
  std::vector<distributed::WorkPtr> works;
  std::vector<Tensor> in_flight;  // what the sends read, alive until they complete

  // The model: each entry from its owner (MPI keeps the order of one sender's messages).
  for (size_t e = 0; e < layout.entries.size(); ++e) {
    const Tensor& mine = layout.entries.items()[e].value();
    const int owner = layout.owner[e];
    if (rank == 0) {
      Tensor value = owner > 0 ? empty(mine.sizes(), TensorOptions(mine.dtype()).device(layout.wire))
                               : mine.detach().to(Device(kCPU)).contiguous();
      if (owner > 0) works.push_back(group.recv(value, owner, kModelTag));
      out.model.insert(layout.entries.items()[e].key(), value);
    } else if (owner == rank) {
      in_flight.push_back(on_wire(mine, layout.wire));
      works.push_back(group.send(in_flight.back(), 0, kModelTag));
    }
  }

  // The optimizer: each rank's state renumbered as the whole optimizer's, described in a JSON
  // piece (steps, tensor names, dtypes, shapes) sent before its tensors.
  optim::OptimizerState& mine = out.own;  // sent by the others, kept by rank 0
  std::string& problem = out.problem;     // reported on rank 0 by merge_optimizer_state
  try {
    const optim::OptimizerState local = state.optimizer->state_dict();
    check_only_parameter_state(local, "save_checkpoint");
    mine.metadata["optimizer"] = local.metadata.at("optimizer");
    group_options(local, "save_checkpoint");  // well formed: merge_optimizer_state reads its options
    mine.metadata["param_groups"] = local.metadata.at("param_groups");  // rank 0 numbers the whole's
    for (const auto& [key, value] : local.metadata)
      if (const auto split = split_state_key(key))
        mine.metadata[state_key(layout.local_to_whole.at(split->first), split->second)] = value;
    for (const auto& item : local.tensors) {
      const auto split = split_state_key(item.key());
      mine.tensors.insert(state_key(layout.local_to_whole.at(split->first), split->second), item.value());
    }
  } catch (const std::exception& e) {
    problem = e.what();
    mine = optim::OptimizerState();
  }
  if (rank != 0) {
    ordered_json piece;
    piece["problem"] = problem;
    piece["metadata"] = mine.metadata;
    piece["tensors"] = ordered_json::array();
    for (const auto& item : mine.tensors)
      piece["tensors"].push_back({item.key(), static_cast<int>(item.value().dtype()), item.value().sizes()});
    const std::string text = piece.dump();
    in_flight.push_back(tensor(std::vector<int64_t>{static_cast<int64_t>(text.size())}).to(layout.wire));
    works.push_back(group.send(in_flight.back(), 0, kOptimizerTag));
    Tensor bytes = empty({static_cast<int64_t>(text.size())}, kUInt8);
    std::copy(text.begin(), text.end(), bytes.data_ptr<uint8_t>());
    in_flight.push_back(bytes.to(layout.wire));
    works.push_back(group.send(in_flight.back(), 0, kOptimizerTag));
    for (const auto& item : mine.tensors) {
      in_flight.push_back(on_wire(item.value(), layout.wire));
      works.push_back(group.send(in_flight.back(), 0, kOptimizerTag));
    }
  } else {
    for (int r = 1; r < group.size(); ++r) {
      Tensor length = empty({1}, TensorOptions(kInt64).device(layout.wire));
      group.recv(length, r, kOptimizerTag)->wait();
      Tensor bytes = empty({length.to(Device(kCPU)).data_ptr<int64_t>()[0]}, TensorOptions(kUInt8).device(layout.wire));
      group.recv(bytes, r, kOptimizerTag)->wait();
      const Tensor host = bytes.to(Device(kCPU));
      const auto* text = host.data_ptr<uint8_t>();
      const ordered_json piece = ordered_json::parse(text, text + host.numel());  // ember's own bytes
      if (!piece["problem"].get<std::string>().empty() && problem.empty())
        problem = "rank " + std::to_string(r) + ": " + piece["problem"].get<std::string>();
      optim::OptimizerState theirs;
      theirs.metadata = piece["metadata"].get<std::map<std::string, std::string>>();
      for (const auto& t : piece["tensors"]) {
        Tensor value = empty(t[2].get<std::vector<int64_t>>(),
                             TensorOptions(static_cast<DType>(t[1].get<int>())).device(layout.wire));
        group.recv(value, r, kOptimizerTag)->wait();
        theirs.tensors.insert(t[0].get<std::string>(), value);
      }
      out.pieces.emplace_back(r, std::move(theirs));
    }
  }
  for (const auto& work : works) work->wait();

  // Every rank's generator, so that each resumes drawing where it stopped (dropout masks).
  std::vector<Tensor> generators;
  for (int r = 0; r < group.size(); ++r) generators.push_back(empty({2}, TensorOptions(kInt64).device(layout.wire)));
  const Tensor own = tensor(std::vector<int64_t>{static_cast<int64_t>(default_generator().seed()),
                                                 static_cast<int64_t>(default_generator().offset())})
                         .to(layout.wire);
  group.all_gather(generators, own)->wait();
  for (const Tensor& g : generators) {
    const std::vector<int64_t> v = g.to_vector<int64_t>();
    out.generators.emplace_back(static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1]));
  }

  return out;
}

optim::OptimizerState merge_optimizer_state(GatheredState& gathered, const ModelParallelLayout& layout) {
  EMBER_CHECK(gathered.problem.empty(), "save_checkpoint: ", gathered.problem);
  optim::OptimizerState whole = std::move(gathered.own);
  const std::vector<ordered_json> options = group_options(whole, "save_checkpoint");
  for (auto& [r, theirs] : gathered.pieces) {
    EMBER_CHECK(theirs.metadata["optimizer"] == whole.metadata["optimizer"], "save_checkpoint: rank ", r,
                "'s optimizer is a ", theirs.metadata["optimizer"], ", rank 0's a ", whole.metadata["optimizer"]);
    EMBER_CHECK(group_options(theirs, "save_checkpoint") == options, "save_checkpoint: rank ", r,
                "'s parameter groups have other options than rank 0's (", theirs.metadata["param_groups"], " vs ",
                whole.metadata["param_groups"], ")");
    for (const auto& [key, value] : theirs.metadata)
      if (split_state_key(key)) whole.metadata[key] = value;
    for (const auto& item : theirs.tensors) whole.tensors.insert(item.key(), item.value());
  }
  whole.metadata["param_groups"] = numbered_param_groups(options, layout.group_sizes);
  return whole;
}

optim::OptimizerState stage_optimizer_state(const optim::OptimizerState& whole, const ModelParallelLayout& layout,
                                            const TrainingState& state, const std::string& path) {
  const std::string what = "load_checkpoint: '" + path + "'";
  check_only_parameter_state(whole, what);
  const std::vector<ordered_json> options = group_options(whole, what);
  const auto& groups = state.optimizer->param_groups();
  EMBER_CHECK(options.size() == groups.size(), what, " holds an optimizer with ", options.size(),
              " parameter groups; this run's have ", groups.size());
  const ordered_json saved = ordered_json::parse(whole.metadata.at("param_groups"));
  for (size_t g = 0; g < groups.size(); ++g)
    EMBER_CHECK(static_cast<int64_t>(saved[g]["params"].size()) == layout.group_sizes[g], what,
                " holds an optimizer whose parameter group ", g, " has ", saved[g]["params"].size(),
                " parameters; this run's stages step ", layout.group_sizes[g], " in it");
  // Whole index -> this rank's position, for the entries this rank steps.
  std::unordered_map<int64_t, int64_t> local_of;
  for (size_t l = 0; l < layout.local_to_whole.size(); ++l)
    local_of.emplace(layout.local_to_whole[l], static_cast<int64_t>(l));
  optim::OptimizerState part;
  const auto type = whole.metadata.find("optimizer");
  EMBER_CHECK(type != whole.metadata.end(), what, " holds no optimizer type");
  part.metadata["optimizer"] = type->second;
  std::vector<int64_t> local_sizes;
  for (const auto& g : groups) local_sizes.push_back(static_cast<int64_t>(g.params().size()));
  part.metadata["param_groups"] = numbered_param_groups(options, local_sizes);
  for (const auto& [key, value] : whole.metadata)
    if (const auto split = split_state_key(key)) {
      const auto local = local_of.find(split->first);
      if (local != local_of.end()) part.metadata[state_key(local->second, split->second)] = value;
    }
  for (const auto& item : whole.tensors) {
    const auto split = split_state_key(item.key());
    const auto local = local_of.find(split->first);
    if (local != local_of.end()) part.tensors.insert(state_key(local->second, split->second), item.value());
  }
  return part;
}

}  // namespace ember::io
