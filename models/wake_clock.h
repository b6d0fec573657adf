// The one SystemC process that times every channel and stream engine of a
// platform.
//
// Models ask to be stepped at a time; the clock keeps those requests in its
// own heap and holds a single SystemC timed notification for the earliest.
// Why: a model changes its next wake-up on almost every segment or task,
// and SystemC's event queue allocates every timed notification, orders them
// through a comparison it cannot inline, and keeps every cancelled one in
// its heap. With one process per channel that queue dominated the run time
// (a profile of a 128-NPU AllReduce: 47% in sc_ppq_base / sc_event::trigger);
// with one timed notification per stream engine it still took 10-14% of a
// cluster run.
//
// Order: requests due at the same time run in the order they were made.
#pragma once

#include <cstdint>
#include <limits>
#include <queue>
#include <systemc>
#include <vector>

namespace hcclsim {

// A model the clock steps. `at` is the time it asked for (the current time).
class Clocked {
 public:
  virtual void on_clock(std::uint64_t at) = 0;

 protected:
  ~Clocked() = default;
};

class WakeClock : public sc_core::sc_module {
 public:
  explicit WakeClock(sc_core::sc_module_name name);

  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  // `model->on_clock(at)` will run at simulated time `at` (>= now). A model
  // that changes its mind asks again and ignores the stale call.
  void wake(Clocked* model, std::uint64_t at);
  std::uint64_t activations() const { return activations_; }

 private:
  void run();
  struct Entry {
    std::uint64_t at;
    std::uint64_t seq;
    Clocked* model;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  std::uint64_t seq_ = 0;
  std::uint64_t notified_at_ = kNever;  // when wake_ is due
  bool running_ = false;
  sc_core::sc_event wake_;
  std::uint64_t activations_ = 0;
};

}  // namespace hcclsim
