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
// It also runs the models' delta rounds: a model given an input by another
// (a record landing, a flow ending) asks to be stepped at the current time
// after the models now running, as a SystemC delta notification would, but
// without one: every engine waking on every input through its own
// sc_event cost 13% of a CloudMatrix384 run in SystemC's trigger, crunch
// and process dispatch.
//
// Order: requests due at the same time run in the order they were made;
// at one time, the due timed requests run first, then the delta round of the
// models they woke (in the order woken), then timed requests made for the
// current time meanwhile, then the next delta round, until none is left.
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
  // The delta round this model asked for (WakeClock::wake_delta) has come.
  virtual void on_delta() {}

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
  // `model->on_delta()` will run at the current simulated time, in the next
  // delta round. The model asks once per round (it keeps its own flag).
  void wake_delta(Clocked* model);
  std::uint64_t activations() const { return activations_; }

 private:
  void run();
  struct Entry {
    std::uint64_t at;
    std::uint64_t seq;
    Clocked* model;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void notify_at(std::uint64_t at, std::uint64_t now);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  std::vector<Clocked*> delta_;        // the next delta round, in the order asked
  std::vector<Clocked*> round_;        // the round running
  std::uint64_t seq_ = 0;
  std::uint64_t notified_at_ = kNever;  // when wake_ is due
  bool running_ = false;
  sc_core::sc_event wake_;
  std::uint64_t activations_ = 0;
};

}  // namespace hcclsim
