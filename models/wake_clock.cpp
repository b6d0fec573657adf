#include "models/wake_clock.h"

namespace hcclsim {

WakeClock::WakeClock(sc_core::sc_module_name name) : sc_core::sc_module(name) {
  SC_HAS_PROCESS(WakeClock);
  SC_METHOD(run);
  sensitive << wake_;
  dont_initialize();
}

void WakeClock::wake(Clocked* model, std::uint64_t at) {
  heap_.push(Entry{at, seq_++, model});
  // Inside run() the one notification is made at its end; elsewhere only an
  // earlier wake-up needs one (each re-notification leaves a dead entry in
  // SystemC's queue).
  if (!running_ && at < notified_at_) {
    notified_at_ = at;
    const std::uint64_t now = sc_core::sc_time_stamp().value();
    wake_.notify(at == now ? sc_core::SC_ZERO_TIME : sc_core::sc_time::from_value(at - now));
  }
}

void WakeClock::run() {
  ++activations_;
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  notified_at_ = kNever;
  running_ = true;
  // Steps may ask for more wake-ups at `now`; they run in this same loop.
  while (!heap_.empty() && heap_.top().at <= now) {
    const Entry e = heap_.top();
    heap_.pop();
    e.model->on_clock(e.at);
  }
  running_ = false;
  if (!heap_.empty()) {
    notified_at_ = heap_.top().at;
    wake_.notify(sc_core::sc_time::from_value(notified_at_ - now));
  }
}

}  // namespace hcclsim
