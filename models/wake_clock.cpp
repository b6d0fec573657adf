#include "models/wake_clock.h"

namespace hcclsim {

WakeClock::WakeClock(sc_core::sc_module_name name) : sc_core::sc_module(name) {
  SC_HAS_PROCESS(WakeClock);
  SC_METHOD(run);
  sensitive << wake_;
  dont_initialize();
}

// The one SystemC notification, for `at`, unless an earlier one is pending
// (each re-notification leaves a dead entry in SystemC's queue).
void WakeClock::notify_at(std::uint64_t at, std::uint64_t now) {
  if (at >= notified_at_) return;
  notified_at_ = at;
  wake_.notify(at == now ? sc_core::SC_ZERO_TIME : sc_core::sc_time::from_value(at - now));
}

void WakeClock::wake(Clocked* model, std::uint64_t at) {
  heap_.push(Entry{at, seq_++, model});
  // Inside run() the one notification is made at its end.
  if (!running_) notify_at(at, sc_core::sc_time_stamp().value());
}

void WakeClock::wake_delta(Clocked* model) {
  delta_.push_back(model);
  if (!running_) {
    const std::uint64_t now = sc_core::sc_time_stamp().value();
    notify_at(now, now);
  }
}

void WakeClock::run() {
  ++activations_;
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  notified_at_ = kNever;
  running_ = true;
  // Steps may ask for more wake-ups at `now`; they run in this same loop.
  for (;;) {
    while (!heap_.empty() && heap_.top().at <= now) {
      const Entry e = heap_.top();
      heap_.pop();
      e.model->on_clock(e.at);
    }
    if (delta_.empty()) break;
    round_.swap(delta_);
    for (Clocked* model : round_) model->on_delta();
    round_.clear();
  }
  running_ = false;
  if (!heap_.empty()) notify_at(heap_.top().at, now);
}

}  // namespace hcclsim
