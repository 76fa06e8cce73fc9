#pragma once
// Errors. Note [Throw, never abort]: ember lives inside other programs, so every
// user mistake becomes an ember::Error whose message names the op and the shapes,
// dtypes or devices involved. Broken internal invariants use EMBER_ASSERT, which
// throws an InternalError (a bug in ember, not in the caller).
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

// "[2, 3]" as PyTorch prints shapes in its messages.
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace ember

// EMBER_CHECK(cond, "op: ", details...) throws ember::Error with the concatenated message.
#define EMBER_CHECK(cond, ...)                                               \
  do {                                                                       \
    if (!(cond)) throw ::ember::Error(::ember::detail::concat(__VA_ARGS__)); \
  } while (0)

#define EMBER_ASSERT(cond, ...)                                                                               \
  do {                                                                                                        \
    if (!(cond))                                                                                              \
      throw ::ember::InternalError(::ember::detail::concat("internal error (please report): ", #cond, " at ", \
                                                           __FILE__, ":", __LINE__, " ", ##__VA_ARGS__));     \
  } while (0)
