#pragma once
// Timing helpers shared by the benchmark programs: warm-up, then the median of N runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace ember::bench {

template <class F>
double median_seconds(F&& f, int reps = 11, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Runs the functions in turn, round after round, and returns each one's median time.
// Interleaving makes a ratio between them robust to the machine's drift (shared hosts).
inline std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& fns, int rounds = 15) {
  std::vector<std::vector<double>> t(fns.size());
  for (int r = -1; r < rounds; ++r)  // round -1 warms up
    for (size_t k = 0; k < fns.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      fns[k]();
      if (r >= 0) t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

// One markdown table row: | name | ember | reference | ratio | target |
inline void row(const std::string& name, const std::string& ember, const std::string& ref, double ratio,
                const std::string& target) {
  std::printf("| %s | %s | %s | %.2f | %s |\n", name.c_str(), ember.c_str(), ref.c_str(), ratio, target.c_str());
  std::fflush(stdout);
}

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace ember::bench
