// The profiler (Note [Profiler]): what it records for ops, nested ops, backward nodes and user
// ranges, the totals of key_averages (calls counted exactly, self time inside total), the Chrome
// trace as JSON, memory samples, thread locality, and that nothing is recorded without a guard.
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

using profiler::Event;

const Event* find(const profiler::Profile& p, const std::string& name, Event::Kind kind = Event::Kind::Op) {
  for (const Event& e : p.events())
    if (e.name == name && e.kind == kind) return &e;
  return nullptr;
}

int64_t count(const profiler::Profile& p, const std::string& name) {
  int64_t n = 0;
  for (const Event& e : p.events()) n += e.name == name;
  return n;
}

TEST(Profiler, RecordsOpsWithShapesNestingRangesAndBackward) {
  manual_seed(0);
  nn::Linear fc(3, 4);
  const Tensor x = randn({2, 3});
  profiler::Profile profile;
  {
    profiler::ProfilerGuard guard(profile);
    profiler::RecordFunction step("train_step");
    const Tensor y = x.matmul(fc->weight.t());  // matmul [2, 3] x [3, 4]
    (fc(x) + y).sum().backward();
  }
  const Event* mm = find(profile, "matmul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->shapes, (std::vector<Shape>{{2, 3}, {3, 4}}));
  EXPECT_EQ(mm->dtype, kFloat32);
  EXPECT_EQ(mm->depth, 1) << "inside the range";
  EXPECT_GE(mm->end_ns, mm->start_ns);
  EXPECT_GE(mm->bytes_after, 0);
  const Event* range = find(profile, "train_step", Event::Kind::Range);
  ASSERT_NE(range, nullptr);
  EXPECT_EQ(range->depth, 0);
  for (const Event& e : profile.events()) {
    EXPECT_GE(e.start_ns, range->start_ns) << e.name;
    EXPECT_LE(e.end_ns, range->end_ns) << e.name;
  }
  EXPECT_NE(find(profile, "linear"), nullptr);
  EXPECT_NE(find(profile, "sum"), nullptr);
  EXPECT_NE(find(profile, "SumBackward", Event::Kind::Backward), nullptr);
  EXPECT_NE(find(profile, "AccumulateGrad", Event::Kind::Backward), nullptr);
  // An op inside another is one level deeper: matmul's differentiable form calls mm.
  bool nested = false;
  for (size_t i = 0; i + 1 < profile.events().size(); ++i)
    if (profile.events()[i].name == "matmul" && profile.events()[i + 1].name == "mm")
      nested = profile.events()[i + 1].depth == profile.events()[i].depth + 1;
  EXPECT_TRUE(nested);
}

TEST(Profiler, KeyAveragesCountEveryCallAndSelfTimeFitsInTotal) {
  profiler::Profile profile;
  Tensor a = ones({8, 8});
  {
    profiler::ProfilerGuard guard(profile);
    for (int i = 0; i < 7; ++i) a = a.add(ones({8, 8}));
    (void)a.exp();
  }
  const auto stats = profile.key_averages();
  auto of = [&](const std::string& name) {
    for (const auto& s : stats)
      if (s.name == name) return s;
    return profiler::EventStats{};
  };
  EXPECT_EQ(of("add").calls, 7);
  EXPECT_EQ(of("exp").calls, 1);
  EXPECT_EQ(of("add").calls, count(profile, "add"));
  for (const auto& s : stats) {
    EXPECT_LE(s.self_ns, s.total_ns) << s.name;
    EXPECT_GE(s.self_ns, 0) << s.name;
  }
  for (size_t i = 1; i < stats.size(); ++i) EXPECT_GE(stats[i - 1].total_ns, stats[i].total_ns);
  const std::string table = profile.table();
  EXPECT_NE(table.find("add"), std::string::npos);
  EXPECT_NE(table.find("calls"), std::string::npos);
  EXPECT_ERROR_CONTAINS(profile.key_averages("median"), "sort_by is \"total\" or \"self\"");
}

TEST(Profiler, ChromeTraceIsJsonWithAnEventPerRecordAndMemoryCounters) {
  profiler::Profile profile;
  {
    profiler::ProfilerGuard guard(profile);
    const Tensor big = zeros({1024, 256});  // 1 MiB
    (void)(big + 1.0);
  }
  const auto trace = nlohmann::json::parse(profile.chrome_trace_json());
  int64_t complete = 0, counters = 0;
  int64_t most_bytes = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (e["ph"] == "C") {
      ++counters;
      most_bytes = std::max(most_bytes, e["args"]["bytes"].get<int64_t>());
    }
  }
  EXPECT_EQ(complete, static_cast<int64_t>(profile.events().size()));
  EXPECT_EQ(counters, complete) << "one memory sample per op";
  EXPECT_GE(most_bytes, 2 * 1024 * 256 * 4) << "both 1 MiB tensors alive after the add";
  EXPECT_ERROR_CONTAINS(profile.export_chrome_trace("/nonexistent-dir/trace.json"), "cannot write");
}

TEST(Profiler, OnlyInsideTheGuardAndOnlyOnItsThread) {
  profiler::Profile profile;
  (void)ones({2}).exp();  // before: not recorded
  {
    profiler::ProfilerGuard guard(profile);
    EXPECT_TRUE(profiler::is_profiling());
    std::thread other([] {
      EXPECT_FALSE(profiler::is_profiling());
      (void)ones({2}).sigmoid();  // another thread: not recorded
    });
    other.join();
    (void)ones({2}).tanh();
    EXPECT_ERROR_CONTAINS(profiler::ProfilerGuard(profile), "already recording on this thread");
  }
  EXPECT_FALSE(profiler::is_profiling());
  (void)ones({2}).exp();  // after: not recorded
  EXPECT_EQ(count(profile, "exp"), 0);
  EXPECT_EQ(count(profile, "sigmoid"), 0);
  EXPECT_EQ(count(profile, "tanh"), 1);
  profiler::RecordFunction ignored("outside");  // no profiler: nothing happens
}

}  // namespace
}  // namespace ember
