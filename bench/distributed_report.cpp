// Data parallel on this machine, under mpirun (results from rank 0):
//   mpirun -np 2 --oversubscribe build/bench/bench/distributed_report    (and -np 3)
// 1. all_reduce over MPI by message size: algorithm and bus bandwidth (NCCL-tests' definition:
//    busbw = algbw · 2(n−1)/n, what each link carries in a ring), against the same MPI called
//    directly in the same run (blocking MPI_Allreduce, and MPI_Iallreduce + MPI_Wait, which is
//    what a Work handle is) and this machine's single-thread memcpy bandwidth (the ceiling of a
//    shared-memory transport).
// 2. DDP's overlap: one training step of an MLP with 24 MiB of gradients, without DDP, with DDP
//    and small buckets (all-reduces start during backward), with DDP and one bucket (it starts
//    when backward is over: nothing hidden), and the all-reduce of 24 MiB alone. The hidden
//    share is how much of the exposed communication the buckets remove.
// 3. Pipeline stages (one per rank) of an MLP 8 x 1024, batch 1024 in 8 micro-batches: step time
//    and each stage's peak memory above its weights (activations and the gradients made) under
//    GPipe and 1F1B, beside the unsplit
//    model on one rank.
#include <mpi.h>

#include <cstring>

#include <ember/ember.h>

#include "timing.h"

using namespace ember;

namespace {

std::shared_ptr<distributed::ProcessGroup> pg;

double memcpy_gbs() {
  const size_t bytes = 64 << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  const double s = bench::median_seconds([&] { std::memcpy(b.data(), a.data(), bytes); }, 9);
  return 2.0 * bytes / s / 1e9;  // read + write
}

// Seconds per all-reduce of `t` by MPI itself: blocking, or nonblocking then waited for.
double raw_mpi_seconds(const Tensor& t, bool blocking, int iters) {
  return bench::median_seconds(
             [&] {
               for (int i = 0; i < iters; ++i) {
                 if (blocking) {
                   MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
                 } else {
                   MPI_Request r;
                   MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD, &r);
                   MPI_Wait(&r, MPI_STATUS_IGNORE);
                 }
               }
             },
             5, 1) /
         iters;
}

void all_reduce_rows(double ceiling) {
  if (pg->rank() == 0) {
    std::printf(
        "| all_reduce, %d ranks | ember time | ember busbw | MPI_Iallreduce + MPI_Wait | MPI_Allreduce (blocking) | "
        "ember busbw / memcpy |\n|---|---|---|---|---|---|\n",
        pg->size());
  }
  for (int64_t bytes : {int64_t(4) << 10, int64_t(64) << 10, int64_t(1) << 20, int64_t(4) << 20, int64_t(16) << 20,
                        int64_t(64) << 20}) {
    const int64_t n = bytes / 4;
    Tensor t = full({n}, 1.0, kFloat32);
    pg->all_reduce(t)->wait();
    EMBER_CHECK(t.view({-1}).narrow(0, n - 1, 1).item<float>() == pg->size(), "all_reduce result is wrong");
    const int iters = bytes >= (16 << 20) ? 5 : 50;
    pg->barrier()->wait();
    const double s = bench::median_seconds(
                         [&] {
                           for (int i = 0; i < iters; ++i) pg->all_reduce(t)->wait();
                         },
                         5, 1) /
                     iters;
    pg->barrier()->wait();
    const double nonblocking = raw_mpi_seconds(t, false, iters);
    pg->barrier()->wait();
    const double blocking = raw_mpi_seconds(t, true, iters);
    const double bus = 2.0 * (pg->size() - 1) / pg->size();  // busbw = algbw * bus
    auto busbw = [&](double seconds) { return bytes / seconds / 1e9 * bus; };
    if (pg->rank() == 0)
      std::printf("| %s | %.1f us | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.2f |\n",
                  bytes >= (1 << 20) ? bench::fmt("%.0f MiB", bytes / double(1 << 20)).c_str()
                                     : bench::fmt("%.0f KiB", bytes / 1024.0).c_str(),
                  s * 1e6, busbw(s), busbw(nonblocking), busbw(blocking), busbw(s) / ceiling);
  }
}

void overlap_rows() {
  const int64_t width = 1024, layers = 6, batch = 32;
  auto make = [&] {
    manual_seed(1);
    nn::Sequential net;
    for (int64_t i = 0; i < layers; ++i) {
      net->push_back(nn::Linear(width, width));
      net->push_back(nn::ReLU());
    }
    return net;
  };
  manual_seed(2 + pg->rank());
  const Tensor x = randn({batch, width}), y = randn({batch, width});
  nn::Sequential plain = make(), a = make(), b = make();
  nn::DistributedDataParallel small_buckets(a, pg, nn::DistributedDataParallelOptions().bucket_cap_mb(4));
  nn::DistributedDataParallel one_bucket(
      b, pg, nn::DistributedDataParallelOptions().bucket_cap_mb(1e6).first_bucket_cap_mb(1e6));
  int64_t grad_bytes = 0;
  for (const Tensor& p : plain->parameters()) grad_bytes += p.numel() * 4;
  Tensor flat = zeros({grad_bytes / 4});
  auto step = [&](auto& model) {
    model->zero_grad();
    nn::functional::mse_loss(model(x), y).backward();
  };
  const auto t = bench::interleaved_medians({[&] { step(plain); }, [&] { step(small_buckets); },
                                             [&] { step(one_bucket); }, [&] { pg->all_reduce(flat)->wait(); }},
                                            11);
  const auto stats = small_buckets->last_backward_stats();
  if (pg->rank() != 0) return;
  const double exposed_one = t[2] - t[0], exposed_small = t[1] - t[0];
  std::printf("\n| DDP step, MLP 6x1024, batch %lld per rank, %.0f MiB of gradients, %d ranks | time | vs no DDP |\n",
              static_cast<long long>(batch), grad_bytes / double(1 << 20), pg->size());
  std::printf("|---|---|---|\n");
  std::printf("| forward + backward, no DDP | %.2f ms | 1.00 |\n", t[0] * 1e3);
  std::printf("| DDP, %zu buckets of <= 4 MiB (%lld started during backward) | %.2f ms | %.2f |\n",
              small_buckets->bucket_indices().size(), static_cast<long long>(stats.launched_during_backward),
              t[1] * 1e3, t[1] / t[0]);
  std::printf("| DDP, one bucket (started after backward) | %.2f ms | %.2f |\n", t[2] * 1e3, t[2] / t[0]);
  std::printf("| all_reduce of %.0f MiB alone | %.2f ms | - |\n", grad_bytes / double(1 << 20), t[3] * 1e3);
  std::printf("\nexposed communication: %.2f ms with one bucket, %.2f ms with buckets: %.0f %% of it hidden\n",
              exposed_one * 1e3, exposed_small * 1e3, 100.0 * (exposed_one - exposed_small) / exposed_one);
}

void pipeline_rows() {
  const int64_t width = 1024, batch = 1024, chunks = 8;
  auto make = [&] {
    manual_seed(5);
    nn::Sequential net;
    for (int i = 0; i < 8; ++i) {
      net->push_back(nn::Linear(width, width));
      net->push_back(nn::ReLU());
    }
    return net;
  };
  manual_seed(6);
  const Tensor x = randn({batch, width}), y = randn({batch, width});
  auto loss_fn = [](const Tensor& out, const Tensor& t) { return nn::functional::mse_loss(out, t); };
  if (pg->rank() == 0)
    std::printf(
        "\n| pipeline, MLP 8x1024, batch %lld in %lld micro-batches | step | peak of a step above the weights "
        "(activations and gradients), per stage |\n"
        "|---|---|---|\n",
        static_cast<long long>(batch), static_cast<long long>(chunks));
  {  // the unsplit model on rank 0 alone, the others idle
    nn::Sequential whole = make();
    double seconds = 0;
    int64_t peak = 0;
    if (pg->rank() == 0) {
      auto step = [&] {
        whole->zero_grad();
        loss_fn(whole(x), y).backward();
      };
      step();
      whole->zero_grad();  // the gradients are freed: the peak counts activations and new gradients
      const int64_t base = memory::stats().current_bytes;
      memory::reset_peak();
      step();
      peak = memory::stats().peak_bytes - base;
      seconds = bench::median_seconds(step, 5, 1);
      std::printf("| whole model, 1 rank | %.1f ms | %.1f MiB |\n", seconds * 1e3, peak / double(1 << 20));
    }
    pg->barrier()->wait();
  }
  for (const char* schedule : {"gpipe", "1f1b"}) {
    nn::Sequential model = make();
    nn::Pipeline pipe(model, pg, nn::PipelineOptions().chunks(chunks).schedule(schedule));
    auto step = [&] {
      pipe.stage()->zero_grad();
      pipe.train_step(x, y, loss_fn);
    };
    step();
    pipe.stage()->zero_grad();
    const int64_t base = memory::stats().current_bytes;
    memory::reset_peak();
    step();
    Tensor peaks = zeros({pg->size()}, kInt64);
    peaks.data_ptr<int64_t>()[pg->rank()] = memory::stats().peak_bytes - base;
    pg->all_reduce(peaks)->wait();
    pg->barrier()->wait();
    const double seconds = bench::median_seconds(step, 5, 1);
    if (pg->rank() != 0) continue;
    std::string per_stage;
    for (int r = 0; r < pg->size(); ++r)
      per_stage += (r ? ", " : "") + bench::fmt("%.1f MiB", peaks.data_ptr<int64_t>()[r] / double(1 << 20));
    std::printf("| %s, %d stages | %.1f ms | %s |\n", schedule, pg->size(), seconds * 1e3, per_stage.c_str());
  }
}

}  // namespace

int main() {
  try {
    pg = distributed::init_process_group("mpi");
    set_num_threads(1);  // one core per rank
    const double ceiling = memcpy_gbs();
    pg->barrier()->wait();
    if (pg->rank() == 0)
      std::printf("distributed_report: %d MPI ranks, 1 thread each; memcpy %.2f GB/s (rank 0, 64 MiB)\n\n", pg->size(),
                  ceiling);
    all_reduce_rows(ceiling);
    overlap_rows();
    pg->barrier()->wait();
    pipeline_rows();
    pg->barrier()->wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
