// The flow-level (fluid) network model.
//
// Contract:
// - a flow holds a share of every channel on its path from its start until
//   its bytes have drained; its rate is its max-min fair share (progressive
//   filling, models/link/max_min: all rates rise together, a channel that
//   fills freezes the flows crossing it, a flow that reaches its own limit
//   freezes there), where the limit of a flow is min(rate_cap, the slowest
//   channel of its path);
// - rates change only when a flow starts or drains, and only for the flows
//   connected to it (transitively) through channels that can fill: a channel
//   whose flows' limits sum to at most its bandwidth never constrains
//   anyone, so it neither couples flows nor enters the computation (this
//   gives the same rates as solving the whole network, since such a channel
//   could only fill with every flow on it already at its limit);
// - a flow's last byte arrives the sum of its path's latencies after it has
//   drained (cut-through: a flow alone over hops at rate r takes
//   bytes / r + sum of latencies, as the segment model);
// - times are integer picoseconds; rates and bytes left are doubles computed
//   in an order set by the simulation's events alone, never by addresses or
//   hashing (a component's flows in the order its search met them, its
//   channels by index, a channel's flows in the order they joined and left
//   it), and a drain time is
//   rounded up to a whole picosecond, exactly (integer arithmetic) when bytes
//   left and rate are whole numbers; so a run is repeatable bit for bit;
// - starts are collected and solved once per delta round of the clock, so
//   flows starting at the same instant cost one computation.
// - a component of at least FlowBatching::large_component flows is solved
//   at the next multiple of the quantum instead of at once (network.h);
// Left out, compared with the segment model: interleaving at segment
// granularity (shares are exact fractions at every instant) and the time a
// byte spends reaching the next hop (a flow occupies all its channels at
// once); like it, no queueing or flow control inside switches.
#pragma once

#include <cstdint>
#include <queue>
#include <systemc>
#include <vector>

#include "models/link/channel.h"
#include "models/link/max_min.h"
#include "models/link/network.h"
#include "models/wake_clock.h"

namespace hcclsim {

class FlowNetwork final : public sc_core::sc_module, public Network, public Clocked {
 public:
  // `clock` steps the network (it outlives it).
  FlowNetwork(sc_core::sc_module_name name, WakeClock& clock, FlowBatching batching = {});

  const char* kind() const override { return "hcclsim::FlowNetwork"; }
  // Every channel a flow may cross, before the first flow starts.
  void add_channel(Channel& channel);
  // The channels' rates and latencies read again after Channel::set_params
  // (between runs, no flow in flight).
  void reread_channels();

  void start_flow(Flow& flow) override;
  void on_clock(std::uint64_t at) override;
  void on_delta() override;
  // Flows drained plus flows arrived.
  std::uint64_t activations() const override { return events_; }

  // The current rate of a flow in bytes/s (0 once drained), for tests.
  static double rate_of(const Flow& flow) { return flow.fluid.draining ? flow.fluid.rate : 0.0; }

 private:
  struct Member {
    Flow* flow;
    std::uint32_t hop;
  };
  // Two cache lines: what a component search and a solve read first, then
  // what only a flow's start and end touch.
  struct alignas(64) Link {
    std::vector<Member> flows;      // draining flows crossing it
    std::uint64_t capacity = 0;     // bytes/s
    std::uint64_t bound_sum = 0;    // sum of the limits of its flows
    std::uint64_t large_until = 0;  // in a component found large: its changes wait for this quantum
    std::uint32_t mark = 0;         // component search epoch
    std::uint32_t local = 0;        // its index in the component being solved
    bool dirty = false;
    bool deferred = false;
    bool could_fill = false;        // can_fill() when its flows were last solved
    std::uint64_t latency_ps = 0;
    // Its busy periods since last handed to the channel (when the network
    // falls idle): the one under way began at busy_since.
    std::uint64_t busy_since = 0;
    std::uint64_t busy_ps = 0;      // of the periods ended
    std::uint64_t busy_bytes = 0;
    std::uint32_t busy_peak = 0;    // most flows at once
    bool unreported = false;        // listed in unreported_
    Channel* channel = nullptr;
    bool can_fill() const { return bound_sum > capacity; }
  };

  struct Arrival {
    std::uint64_t at;
    std::uint64_t seq;
    Flow* flow;
    bool operator>(const Arrival& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void run();
  void begin(Flow& flow, std::uint64_t now);
  void drained(Flow& flow, std::uint64_t now);
  void touch(std::uint32_t link);
  void recompute(std::uint64_t now);
  std::uint64_t next_quantum(std::uint64_t now) const { return (now / batching_.quantum_ps + 1) * batching_.quantum_ps; }
  bool on_quantum(std::uint64_t now) const {
    return batching_.large_component == 0 || batching_.quantum_ps == 0 || now % batching_.quantum_ps == 0;
  }
  void collect(Flow& seed);
  void solve(std::uint64_t now);
  bool solve_shared_channels(std::uint64_t now);
  void apply_rate(Flow& flow, double rate, std::uint64_t now);
  // The drains: a binary heap by (drain_at, drain_seq) that knows each
  // flow's place, so a new rate moves its flow instead of leaving a stale
  // entry. The keys sit in the heap's own entries: comparing through the
  // flows cost two cache misses a level at thousands of NPUs.
  struct Drain {
    std::uint64_t at;
    std::uint64_t seq;
    Flow* flow;
  };
  static bool earlier(const Drain& a, const Drain& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; }
  void place(std::uint32_t pos, const Drain& drain);
  void sift_up(std::uint32_t pos);
  void sift_down(std::uint32_t pos);
  void set_drain(Flow& flow, std::uint64_t at);
  void remove_drain(Flow& flow);

  FlowBatching batching_;
  std::vector<Link> links_;
  std::vector<std::uint32_t> deferred_;  // seeds of components left for the next quantum
  std::uint64_t deferred_at_;
  std::vector<Flow*> starting_;      // started since the last run, in start order
  std::vector<std::uint32_t> dirty_; // links whose flows changed, in order
  std::vector<std::uint32_t> unreported_;  // idle links whose busy periods the channel has not been told
  std::uint64_t in_flight_ = 0;      // flows started and not yet arrived
  void report_busy_periods();
  std::vector<Drain> drains_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<Arrival>> arrivals_;
  std::uint64_t event_seq_ = 0;      // drains and arrivals share it: ties go in scheduling order
  std::uint64_t flow_seq_ = 0;
  std::uint32_t epoch_ = 0;
  // One component being solved.
  std::vector<Flow*> comp_flows_;
  std::vector<std::uint32_t> comp_links_;
  std::vector<Flow*> stack_;
  std::vector<double> limit_;        // its flows' bounds, bytes/s
  MaxMinShares solver_;              // and its working memory
  WakeClock& clock_;
  std::uint64_t next_wake_ = WakeClock::kNever;  // the timed wake-up the clock holds for the network
  bool delta_asked_ = false;
  bool running_ = false;
  std::uint64_t events_ = 0;
};

}  // namespace hcclsim
