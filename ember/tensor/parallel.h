#pragma once
// Intra-op parallelism: OpenMP over an index range, with a grain size below which work
// stays on the calling thread (threads cost ~µs to wake; small tensors are faster serial).
// Inside an already parallel region (a data-loader worker, a nested kernel) it runs serial,
// so the two levels never oversubscribe the cores.
#include <algorithm>
#include <atomic>
#include <cstdint>

#ifdef EMBER_WITH_OPENMP
#include <omp.h>
#endif

namespace ember {

// Elements per thread below which elementwise kernels stay serial. Measured with
// bench/cpu_report (the grain table in BENCHMARKS.md): waking a second OpenMP thread costs
// ~5 µs here, so two threads only win on a float add from ~100K elements; with this grain a
// tensor goes parallel from 2 * 65536 elements.
constexpr int64_t kGrainSize = 65536;

namespace detail {
inline std::atomic<int64_t> parallel_region_count{0};
}
// Parallel regions opened by parallel_for since the start: what a test reads to see that tiny
// work stayed on the calling thread.
inline int64_t parallel_regions() { return detail::parallel_region_count.load(std::memory_order_relaxed); }

// f(begin, end) over [begin, end), split into at most one contiguous chunk per thread.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
#ifdef EMBER_WITH_OPENMP
  const int64_t max_threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t g = std::max<int64_t>(grain, 1);
  const int threads = static_cast<int>(std::min<int64_t>(max_threads, (n + g - 1) / g));
  if (threads > 1) {
    detail::parallel_region_count.fetch_add(1, std::memory_order_relaxed);
#pragma omp parallel num_threads(threads)
    {
      const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t chunk = (n + nt - 1) / nt;
      const int64_t b = begin + tid * chunk, e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  (void)grain;  // unused without OpenMP
  f(begin, end);
}

// Number of threads parallel_for may use from here (1 inside a parallel region).
inline int parallel_threads() {
#ifdef EMBER_WITH_OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace ember
