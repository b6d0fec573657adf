// One direction of a link (HCCS, SIO, UB, RoCE) or of a switch port.
//
// Under the flow model (models/link/flow_network) a channel is passive: the
// network computes rates and only reports bytes and busy time to it. What
// follows is the segment model.
//
// Contract: a flow crosses a path of channels as segments (the smallest
// `segment_bytes` along its path). A channel serializes one segment at a
// time at min(bandwidth, flow rate cap) and serves the flows that have
// segments waiting in round-robin order, so k equal flows each get 1/k of
// it. Forwarding is cut-through: a segment's head reaches the next channel
// `latency` after this channel starts it, and the next channel cannot finish
// it before its tail has arrived (this channel's end + latency); the last
// channel delivers it `latency` after its end. So a transfer over h equal
// hops takes size/bandwidth + h x latency, and the segment size only sets
// the granularity of sharing. Buffers between hops are unbounded (no credit
// flow control). An arrival at an idle channel starts serializing at once;
// the platform's WakeClock times the rest.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "models/wake_clock.h"
#include "models/link/link_stats.h"
#include "models/params.h"

namespace hcclsim {

class Channel;
struct Flow;

// Told when the last byte of a flow has arrived at the end of its path.
class FlowListener {
 public:
  virtual void flow_finished(Flow& flow) = 0;

 protected:
  ~FlowListener() = default;
};

struct Flow {
  std::uint64_t bytes = 0;
  Bandwidth rate_cap;                 // 0 bytes/s: no cap
  const std::vector<Channel*>* path = nullptr;  // owned by the platform's route cache
  FlowListener* listener = nullptr;
  std::uint64_t tag = 0;              // the listener's own identifier

  // Progress, owned by the channels.
  struct Hop {
    std::uint64_t bytes_waiting = 0;  // arrived at this hop, not yet serialized
    bool queued = false;              // in the channel's round-robin list or in service
    std::deque<std::uint64_t> tails;  // per waiting segment: when its tail arrives (not at the first hop)
  };
  std::vector<Hop> hops;
  std::uint64_t segment = 0;        // bytes per segment on this path
  std::uint64_t bytes_delivered = 0;

  // Progress under the flow model, owned by the FlowNetwork.
  struct Fluid {
    std::uint64_t seq = 0;            // start order, for deterministic tie-breaks
    double remaining = 0;             // bytes not yet drained at `since_ps`
    double rate = 0;                  // bytes/s
    std::uint64_t since_ps = 0;
    std::uint64_t drain_at = 0;       // when it will have drained at its current rate
    std::uint64_t drain_seq = 0;      // order of events due at the same time
    std::uint32_t heap_pos = 0;       // in the network's heap of drains (kNone: not in it)
    std::uint64_t bound = 0;          // the most it can ever get: min(rate_cap, slowest channel), bytes/s
    std::uint64_t latency_ps = 0;     // sum of the path's latencies
    std::vector<std::uint32_t> links; // per hop: the network's index of the channel
    // The path `links`, path_bound and latency_ps were worked out for: a
    // stream's flow mostly crosses the same path again, and reading each
    // channel of it costs a cache miss a hop at thousands of NPUs.
    const std::vector<Channel*>* links_of = nullptr;
    std::uint64_t path_bound = 0;     // the slowest channel of that path, bytes/s
    std::vector<std::uint32_t> slot;  // per hop: its index in that channel's list of flows
    std::uint32_t mark = 0;           // component search epoch
    bool draining = false;            // holds a share of its channels
  };
  Fluid fluid;

  // Segment model: resets progress and hands every byte to the first channel of the path.
  void start();
};

class Channel : public sc_core::sc_module, public Clocked {
 public:
  Channel(sc_core::sc_module_name name, const ChannelParams& params, std::string label, WakeClock& clock);

  const char* kind() const override { return "hcclsim::Channel"; }
  const std::string& label() const { return label_; }
  const ChannelParams& params() const { return params_; }
  // Other constants for the next workloads, between runs (the flow network
  // keeps a copy of the rate and latency: FlowNetwork::reread_channels).
  void set_params(const ChannelParams& params) { params_ = params; }

  // `bytes` of `flow` are ready to be serialized at hop `hop` (this channel);
  // past the first hop that is one segment whose tail arrives at `tail_ps`.
  void arrive(Flow& flow, std::size_t hop, std::uint64_t bytes, std::uint64_t tail_ps = 0);

  // Called by the clock at the time this channel asked for.
  void on_clock(std::uint64_t now) override;

  std::uint64_t bytes_carried() const { return bytes_carried_; }
  std::uint64_t activations() const { return activations_; }
  Time busy_time() const { return busy_; }
  // Counters for link statistics: bytes and busy time since elaboration,
  // peak concurrent flows since reset_peak_flows().
  LinkStats stats() const { return LinkStats{bytes_carried_, busy_, peak_flows_}; }
  void reset_peak_flows() { peak_flows_ = active_flows_; }

  // Flow model: the network's index of this channel, and its statistics,
  // handed over each time the channel falls idle (the network counts a busy
  // period itself, so that starting a flow does not touch the channel).
  std::uint32_t index() const { return index_; }
  void set_index(std::uint32_t index) { index_ = index; }
  void account_busy_period(std::uint64_t bytes, Time busy, std::uint32_t peak_flows) {
    bytes_carried_ += bytes;
    busy_ += busy;
    peak_flows_ = std::max(peak_flows_, peak_flows);
  }

 private:
  void reschedule();
  void finish_service(std::uint64_t now);
  void deliver_due(std::uint64_t now);
  void start_service(std::uint64_t now);

  struct InFlight {
    Flow* flow;
    std::size_t hop;
    std::uint64_t bytes;
    std::uint64_t exit_ps;   // in service: its end; in the delay line: when it leaves
    std::uint64_t tail_ps;   // when its tail reaches the next channel
  };
  struct Ready {
    Flow* flow;
    std::size_t hop;
  };

  ChannelParams params_;
  std::string label_;
  // The segment model's queues, made at the first arrival: under the flow
  // model a channel never has any, and two empty deques cost 1.2 KiB each
  // channel (about 120 MiB at 8,192 NPUs).
  struct Queues {
    std::deque<Ready> ready;            // round-robin order
    std::deque<InFlight> delay_line;    // ordered by exit time (one latency)
  };
  Queues& queues() {
    if (!queues_) queues_ = std::make_unique<Queues>();
    return *queues_;
  }
  std::unique_ptr<Queues> queues_;
  bool serving_ = false;
  InFlight in_service_{};
  WakeClock& clock_;
  std::uint64_t next_wake_ = WakeClock::kNever;  // the wake-up the clock holds for us
  std::uint64_t bytes_carried_ = 0;
  std::uint64_t activations_ = 0;
  Time busy_;
  std::uint32_t index_ = 0;
  std::uint32_t active_flows_ = 0;  // flows with bytes waiting here or in service (segment model), sharing it (flow model)
  std::uint32_t peak_flows_ = 0;
};

}  // namespace hcclsim
