// Printing like PyTorch: tensor([[ 1.0000, -2.5000], ...], dtype=float64). One format for
// all elements (fixed with 4 decimals, integer-valued "1.", or scientific when the range
// is wide), right-aligned, with "..." summaries past 1000 elements.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ember/tensor/ops.h"

namespace ember {
namespace {

constexpr int64_t kThreshold = 1000, kEdgeItems = 3, kLineWidth = 80;

struct Formatter {
  enum Mode { Int, Bool, FloatInt, Fixed, Sci } mode = Fixed;
  int width = 1;

  // An element as a Scalar, so that integers print exactly (int64's beyond 2^53 are not doubles).
  std::string format(const Scalar& x) const {
    if (mode == Bool) return x.to_bool() ? "True" : "False";
    if (mode == Int) return std::to_string(x.to_int64());
    const double v = x.to_double();
    if (!std::isfinite(v)) return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
    static const char* const formats[] = {"", "", "%.0f.", "%.4f", "%.4e"};  // by Mode
    char buf[64];
    std::snprintf(buf, sizeof buf, formats[mode], v);
    return buf;
  }
  std::string padded(const Scalar& v) const {
    std::string s = format(v);
    return std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(s.size()))), ' ') + s;
  }
};

// Indices of one dim to show: all, or the first and last kEdgeItems when summarizing.
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (!summarize || n <= 2 * kEdgeItems) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, bool summarize, std::vector<Scalar>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  for (int64_t i : shown(t.size(0), summarize))
    if (i >= 0) collect(native::select(t, 0, i), summarize, out);
}

Formatter make_formatter(const Tensor& t, const std::vector<Scalar>& values) {
  Formatter f;
  if (t.dtype() == kBool)
    f.mode = Formatter::Bool;
  else if (!t.is_floating_point())
    f.mode = Formatter::Int;
  else {
    bool all_int = true;
    double mx = 0, mn = INFINITY;
    for (const Scalar& x : values) {
      const double v = x.to_double();
      if (!std::isfinite(v)) continue;
      all_int &= std::nearbyint(v) == v;
      if (v != 0) {
        mx = std::max(mx, std::fabs(v));
        mn = std::min(mn, std::fabs(v));
      }
    }
    const bool have = mx > 0;
    if (all_int)
      f.mode = have && mx > 1e8 ? Formatter::Sci : Formatter::FloatInt;
    else
      f.mode = have && (mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4) ? Formatter::Sci : Formatter::Fixed;
  }
  for (const Scalar& v : values) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

void print_rec(std::ostream& os, const Tensor& t, const Formatter& f, bool summarize, int indent) {
  if (t.dim() == 0) {
    os << f.format(t.item());
    return;
  }
  os << "[";
  const auto idx = shown(t.size(0), summarize);
  if (t.dim() == 1) {
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / (f.width + 2));
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        os << ",";
        if (static_cast<int64_t>(k) % per_line == 0)
          os << "\n" << std::string(static_cast<size_t>(indent + 1), ' ');
        else
          os << " ";
      }
      if (idx[k] < 0)
        os << " ...";  // PyTorch's marker in a row of numbers
      else
        os << f.padded(native::select(t, 0, idx[k]).item());
    }
  } else {
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0)
        os << "," << std::string(static_cast<size_t>(t.dim() - 1), '\n')
           << std::string(static_cast<size_t>(indent + 1), ' ');
      if (idx[k] < 0)
        os << "...";
      else
        print_rec(os, native::select(t, 0, idx[k]), f, summarize, indent + 1);
    }
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t_in) {
  if (!t_in.defined()) return os << "[ undefined Tensor ]";
  const Tensor t = native::to(t_in, Device(kCPU), t_in.dtype(), false, false);  // native: printing records nothing
  os << "tensor(";
  std::vector<std::string> suffix;
  if (t.numel() == 0 && t.dim() != 1) {
    os << "[]";
    std::ostringstream s;
    s << "size=(";
    for (int64_t i = 0; i < t.dim(); ++i) s << (i ? ", " : "") << t.size(i);
    s << (t.dim() == 1 ? ",)" : ")");
    suffix.push_back(s.str());
  } else {
    const bool summarize = t.numel() > kThreshold;
    std::vector<Scalar> values;
    collect(t, summarize, values);
    print_rec(os, t, make_formatter(t, values), summarize, 7);
  }
  if (t_in.is_cuda()) suffix.push_back("device='" + t_in.device().str() + "'");
  if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool)
    suffix.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  for (const auto& s : suffix) os << ", " << s;
  return os << ")";
}

std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace ember
