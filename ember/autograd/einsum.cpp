// einsum: Einstein summation over one or more operands, composed of recorded ops (sum, permute,
// reshape, bmm), so its gradient comes with them.
//
// Note [einsum]
// ~~~~~~~~~~~~~
// "ij,jk->ik": each operand's dims are named by letters; letters missing from the output are
// summed over; without "->" the output is every letter that appears once, in alphabetical order
// (NumPy's and PyTorch's rule). The operands are contracted left to right, two at a time: a
// letter that neither the output nor a later operand needs is summed out of an operand as soon
// as only that operand has it; the letters two operands share are batch dims when still needed
// and contracted otherwise, so each pair is one bmm of [batch, rows, shared] x [batch, shared,
// cols]. (PyTorch may pick another order for three or more operands; the result is the same up
// to rounding.) Not supported yet (an ember::Error says so): "...", a letter repeated within one
// operand (a diagonal), and broadcasting a dim of size 1 against a larger one.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ember/autograd/functions.h"

namespace ember {
namespace {

// An operand with a letter per dim.
struct Labeled {
  Tensor t;
  std::string letters;
};

// t summed over its letters that `keep` lacks.
Labeled sum_out(Labeled x, const std::string& keep) {
  Shape dims;
  std::string left;
  for (size_t i = 0; i < x.letters.size(); ++i) {
    if (keep.find(x.letters[i]) == std::string::npos)
      dims.push_back(static_cast<int64_t>(i));
    else
      left += x.letters[i];
  }
  if (dims.empty()) return x;
  return {x.t.sum(dims), left};
}

// x's dims permuted into the order of `order` (which holds exactly x's letters).
Tensor arranged(const Labeled& x, const std::string& order) {
  Shape perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(x.letters.find(c)));
  return x.t.permute(perm);
}

int64_t product(const Labeled& x, const std::string& letters) {
  int64_t n = 1;
  for (char c : letters)
    EMBER_CHECK(!__builtin_mul_overflow(n, x.t.size(static_cast<int64_t>(x.letters.find(c))), &n), "einsum: the dims '",
                letters, "' of shape ", shape_str(x.t.sizes()), " multiply beyond int64");
  return n;
}

// a and b contracted over the letters they share that `keep` lacks; the shared letters in keep
// stay as batch dims. One bmm.
Labeled contract(const Labeled& a, const Labeled& b, const std::string& keep) {
  std::string batch, shared, rows, cols;
  for (char c : a.letters) {
    const bool in_b = b.letters.find(c) != std::string::npos, kept = keep.find(c) != std::string::npos;
    (in_b ? (kept ? batch : shared) : rows) += c;
  }
  for (char c : b.letters)
    if (a.letters.find(c) == std::string::npos) cols += c;
  const int64_t B = product(a, batch), M = product(a, rows), K = product(a, shared), N = product(b, cols);
  const Tensor lhs = arranged(a, batch + rows + shared).reshape({B, M, K});
  const Tensor rhs = arranged(b, batch + shared + cols).reshape({B, K, N});
  Shape out;
  for (char c : batch + rows) out.push_back(a.t.size(static_cast<int64_t>(a.letters.find(c))));
  for (char c : cols) out.push_back(b.t.size(static_cast<int64_t>(b.letters.find(c))));
  return {bmm(lhs, rhs).reshape(out), batch + rows + cols};
}

}  // namespace

Tensor einsum(const std::string& equation, const TensorList& operands) {
  const std::string eq = [&] {
    std::string s;
    for (char c : equation)
      if (c != ' ') s += c;
    return s;
  }();
  EMBER_CHECK(eq.find("...") == std::string::npos, "einsum: ellipsis ('...') is not supported yet, in '", equation,
              "'");
  const size_t arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : inputs) {
    if (c == ',') {
      terms.emplace_back();
      continue;
    }
    EMBER_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), "einsum: '", equation, "' has the character '",
                std::string(1, c), "'; operands are named by letters");
    terms.back() += c;
  }
  EMBER_CHECK(terms.size() == operands.size(), "einsum: '", equation, "' names ", terms.size(), " operand(s), but ",
              operands.size(), " were given");
  std::map<char, int64_t> count, size;
  std::vector<Labeled> xs;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = operands[i];
    EMBER_CHECK(t.defined(), "einsum: operand ", i, " is undefined");
    EMBER_CHECK(static_cast<int64_t>(terms[i].size()) == t.dim(), "einsum: '", terms[i], "' names ", terms[i].size(),
                " dims of operand ", i, ", which has shape ", shape_str(t.sizes()));
    for (size_t d = 0; d < terms[i].size(); ++d) {
      const char c = terms[i][d];
      EMBER_CHECK(terms[i].find(c) == d, "einsum: the letter '", std::string(1, c), "' repeats within operand ", i,
                  " ('", terms[i], "'), a diagonal, which is not supported yet");
      ++count[c];
      const auto [it, fresh] = size.emplace(c, t.size(static_cast<int64_t>(d)));
      EMBER_CHECK(fresh || it->second == t.size(static_cast<int64_t>(d)), "einsum: the letter '", std::string(1, c),
                  "' has size ", it->second, " in one operand and ", t.size(static_cast<int64_t>(d)), " in operand ", i,
                  " (shape ", shape_str(t.sizes()), ")");
    }
    xs.push_back({t, terms[i]});
  }
  std::string output;
  if (arrow == std::string::npos) {
    for (const auto& [c, n] : count)  // letters once each, in alphabetical order (uppercase first)
      if (n == 1) output += c;
  } else {
    output = eq.substr(arrow + 2);
    for (size_t d = 0; d < output.size(); ++d) {
      const char c = output[d];
      EMBER_CHECK(count.count(c) == 1, "einsum: the output letter '", std::string(1, c), "' of '", equation,
                  "' names no operand's dim");
      EMBER_CHECK(output.find(c) == d, "einsum: the output letter '", std::string(1, c), "' repeats in '", equation,
                  "'");
    }
  }
  // Left to right: what a later operand or the output needs is kept.
  auto needed_after = [&](size_t i) {
    std::string keep = output;
    for (size_t j = i + 1; j < xs.size(); ++j) keep += xs[j].letters;
    return keep;
  };
  Labeled acc = sum_out(xs[0], needed_after(0) + (xs.size() > 1 ? xs[1].letters : ""));
  for (size_t i = 1; i < xs.size(); ++i) {
    const std::string keep = needed_after(i);
    const Labeled next = sum_out(xs[i], keep + acc.letters);
    acc = contract(sum_out(acc, keep + next.letters), next, keep);
  }
  acc = sum_out(acc, output);
  return arranged(acc, output).contiguous();
}

}  // namespace ember
