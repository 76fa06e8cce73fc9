#include "ember/optim/lbfgs.h"

#include <cmath>
#include <sstream>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::optim {

std::map<std::string, double> LBFGSOptions::to_map() const {
  return {{"lr", lr_},
          {"max_iter", static_cast<double>(max_iter_)},
          {"max_eval", static_cast<double>(max_eval_.value_or(max_iter_ * 5 / 4))},
          {"tolerance_grad", tolerance_grad_},
          {"tolerance_change", tolerance_change_},
          {"history_size", static_cast<double>(history_size_)},
          {"strong_wolfe", line_search_fn_ ? 1.0 : 0.0}};
}

namespace {
// The counts' limit: doubles count exactly up to here (state_dict saves options as doubles), and
// max_iter * 5 / 4, max_eval's default, cannot overflow.
constexpr int64_t kMaxCount = int64_t{1} << 53;
}  // namespace

void LBFGSOptions::from_map(const std::map<std::string, double>& v) {
  lr_ = v.at("lr");
  constexpr int64_t kMax = kMaxCount;
  max_iter_ = whole_number(v.at("max_iter"), 1, kMax, "LBFGS: max_iter");
  max_eval_ = whole_number(v.at("max_eval"), 1, kMax, "LBFGS: max_eval");
  tolerance_grad_ = v.at("tolerance_grad");
  tolerance_change_ = v.at("tolerance_change");
  history_size_ = whole_number(v.at("history_size"), 1, kMax, "LBFGS: history_size");
  line_search_fn_ = v.at("strong_wolfe") != 0 ? std::optional<std::string>("strong_wolfe") : std::nullopt;
}

void LBFGSOptions::validate() const {
  EMBER_CHECK(lr_ > 0, "LBFGS: invalid lr ", lr_, " (must be > 0)");
  EMBER_CHECK(max_iter_ > 0 && max_iter_ <= kMaxCount, "LBFGS: invalid max_iter ", max_iter_,
              " (must be in [1, 2^53])");
  EMBER_CHECK(!max_eval_ || (*max_eval_ > 0 && *max_eval_ <= kMaxCount), "LBFGS: invalid max_eval ",
              max_eval_.value_or(0), " (must be in [1, 2^53])");
  EMBER_CHECK(history_size_ > 0 && history_size_ <= kMaxCount, "LBFGS: invalid history_size ", history_size_,
              " (must be in [1, 2^53])");
  EMBER_CHECK(tolerance_grad_ >= 0 && tolerance_change_ >= 0, "LBFGS: tolerances must be >= 0, got tolerance_grad ",
              tolerance_grad_, ", tolerance_change ", tolerance_change_);
  EMBER_CHECK(!line_search_fn_ || *line_search_fn_ == "strong_wolfe", "LBFGS: line_search_fn must be none or ",
              "'strong_wolfe', got '", line_search_fn_.value_or(""), "'");
}

LBFGS::LBFGS(std::vector<Tensor> params, const LBFGSOptions& options)
    : LBFGS(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

LBFGS::LBFGS(std::vector<ParamGroup> groups, const LBFGSOptions& options)
    : Optimizer("LBFGS", std::move(groups), options.clone()) {
  EMBER_CHECK(param_groups().size() == 1, "LBFGS: supports one parameter group only, got ", param_groups().size(),
              " (per-parameter options are not supported)");
  const auto& params = param_groups()[0].params();
  for (const auto& p : params)
    EMBER_CHECK(p.device() == params[0].device() && p.dtype() == params[0].dtype(),
                "LBFGS: all parameters must share one device and dtype, got ", params[0].dtype(), " on ",
                params[0].device(), " and ", p.dtype(), " on ", p.device());
}

double LBFGS::r(double v) const {
  const DType dt = param_groups()[0].params()[0].dtype();
  return dt == kFloat64 ? v : static_cast<double>(static_cast<float>(v));
}

double LBFGS::dot(const Tensor& a, const Tensor& b) const { return r((a * b).sum({}, false, kFloat64).item<double>()); }

Tensor LBFGS::gather_flat_grad() const {
  std::vector<Tensor> views;
  for (const auto& p : param_groups()[0].params())
    views.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                       : zeros({p.numel()}, TensorOptions(p.dtype()).device(p.device())));
  return cat(views, 0);
}

void LBFGS::add_to_params(double step_size, const Tensor& direction) {
  int64_t offset = 0;
  for (auto& p : param_groups()[0].params()) {
    const int64_t n = p.numel();
    p.add_(direction.narrow(0, offset, n).view(p.sizes()), step_size);
    offset += n;
  }
}

std::vector<Tensor> LBFGS::clone_params() const {
  std::vector<Tensor> out;
  for (const auto& p : param_groups()[0].params()) out.push_back(p.clone());
  return out;
}

void LBFGS::set_params(const std::vector<Tensor>& values) {
  auto& params = param_groups()[0].params();
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(values[i]);
}

std::pair<double, Tensor> LBFGS::directional_evaluate(const std::function<Tensor()>& closure,
                                                      const std::vector<Tensor>& x, double t, const Tensor& d) {
  add_to_params(t, d);
  double loss;
  {
    EnableGradGuard grad;
    loss = closure().item<double>();
  }
  Tensor flat_grad = gather_flat_grad();
  set_params(x);
  return {loss, flat_grad};
}

namespace {

// The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to the bounds
// (default: the interval between x1 and x2); the middle of the bounds when it has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::make_pair(x1, x2) : std::make_pair(x2, x1));
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_square);
  const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                  : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(min_pos, lo), hi);
}

struct LineSearchResult {
  double f;
  Tensor g;
  double t;
  int64_t evals;
};

// Finds t along d satisfying the strong Wolfe conditions (sufficient decrease c1,
// curvature c2): a bracketing phase that extrapolates with cubics, then a zoom phase.
template <class Evaluate, class Dot>
LineSearchResult strong_wolfe(const Evaluate& evaluate, const Dot& dot, double t, const Tensor& d, double f,
                              const Tensor& g_in, double gtd, double tolerance_change, double c1 = 1e-4,
                              double c2 = 0.9, int64_t max_ls = 25) {
  const double d_norm = d.abs().max().item<double>();
  const Tensor g = g_in.clone();
  auto [f_new, g_new] = evaluate(t);
  int64_t evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Tensor g_prev = g;
  bool done = false;
  int64_t ls_iter = 0;
  std::vector<double> bracket, bracket_f, bracket_gtd;
  std::vector<Tensor> bracket_g;
  auto set_bracket = [&](std::vector<double> b, std::vector<double> bf, std::vector<Tensor> bg,
                         std::vector<double> bgtd) {
    bracket = std::move(b);
    bracket_f = std::move(bf);
    bracket_g = std::move(bg);
    bracket_gtd = std::move(bgtd);
  };
  while (ls_iter < max_ls) {
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
      set_bracket({t_prev, t}, {f_prev, f_new}, {g_prev, g_new.clone()}, {gtd_prev, gtd_new});
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      set_bracket({t}, {f_new}, {g_new}, {gtd_new});
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      set_bracket({t_prev, t}, {f_prev, f_new}, {g_prev, g_new.clone()}, {gtd_prev, gtd_new});
      break;
    }
    const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10;
    const double tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::make_pair(min_step, max_step));
    t_prev = tmp;
    f_prev = f_new;
    g_prev = g_new.clone();
    gtd_prev = gtd_new;
    std::tie(f_new, g_new) = evaluate(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) set_bracket({0, t}, {f, f_new}, {g, g_new}, {gtd, gtd_new});

  // Zoom: shrink the bracket until the strong Wolfe conditions hold.
  bool insufficient_progress = false;
  size_t low = bracket_f.front() <= bracket_f.back() ? 0 : 1, high = 1 - low;
  while (!done && ls_iter < max_ls) {
    if (std::abs(bracket[1] - bracket[0]) * d_norm < tolerance_change) break;
    t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]);
    const double b_max = std::max(bracket[0], bracket[1]), b_min = std::min(bracket[0], bracket[1]);
    const double eps = 0.1 * (b_max - b_min);
    if (std::min(b_max - t, t - b_min) < eps) {
      // Too close to an end: move a tenth of the width inside, on the second time in a row
      // or when t is at or beyond an end.
      if (insufficient_progress || t >= b_max || t <= b_min) {
        t = std::abs(t - b_max) < std::abs(t - b_min) ? b_max - eps : b_min + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    std::tie(f_new, g_new) = evaluate(t);
    ++evals;
    gtd_new = dot(g_new, d);
    ++ls_iter;
    if (f_new > f + c1 * t * gtd || f_new >= bracket_f[low]) {
      bracket[high] = t;
      bracket_f[high] = f_new;
      bracket_g[high] = g_new.clone();
      bracket_gtd[high] = gtd_new;
      low = bracket_f[0] <= bracket_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (bracket[high] - bracket[low]) >= 0) {
        bracket[high] = bracket[low];
        bracket_f[high] = bracket_f[low];
        bracket_g[high] = bracket_g[low];
        bracket_gtd[high] = bracket_gtd[low];
      }
      bracket[low] = t;
      bracket_f[low] = f_new;
      bracket_g[low] = g_new.clone();
      bracket_gtd[low] = gtd_new;
    }
  }
  if (bracket.size() == 1) low = 0;
  return {bracket_f[low], bracket_g[low], bracket[low], evals};
}

}  // namespace

Tensor LBFGS::step(const std::function<Tensor()>& closure) {
  EMBER_CHECK(closure != nullptr, "LBFGS.step: needs a closure that reevaluates the model and returns the loss");
  const auto& o = static_cast<const LBFGSOptions&>(param_groups()[0].options());
  o.validate();  // (the group's options may have been edited since the constructor checked them)
  const double lr = o.lr(), tol_grad = o.tolerance_grad(), tol_change = o.tolerance_change();
  const int64_t max_iter = o.max_iter(), max_eval = o.max_eval().value_or(o.max_iter() * 5 / 4);
  NoGradGuard no_grad;

  Tensor orig_loss;
  {
    EnableGradGuard grad;
    orig_loss = closure();
  }
  EMBER_CHECK(orig_loss.defined() && orig_loss.numel() == 1, "LBFGS.step: the closure must return a one-element loss");
  double loss = orig_loss.item<double>();
  int64_t current_evals = 1;
  ++func_evals_;
  Tensor flat_grad = gather_flat_grad();
  if (flat_grad.abs().max().item<double>() <= tol_grad) return orig_loss;

  int64_t n_iter = 0;
  while (n_iter < max_iter) {
    ++n_iter;
    ++n_iter_;
    // The direction: steepest descent at first, then the two-loop recursion over the history.
    if (n_iter_ == 1) {
      d_ = flat_grad.neg();
      old_dirs_.clear();
      old_stps_.clear();
      ro_.clear();
      h_diag_ = 1;
    } else {
      const Tensor y = flat_grad - prev_flat_grad_;
      const Tensor s = d_ * t_;
      const double ys = dot(y, s);
      if (ys > 1e-10) {  // keep only pairs with positive curvature
        if (static_cast<int64_t>(old_dirs_.size()) == o.history_size()) {
          old_dirs_.pop_front();
          old_stps_.pop_front();
          ro_.pop_front();
        }
        old_dirs_.push_back(y);
        old_stps_.push_back(s);
        ro_.push_back(r(1.0 / ys));
        h_diag_ = r(ys / dot(y, y));
      }
      const size_t num_old = old_dirs_.size();
      std::vector<double> al(num_old);
      Tensor q = flat_grad.neg();
      for (size_t i = num_old; i-- > 0;) {
        al[i] = r(dot(old_stps_[i], q) * ro_[i]);
        q.add_(old_dirs_[i], -al[i]);
      }
      d_ = q * h_diag_;
      for (size_t i = 0; i < num_old; ++i) {
        const double be_i = r(dot(old_dirs_[i], d_) * ro_[i]);
        d_.add_(old_stps_[i], r(al[i] - be_i));
      }
    }
    prev_flat_grad_ = flat_grad.clone();
    prev_loss_ = loss;
    // The step length: a cautious first step, then lr.
    t_ = lr;
    if (n_iter_ == 1) {
      const double inv_l1 = r(1.0 / flat_grad.abs().sum().item<double>());
      if (inv_l1 < 1.0) t_ = r(inv_l1 * lr);
    }
    const double gtd = dot(flat_grad, d_);
    if (gtd > -tol_change) break;  // not a descent direction

    int64_t ls_evals = 0;
    bool opt_cond = false;
    if (o.line_search_fn()) {
      const std::vector<Tensor> x_init = clone_params();
      auto evaluate = [&](double t) { return directional_evaluate(closure, x_init, t, d_); };
      auto dot_fn = [&](const Tensor& a, const Tensor& b) { return dot(a, b); };
      LineSearchResult ls = strong_wolfe(evaluate, dot_fn, t_, d_, loss, flat_grad, gtd, tol_change);
      loss = ls.f;
      flat_grad = ls.g;
      t_ = ls.t;
      ls_evals = ls.evals;
      add_to_params(t_, d_);
      opt_cond = flat_grad.abs().max().item<double>() <= tol_grad;
    } else {
      add_to_params(t_, d_);
      if (n_iter != max_iter) {
        {
          EnableGradGuard grad;
          loss = closure().item<double>();
        }
        flat_grad = gather_flat_grad();
        opt_cond = flat_grad.abs().max().item<double>() <= tol_grad;
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    func_evals_ += ls_evals;

    if (n_iter == max_iter || current_evals >= max_eval || opt_cond) break;
    if ((d_ * t_).abs().max().item<double>() <= tol_change) break;  // the step became tiny
    if (std::abs(loss - prev_loss_) < tol_change) break;            // the loss stopped moving
  }
  return orig_loss;
}

void LBFGS::save_extra(OptimizerState& state) const {
  state.metadata["lbfgs.func_evals"] = std::to_string(func_evals_);
  state.metadata["lbfgs.n_iter"] = std::to_string(n_iter_);
  auto number = [](double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  state.metadata["lbfgs.t"] = number(t_);
  state.metadata["lbfgs.H_diag"] = number(h_diag_);
  state.metadata["lbfgs.prev_loss"] = number(prev_loss_);
  state.metadata["lbfgs.history"] = std::to_string(old_dirs_.size());
  if (d_.defined()) state.tensors.insert("lbfgs.d", d_);
  if (prev_flat_grad_.defined()) state.tensors.insert("lbfgs.prev_flat_grad", prev_flat_grad_);
  for (size_t i = 0; i < old_dirs_.size(); ++i) {
    state.tensors.insert("lbfgs.old_dirs." + std::to_string(i), old_dirs_[i]);
    state.tensors.insert("lbfgs.old_stps." + std::to_string(i), old_stps_[i]);
    state.metadata["lbfgs.ro." + std::to_string(i)] = number(ro_[i]);
  }
}

void LBFGS::load_extra(const OptimizerState& state) {
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = state.metadata.find(key);
    EMBER_CHECK(it != state.metadata.end(), "LBFGS.load_state_dict: the state has no '", key, "' entry");
    return it->second;
  };
  auto number = [&](const std::string& key) {
    try {
      return std::stod(get(key));
    } catch (const std::exception&) {
      throw Error("LBFGS.load_state_dict: '" + key + "' is not a number: '" + get(key) + "'");
    }
  };
  auto tensor = [&](const std::string& key) {
    const Tensor* t = state.tensors.find(key);
    EMBER_CHECK(t != nullptr, "LBFGS.load_state_dict: the state has no tensor '", key, "'");
    return t->clone();
  };
  const double history = number("lbfgs.history");
  EMBER_CHECK(history >= 0 && history <= 1e9, "LBFGS.load_state_dict: invalid history length ", history);
  std::deque<Tensor> dirs, stps;
  std::deque<double> ro;
  for (int64_t i = 0; i < static_cast<int64_t>(history); ++i) {
    dirs.push_back(tensor("lbfgs.old_dirs." + std::to_string(i)));
    stps.push_back(tensor("lbfgs.old_stps." + std::to_string(i)));
    ro.push_back(number("lbfgs.ro." + std::to_string(i)));
  }
  constexpr int64_t kMax = int64_t{1} << 53;
  const int64_t func_evals =
      whole_number(number("lbfgs.func_evals"), 0, kMax, "LBFGS.load_state_dict: lbfgs.func_evals");
  const int64_t n_iter = whole_number(number("lbfgs.n_iter"), 0, kMax, "LBFGS.load_state_dict: lbfgs.n_iter");
  const double t = number("lbfgs.t"), h_diag = number("lbfgs.H_diag"), prev_loss = number("lbfgs.prev_loss");
  // Everything read: only now does the optimizer change (a refused state leaves it as it was).
  func_evals_ = func_evals;
  n_iter_ = n_iter;
  t_ = t;
  h_diag_ = h_diag;
  prev_loss_ = prev_loss;
  d_ = state.tensors.contains("lbfgs.d") ? tensor("lbfgs.d") : Tensor();
  prev_flat_grad_ = state.tensors.contains("lbfgs.prev_flat_grad") ? tensor("lbfgs.prev_flat_grad") : Tensor();
  old_dirs_ = std::move(dirs);
  old_stps_ = std::move(stps);
  ro_ = std::move(ro);
}

}  // namespace ember::optim
