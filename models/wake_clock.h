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

// Wake-up requests, taken earliest first and, at one time, in the order
// made. A radix heap on the time: requests are never for a time before the
// last one taken, so a request goes to the bucket of the highest bit in
// which its time differs from that one, and taking the earliest sorts only
// the lowest non-empty bucket, into lower ones. Requests at one time
// always share a bucket and keep their order through every move. A
// request before the time last looked at (made from outside the clock's
// run after it looked at the next one) waits in a small ordinary heap
// taken first. Why: the binary heap this replaces, about 330 requests deep
// on CloudMatrix384, was 7% of a run in its sift-downs.
class WakeQueue {
 public:
  struct Request {
    std::uint64_t at;
    Clocked* model;
  };
  bool empty() const { return size_ == 0; }
  void push(std::uint64_t at, Clocked* model);
  // The earliest request's time; the queue must not be empty. (Inline: the
  // clock asks before every request it takes, tens of millions of times in
  // a cluster run, and the answer is nearly always bucket 0's time.)
  std::uint64_t next_at() {
    if (early_.empty() && first_ < buckets_[0].size()) return last_;
    return refill();
  }
  // Takes the earliest request; the queue must not be empty.
  Request pop() {
    next_at();
    --size_;
    if (!early_.empty()) return pop_early();
    return buckets_[0][first_++];
  }

 private:
  // next_at() once bucket 0 is used up (or an early request waits).
  std::uint64_t refill();
  Request pop_early();
  static int bucket_of(std::uint64_t at, std::uint64_t last) {
    return at == last ? 0 : 64 - __builtin_clzll(at ^ last);
  }
  struct Early {
    std::uint64_t at, seq;
    Clocked* model;
    bool operator>(const Early& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::vector<Request> buckets_[65];  // buckets_[0]: requests at last_, unread from first_
  std::uint64_t occupied_ = 0;        // bit b - 1: buckets_[b] (b >= 1) holds a request
  std::size_t first_ = 0;
  std::uint64_t last_ = 0;  // the time of bucket 0 (the earliest of the radix heap)
  std::size_t size_ = 0;
  std::priority_queue<Early, std::vector<Early>, std::greater<Early>> early_;
  std::uint64_t early_seq_ = 0;
};

class WakeClock : public sc_core::sc_module {
 public:
  explicit WakeClock(sc_core::sc_module_name name);
  const char* kind() const override { return "hcclsim::WakeClock"; }

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
  void notify_at(std::uint64_t at, std::uint64_t now);
  WakeQueue requests_;
  std::vector<Clocked*> delta_;        // the next delta round, in the order asked
  std::vector<Clocked*> round_;        // the round running
  std::uint64_t notified_at_ = kNever;  // when wake_ is due
  bool running_ = false;
  sc_core::sc_event wake_;
  std::uint64_t activations_ = 0;
};

}  // namespace hcclsim
