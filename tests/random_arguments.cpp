// The random-arguments tests' driver (random_arguments.h): each named call many times with fresh
// draws, failing on anything but a return or an ember::Error. Shared by ember_tests and the MPI
// test program.
#include <iostream>
#include <typeinfo>

#include "random_arguments.h"

namespace ember {

void testing::expect_only_ember_errors(const Calls& calls, Device device) {
  const char* draws = std::getenv("EMBER_RANDOM_DRAWS");
  const int draws_per_op = draws != nullptr ? std::max(1, std::atoi(draws)) : 300;
  const char* first = std::getenv("EMBER_RANDOM_FIRST");  // to search past the draws already run
  const int first_draw = first != nullptr ? std::max(0, std::atoi(first)) : 0;
  const char* only = std::getenv("EMBER_RANDOM_ONLY");
  const bool verbose = std::getenv("EMBER_RANDOM_VERBOSE") != nullptr;
  for (const auto& [name, call] : calls) {
    if (only != nullptr && name != only) continue;
    int returned = 0;
    for (int i = first_draw; i < first_draw + draws_per_op; ++i) {
      const uint64_t seed = std::hash<std::string>()(name) ^ static_cast<uint64_t>(i);
      Draw draw(seed, device);
      manual_seed(seed);
      try {
        if (verbose) std::cerr << name << ", draw " << i << "\n";
        call(draw);
        ++returned;
      } catch (const Error&) {
        // the expected refusal
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ", draw " << i << " on " << device << ": threw " << typeid(e).name()
                      << " instead of ember::Error: " << e.what();
      }
    }
    if (verbose) std::cerr << name << ": " << returned << " of " << draws_per_op << " draws returned\n";
    // On CUDA a kernel's bad access surfaces asynchronously, as a sticky error of the context
    // that later calls report as ember::Errors: a synchronize after each op's draws must
    // therefore succeed, or the op is named as the one that broke the device.
    if (device.is_cuda()) {
      try {
        cuda::synchronize();
      } catch (const std::exception& e) {
        FAIL() << name << " on " << device << " left the device broken: " << e.what();
      }
    }
  }
}

}  // namespace ember
