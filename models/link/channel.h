// One direction of a link (HCCS, SIO, UB, RoCE) or of a switch port.
//
// Contract: a flow crosses a path of channels as segments of at most
// `segment_bytes`. A channel serializes one segment at a time at
// min(bandwidth, flow rate cap) and serves the flows that have segments
// waiting in round-robin order, so k equal flows each get 1/k of it. A
// segment reaches the next channel of its path `latency` after its
// serialization ends, so a long flow pipelines across hops. Buffers between
// hops are unbounded (no credit flow control).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <systemc>
#include <vector>

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
  };
  std::vector<Hop> hops;
  std::uint64_t bytes_delivered = 0;

  // Resets progress and hands every byte to the first channel of the path.
  void start();
};

class Channel : public sc_core::sc_module {
 public:
  Channel(sc_core::sc_module_name name, const ChannelParams& params, std::string label);

  const std::string& label() const { return label_; }
  const ChannelParams& params() const { return params_; }

  // `bytes` of `flow` are ready to be serialized at hop `hop` (this channel).
  void arrive(Flow& flow, std::size_t hop, std::uint64_t bytes);

  std::uint64_t bytes_carried() const { return bytes_carried_; }
  std::uint64_t activations() const { return activations_; }
  Time busy_time() const { return busy_; }

 private:
  void step();
  void finish_service(std::uint64_t now);
  void deliver_due(std::uint64_t now);
  void start_service(std::uint64_t now);

  struct InFlight {
    Flow* flow;
    std::size_t hop;
    std::uint64_t bytes;
    std::uint64_t exit_ps;
  };
  struct Ready {
    Flow* flow;
    std::size_t hop;
  };

  ChannelParams params_;
  std::string label_;
  std::deque<Ready> ready_;            // round-robin order
  std::deque<InFlight> delay_line_;    // ordered by exit time (one latency)
  bool serving_ = false;
  InFlight in_service_{};
  sc_core::sc_event wake_;
  std::uint64_t bytes_carried_ = 0;
  std::uint64_t activations_ = 0;
  Time busy_;
};

}  // namespace hcclsim
