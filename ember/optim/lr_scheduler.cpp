#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace ember::optim {

namespace {

constexpr double kPi = 3.14159265358979323846;
// Epochs and counts live in [-1, 2^53]: state_dict's doubles hold them exactly up to there, and
// the schedules' integer arithmetic (last_epoch - 1 - T_max, 2 T_max) cannot overflow.
constexpr int64_t kMaxCount = int64_t{1} << 53;

void check_next_epoch(int64_t last_epoch, const char* op) {
  EMBER_CHECK(last_epoch < kMaxCount, op, ": cannot step past epoch 2^53 (", kMaxCount,
              "), the most a scheduler's state counts exactly");
}

int64_t count_at_or_below(const std::vector<int64_t>& sorted, int64_t value) {  // Python's bisect_right
  return std::upper_bound(sorted.begin(), sorted.end(), value) - sorted.begin();
}

}  // namespace

// ---- base ----

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& g : optimizer_.param_groups()) {
    if (!g.initial_lr) g.initial_lr = g.options().get_lr();
    base_lrs_.push_back(*g.initial_lr);
  }
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  EMBER_ASSERT(lrs.size() == groups.size(), "one lr per group");
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lrs[i]);
  last_lr_ = lrs;
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  check_next_epoch(last_epoch_, "LRScheduler.step");
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step(int64_t epoch) {
  EMBER_CHECK(epoch >= -1 && epoch <= kMaxCount, "LRScheduler.step: epoch must be in [-1, 2^53], got ", epoch);
  ++step_count_;
  last_epoch_ = epoch;
  auto closed = closed_form_lr();
  apply(closed ? *closed : get_lr());
}

std::map<std::string, double> LRScheduler::state_dict() const {
  std::map<std::string, double> out{{"last_epoch", static_cast<double>(last_epoch_)},
                                    {"step_count", static_cast<double>(step_count_)}};
  for (size_t i = 0; i < base_lrs_.size(); ++i) out["base_lr." + std::to_string(i)] = base_lrs_[i];
  for (size_t i = 0; i < last_lr_.size(); ++i) out["last_lr." + std::to_string(i)] = last_lr_[i];
  return out;
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& state) {
  auto get = [&](const std::string& key) {
    auto it = state.find(key);
    EMBER_CHECK(it != state.end(), "LRScheduler.load_state_dict: the state has no '", key, "' entry");
    return it->second;
  };
  const int64_t last_epoch = whole_number(get("last_epoch"), -1, kMaxCount, "LRScheduler.load_state_dict: last_epoch");
  const int64_t step_count = whole_number(get("step_count"), 0, kMaxCount, "LRScheduler.load_state_dict: step_count");
  std::vector<double> base, last;
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    base.push_back(get("base_lr." + std::to_string(i)));
    last.push_back(get("last_lr." + std::to_string(i)));
    EMBER_CHECK(std::isfinite(base.back()) && std::isfinite(last.back()),
                "LRScheduler.load_state_dict: the learning rates of group ", i, " are not finite (base ", base.back(),
                ", last ", last.back(), ")");
  }
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- StepLR, MultiStepLR, ExponentialLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, "StepLR: step_size must be > 0, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  auto lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (auto& lr : lrs) lr *= gamma_;
  return lrs;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return out;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  auto lrs = group_lrs();
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return lrs;
  for (auto& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(hits));
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_)
    out.push_back(b * std::pow(gamma_, static_cast<double>(count_at_or_below(milestones_, last_epoch_))));
  return out;
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  auto lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (auto& lr : lrs) lr *= gamma_;
  return lrs;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return out;
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  EMBER_CHECK(t_max > 0 && t_max <= kMaxCount, "CosineAnnealingLR: T_max must be in [1, 2^53], got ", t_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  auto lrs = group_lrs();
  const double e = static_cast<double>(last_epoch_), t = static_cast<double>(t_max_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) return *closed_form_lr();
  for (size_t i = 0; i < lrs.size(); ++i) {
    if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)  // the bottom of the wave: climb back
      lrs[i] += (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / t)) / 2;
    else
      lrs[i] = (1 + std::cos(kPi * e / t)) / (1 + std::cos(kPi * (e - 1) / t)) * (lrs[i] - eta_min_) + eta_min_;
  }
  return lrs;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_)
    out.push_back(eta_min_ + (b - eta_min_) *
                                 (1 + std::cos(kPi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) /
                                 2);
  return out;
}

// ---- LinearLR ----

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  EMBER_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ", start_factor);
  EMBER_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ", end_factor);
  EMBER_CHECK(total_iters > 0, "LinearLR: total_iters must be > 0, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  auto lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (auto& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  const double factor =
      1.0 + delta / (static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(last_epoch_ - 1) * delta);
  for (auto& lr : lrs) lr *= factor;
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  std::vector<double> out;
  const double done = static_cast<double>(std::min(total_iters_, last_epoch_)) / static_cast<double>(total_iters_);
  for (double b : base_lrs_) out.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * done));
  return out;
}

// ---- OneCycleLR ----

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& o) : LRScheduler(optimizer), options_(o) {
  EMBER_CHECK(o.total_steps_ > 0, "OneCycleLR: total_steps must be > 0, got ", o.total_steps_);
  EMBER_CHECK(o.pct_start_ >= 0 && o.pct_start_ <= 1, "OneCycleLR: pct_start must be in [0, 1], got ", o.pct_start_);
  EMBER_CHECK(o.anneal_strategy_ == "cos" || o.anneal_strategy_ == "linear",
              "OneCycleLR: anneal_strategy must be 'cos' or 'linear', got '", o.anneal_strategy_, "'");
  EMBER_CHECK(o.max_lr_ > 0 && o.div_factor_ > 0 && o.final_div_factor_ > 0,
              "OneCycleLR: max_lr, div_factor and final_div_factor must be > 0");
  EMBER_CHECK(!o.cycle_momentum_ || optimizer.defaults().get_momentum().has_value(),
              "OneCycleLR: ", optimizer.type_name(), " has no momentum to cycle (use cycle_momentum(false))");
  const double total = static_cast<double>(o.total_steps_), pct = o.pct_start_;
  enum { kInitial = 0, kMax = 1, kMin = 2, kMaxMomentum = 3, kBaseMomentum = 4 };
  if (o.three_phase_)
    phases_ = {{pct * total - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
               {2 * pct * total - 2, kMax, kInitial, kBaseMomentum, kMaxMomentum},
               {total - 1, kInitial, kMin, kMaxMomentum, kMaxMomentum}};
  else
    phases_ = {{pct * total - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
               {total - 1, kMax, kMin, kBaseMomentum, kMaxMomentum}};
  base_lrs_.clear();
  for (auto& g : optimizer_.param_groups()) {
    const double initial = o.max_lr_ / o.div_factor_;
    values_.push_back({initial, o.max_lr_, initial / o.final_div_factor_, o.max_momentum_, o.base_momentum_});
    g.initial_lr = initial;
    base_lrs_.push_back(initial);
    if (o.cycle_momentum_) g.options().set_momentum(o.max_momentum_);
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() {
  const double step = static_cast<double>(last_epoch_);
  EMBER_CHECK(last_epoch_ <= options_.total_steps_, "OneCycleLR: tried to step ", last_epoch_ + 1,
              " times; the specified number of total steps is ", options_.total_steps_);
  auto anneal = [&](double start, double end, double pct) {
    if (options_.anneal_strategy_ == "linear") return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
  };
  std::vector<double> lrs;
  auto& groups = optimizer_.param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& v = values_[gi];
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (step <= p.end_step || i == phases_.size() - 1) {
        const double pct = (step - start_step) / (p.end_step - start_step);
        lr = anneal(v[p.start_lr], v[p.end_lr], pct);
        momentum = anneal(v[p.start_momentum], v[p.end_momentum], pct);
        break;
      }
      start_step = p.end_step;
    }
    lrs.push_back(lr);
    if (options_.cycle_momentum_) groups[gi].options().set_momentum(momentum);
  }
  return lrs;
}

// ---- SequentialLR ----

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  EMBER_CHECK(!schedulers_.empty(), "SequentialLR: needs at least one scheduler");
  EMBER_CHECK(milestones_.size() == schedulers_.size() - 1, "SequentialLR: expects one milestone fewer than ",
              "schedulers, got ", schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  EMBER_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), "SequentialLR: milestones must be sorted");
  for (size_t i = 0; i < schedulers_.size(); ++i)
    EMBER_CHECK(schedulers_[i] != nullptr && &schedulers_[i]->optimizer_ == &optimizer, "SequentialLR: scheduler ", i,
                " is null or belongs to another optimizer");
  // Back to the start: the first scheduler takes step 0 again from the initial lrs.
  last_epoch_ = 0;
  for (auto& g : optimizer_.param_groups()) g.options().set_lr(*g.initial_lr);
  for (auto& s : schedulers_) --s->last_epoch_;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  check_next_epoch(last_epoch_, "SequentialLR.step");
  ++last_epoch_;
  const int64_t idx = count_at_or_below(milestones_, last_epoch_);
  auto& s = schedulers_[static_cast<size_t>(idx)];
  if (idx > 0 && milestones_[static_cast<size_t>(idx - 1)] == last_epoch_)
    s->step(0);
  else
    s->step();
  last_lr_ = s->get_last_lr();
}

std::map<std::string, double> SequentialLR::state_dict() const {
  auto out = LRScheduler::state_dict();
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (const auto& [k, v] : schedulers_[i]->state_dict()) out["scheduler." + std::to_string(i) + "." + k] = v;
  return out;
}

void SequentialLR::load_state_dict(const std::map<std::string, double>& state) {
  LRScheduler::load_state_dict(state);
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const std::string prefix = "scheduler." + std::to_string(i) + ".";
    std::map<std::string, double> sub;
    for (const auto& [k, v] : state)
      if (k.compare(0, prefix.size(), prefix) == 0) sub[k.substr(prefix.size())] = v;
    schedulers_[i]->load_state_dict(sub);
  }
}

}  // namespace ember::optim
