#pragma once
// The profiler (torch.profiler in spirit). Note [Profiler]: a policy at the dispatch point
// (Note [The dispatch point]) sees every op call begin and end on its thread, so profiling needs
// nothing from the ops themselves: each event has the op's name, its input shapes and dtype, its
// device, its wall time and its nesting depth (an op inside another, e.g. the mm inside linear).
// The engine adds one event per backward node ("MmBackward"), user code adds ranges
// (RecordFunction), and the allocator's live bytes are sampled at each op's end. Results: a
// table of totals per name (key_averages(), sorted by total time) and a Chrome trace (JSON for
// chrome://tracing and Perfetto).
//
//     profiler::Profile profile;
//     {
//       profiler::ProfilerGuard guard(profile);
//       profiler::RecordFunction step("train_step");
//       loss_fn(model(x), y).backward();
//     }
//     std::cout << profile.table();
//     profile.export_chrome_trace("trace.json");
//
// Off (no guard on the thread), it costs what the dispatch point costs without policies: one
// thread-local load per op. On a GPU, op times are launch times (kernels run asynchronously);
// synchronize inside a range to time the device.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor/arg.h"
#include "ember/tensor/tensor.h"

namespace ember::profiler {

struct ProfilerOptions {
  EMBER_ARG(bool, record_shapes) = true;   // input shapes and dtype of each op
  EMBER_ARG(bool, profile_memory) = true;  // the live bytes of the op's device after each op
};

struct Event {
  enum class Kind : int8_t { Op, Backward, Range };
  Kind kind = Kind::Op;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // since the profile began
  int depth = 0;                     // ops and ranges open around it on its thread
  std::vector<Shape> shapes;         // the op's tensor inputs (record_shapes)
  DType dtype = kFloat32;            // of its first tensor input
  Device device;                     // of its first tensor input
  int64_t bytes_after = -1;          // live bytes on `device` after it (profile_memory), -1 if not sampled
  int64_t duration_ns() const { return end_ns - start_ns; }
};

// Totals of one name over a profile.
struct EventStats {
  std::string name;
  int64_t calls = 0, total_ns = 0, self_ns = 0;  // self: minus the events nested inside
};

class Profile {
 public:
  const std::vector<Event>& events() const { return events_; }
  // Totals per name, sorted by total time (or "self" time), largest first.
  std::vector<EventStats> key_averages(const std::string& sort_by = "total") const;
  // key_averages as an aligned text table of the first `limit` rows.
  std::string table(const std::string& sort_by = "total", size_t limit = 20) const;
  // The Chrome trace event format: a complete event ("X") per event, a counter ("C") per memory
  // sample. Throws an ember::Error naming the file when it cannot be written.
  void export_chrome_trace(const std::string& path) const;
  std::string chrome_trace_json() const;

 private:
  friend class ProfilerGuard;
  friend class RecordFunction;
  std::vector<Event> events_;
  int64_t origin_ns_ = 0;
  ProfilerOptions options_;
};

// Records into `profile` every op, backward node and range on this thread for its lifetime.
// One guard per thread at a time; `profile` must outlive it.
class ProfilerGuard {
 public:
  explicit ProfilerGuard(Profile& profile, ProfilerOptions options = {});
  ~ProfilerGuard();
  ProfilerGuard(const ProfilerGuard&) = delete;
  ProfilerGuard& operator=(const ProfilerGuard&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A named range (a step, a phase) in the profile of this thread; nothing without a profiler.
class RecordFunction {
 public:
  explicit RecordFunction(std::string name, Event::Kind kind = Event::Kind::Range);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  int64_t index_ = -1;  // of its event, or -1 when not recording
};

bool is_profiling();  // whether a ProfilerGuard is active on this thread

}  // namespace ember::profiler
