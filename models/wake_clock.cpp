#include "models/wake_clock.h"

#include <algorithm>

namespace hcclsim {

void WakeQueue::push(std::uint64_t at, Clocked* model) {
  ++size_;
  if (at < last_) {
    early_.push(Early{at, early_seq_++, model});
    return;
  }
  const int b = bucket_of(at, last_);
  buckets_[b].push_back(Request{at, model});
  if (b > 0) occupied_ |= std::uint64_t{1} << (b - 1);
}

std::uint64_t WakeQueue::refill() {
  if (!early_.empty()) return early_.top().at;
  buckets_[0].clear();
  first_ = 0;
  // The lowest bucket holding a request (the queue is not empty).
  const int b = 1 + __builtin_ctzll(occupied_);
  std::vector<Request>& from = buckets_[b];
  std::uint64_t least = from.front().at;
  for (const Request& r : from) least = std::min(least, r.at);
  last_ = least;
  // Every request moves to a lower bucket, in the order it was in.
  occupied_ &= ~(std::uint64_t{1} << (b - 1));
  for (const Request& r : from) {
    const int to = bucket_of(r.at, last_);
    buckets_[to].push_back(r);
    if (to > 0) occupied_ |= std::uint64_t{1} << (to - 1);
  }
  from.clear();
  return last_;
}

WakeQueue::Request WakeQueue::pop_early() {
  const Early e = early_.top();
  early_.pop();
  return Request{e.at, e.model};
}

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
  requests_.push(at, model);
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
    while (!requests_.empty() && requests_.next_at() <= now) {
      const WakeQueue::Request r = requests_.pop();
      r.model->on_clock(r.at);
    }
    if (delta_.empty()) break;
    round_.swap(delta_);
    for (Clocked* model : round_) model->on_delta();
    round_.clear();
  }
  running_ = false;
  if (!requests_.empty()) notify_at(requests_.next_at(), now);
}

}  // namespace hcclsim
