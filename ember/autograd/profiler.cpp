// The profiler: Note [Profiler] in profiler.h.
#include "ember/autograd/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ember/autograd/dispatch.h"
#include "ember/tensor/allocator.h"

namespace ember::profiler {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The profile being recorded on this thread, and the events open in it (innermost last).
struct ThreadRecording {
  Profile* profile = nullptr;
  std::vector<int64_t> open;  // indices into profile->events_
};
thread_local ThreadRecording recording;

}  // namespace

// The policy at the dispatch point: an event opens in before() and closes in after().
struct ProfilerGuard::State final : dispatch::Policy {
  std::optional<dispatch::PolicyGuard> installed;
  Profile* profile = nullptr;

  void before(dispatch::Call& call) override {
    Event e;
    e.kind = Event::Kind::Op;
    e.name = dispatch::op_name(call.op);
    e.depth = static_cast<int>(recording.open.size());
    for (const Tensor* t : call.inputs) {
      if (!t->defined()) continue;
      if (e.shapes.empty()) {
        e.dtype = t->dtype();
        e.device = t->device();
      }
      if (profile->options_.record_shapes()) e.shapes.push_back(t->sizes());
      if (!profile->options_.record_shapes()) break;
    }
    e.start_ns = now_ns() - profile->origin_ns_;
    recording.open.push_back(static_cast<int64_t>(profile->events_.size()));
    profile->events_.push_back(std::move(e));
  }

  void after(const dispatch::Call&) override {
    if (recording.open.empty()) return;
    Event& e = profile->events_[recording.open.back()];
    recording.open.pop_back();
    e.end_ns = now_ns() - profile->origin_ns_;
    if (profile->options_.profile_memory()) e.bytes_after = memory::stats(e.device).current_bytes;
  }
};

ProfilerGuard::ProfilerGuard(Profile& profile, ProfilerOptions options) {
  EMBER_CHECK(recording.profile == nullptr, "ProfilerGuard: a profiler is already recording on this thread");
  state_ = std::make_unique<State>();
  profile.events_.clear();
  profile.options_ = options;
  profile.origin_ns_ = now_ns();
  state_->profile = &profile;
  recording = ThreadRecording{&profile, {}};
  state_->installed.emplace(*state_);
}

ProfilerGuard::~ProfilerGuard() {
  state_->installed.reset();
  // Close what is still open (a guard destroyed by an exception inside an op or range).
  Profile& p = *recording.profile;
  const int64_t end = now_ns() - p.origin_ns_;
  for (int64_t i : recording.open) p.events_[i].end_ns = end;
  recording = ThreadRecording{};
}

bool is_profiling() { return recording.profile != nullptr; }

RecordFunction::RecordFunction(std::string name, Event::Kind kind) {
  if (recording.profile == nullptr) return;
  Profile& p = *recording.profile;
  Event e;
  e.kind = kind;
  e.name = std::move(name);
  e.depth = static_cast<int>(recording.open.size());
  e.start_ns = now_ns() - p.origin_ns_;
  index_ = static_cast<int64_t>(p.events_.size());
  recording.open.push_back(index_);
  p.events_.push_back(std::move(e));
}

RecordFunction::~RecordFunction() {
  if (index_ < 0 || recording.profile == nullptr) return;
  Profile& p = *recording.profile;
  // Ranges close in order; anything left open inside (an op that threw) closes with this one.
  while (!recording.open.empty()) {
    const int64_t i = recording.open.back();
    recording.open.pop_back();
    p.events_[i].end_ns = now_ns() - p.origin_ns_;
    if (i == index_) break;
  }
}

std::vector<EventStats> Profile::key_averages(const std::string& sort_by) const {
  EMBER_CHECK(sort_by == "total" || sort_by == "self", "Profile.key_averages: sort_by is \"total\" or \"self\", got '",
              sort_by, "'");
  // Self time: an event's duration minus that of the events one level inside it. Events are
  // stored in the order they opened, so a stack of open events finds each one's parent.
  std::vector<int64_t> self(events_.size());
  std::vector<size_t> stack;
  for (size_t i = 0; i < events_.size(); ++i) {
    self[i] = events_[i].duration_ns();
    while (!stack.empty() && events_[stack.back()].depth >= events_[i].depth) stack.pop_back();
    if (!stack.empty()) self[stack.back()] -= events_[i].duration_ns();
    stack.push_back(i);
  }
  std::map<std::string, EventStats> by_name;
  for (size_t i = 0; i < events_.size(); ++i) {
    EventStats& s = by_name[events_[i].name];
    s.name = events_[i].name;
    ++s.calls;
    s.total_ns += events_[i].duration_ns();
    s.self_ns += self[i];
  }
  std::vector<EventStats> out;
  for (auto& [name, s] : by_name) out.push_back(s);
  std::stable_sort(out.begin(), out.end(), [&](const EventStats& a, const EventStats& b) {
    return sort_by == "self" ? a.self_ns > b.self_ns : a.total_ns > b.total_ns;
  });
  return out;
}

std::string Profile::table(const std::string& sort_by, size_t limit) const {
  const auto stats = key_averages(sort_by);
  int64_t all_self = 0;
  for (const auto& s : stats) all_self += s.self_ns;
  std::ostringstream os;
  char line[200];
  std::snprintf(line, sizeof line, "%-28s %8s %12s %12s %8s %12s\n", "name", "calls", "total ms", "self ms", "self %",
                "mean us");
  os << line << std::string(84, '-') << "\n";
  for (size_t i = 0; i < stats.size() && i < limit; ++i) {
    const auto& s = stats[i];
    std::snprintf(line, sizeof line, "%-28.28s %8lld %12.3f %12.3f %7.1f%% %12.2f\n", s.name.c_str(),
                  static_cast<long long>(s.calls), s.total_ns / 1e6, s.self_ns / 1e6,
                  all_self > 0 ? 100.0 * s.self_ns / all_self : 0.0, s.total_ns / 1e3 / s.calls);
    os << line;
  }
  return os.str();
}

std::string Profile::chrome_trace_json() const {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  const char* categories[] = {"op", "backward", "range"};
  for (const Event& e : events_) {
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["cat"] = categories[static_cast<int>(e.kind)];
    j["ph"] = "X";
    j["ts"] = e.start_ns / 1e3;  // microseconds
    j["dur"] = e.duration_ns() / 1e3;
    j["pid"] = 0;
    j["tid"] = 0;
    if (e.kind == Event::Kind::Op) {
      nlohmann::ordered_json shapes = nlohmann::ordered_json::array();
      for (const Shape& s : e.shapes) shapes.push_back(s);
      j["args"]["input_shapes"] = shapes;
      j["args"]["dtype"] = dtype_name(e.dtype);
      j["args"]["device"] = e.device.str();
    }
    events.push_back(j);
    if (e.bytes_after >= 0) {
      nlohmann::ordered_json c;
      c["name"] = "memory (" + e.device.str() + ")";
      c["ph"] = "C";
      c["ts"] = e.end_ns / 1e3;
      c["pid"] = 0;
      c["args"]["bytes"] = e.bytes_after;
      events.push_back(c);
    }
  }
  nlohmann::ordered_json trace;
  trace["traceEvents"] = events;
  trace["displayTimeUnit"] = "ms";
  return trace.dump();
}

void Profile::export_chrome_trace(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  EMBER_CHECK(out.good(), "Profile.export_chrome_trace: cannot write '", path, "'");
  out << chrome_trace_json();
  out.close();
  EMBER_CHECK(out.good(), "Profile.export_chrome_trace: writing '", path, "' failed");
}

}  // namespace ember::profiler
