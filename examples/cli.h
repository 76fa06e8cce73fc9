#pragma once
// Checks for the example programs' numeric options, with short messages. CLI11's own
// PositiveNumber lets NaN and infinity through and prints the range of a double (300 digits)
// when it fails; these refuse NaN, infinities and values outside the option's range, and name
// the range as a person would write it:
//     app.add_option("--lr", lr, "...")->check(examples::cli::positive());
//     app.add_option("--workers", workers, "...")->check(examples::cli::count(0, 256));
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ember::examples::cli {

namespace detail {

inline std::string shortest(double v) {
  if (v >= 18446744073709551615.0) return "2^64 - 1";  // a seed's range
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", v);
  return text;
}

// A finite number in [lo, hi] (lo excluded when open_lo); otherwise what is wrong with it.
inline std::string check_number(const std::string& text, double lo, double hi, bool open_lo, bool integer) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const std::string range = integer ? "an integer in [" + shortest(lo) + ", " + shortest(hi) + "]"
                                    : std::string("a finite number ") + (open_lo ? "> " : ">= ") + shortest(lo) +
                                          (std::isinf(hi) ? "" : " and <= " + shortest(hi));
  const std::string wrong = "must be " + range + ", got '" + text + "'";
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || errno == ERANGE) return wrong;
  if (integer && v != std::floor(v)) return wrong;
  if (v < lo || (open_lo && v == lo) || v > hi) return wrong;
  return "";
}

}  // namespace detail

// A finite number > lo (default 0) and <= hi.
inline CLI::Validator positive(double hi = INFINITY) {
  return CLI::Validator([hi](std::string& s) { return detail::check_number(s, 0, hi, true, false); }, "POSITIVE");
}
// A finite number in [lo, hi].
inline CLI::Validator range(double lo, double hi) {
  return CLI::Validator([lo, hi](std::string& s) { return detail::check_number(s, lo, hi, false, false); },
                        "[" + detail::shortest(lo) + ", " + detail::shortest(hi) + "]");
}
// An integer in [lo, hi]: counts and sizes, bounded so that a typo is a message, not an
// allocation of petabytes.
inline CLI::Validator count(double lo, double hi) {
  return CLI::Validator([lo, hi](std::string& s) { return detail::check_number(s, lo, hi, false, true); },
                        "INT in [" + detail::shortest(lo) + ", " + detail::shortest(hi) + "]");
}

// The trainers' checkpoint options, one wording for all (Note [Training checkpoints]);
// `steps` names what --save-every counts ("steps", "optimizer steps").
inline void add_checkpoint_options(CLI::App& app, std::string& save, int64_t& save_every, std::string& resume,
                                   const std::string& steps) {
  app.add_option("--save", save,
                 "write the training state here after each epoch: one checkpoint file (model, optimizer, loss "
                 "scaler, schedule, loader position, random state), replaced atomically");
  app.add_option("--save-every", save_every, "also save every this many " + steps + ", mid-epoch (0: never)")
      ->check(count(0, 1e12));
  app.add_option("--resume", resume,
                 "continue from this checkpoint exactly where it was saved (same flags as the run that saved it)");
}

}  // namespace ember::examples::cli
