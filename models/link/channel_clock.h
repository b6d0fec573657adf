// The one SystemC process that times every channel of a platform.
//
// Channels ask to be stepped at a time; the clock keeps those requests in
// its own heap and holds a single SystemC timed notification for the
// earliest. Why: a channel changes its next wake-up on almost every segment,
// and SystemC's event queue keeps every cancelled notification in its heap;
// with one process per channel that queue dominated the run time (a profile
// of a 128-NPU AllReduce: 47% in sc_ppq_base / sc_event::trigger).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <systemc>
#include <vector>

namespace hcclsim {

class Channel;

class ChannelClock : public sc_core::sc_module {
 public:
  explicit ChannelClock(sc_core::sc_module_name name);

  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  // `channel->step(at)` will run at simulated time `at` (>= now).
  void wake(Channel* channel, std::uint64_t at);
  std::uint64_t activations() const { return activations_; }

 private:
  void run();
  struct Entry {
    std::uint64_t at;
    std::uint64_t seq;
    Channel* channel;
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
