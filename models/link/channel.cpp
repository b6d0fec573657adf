#include "models/link/channel.h"

#include <algorithm>
#include <limits>

namespace hcclsim {

void Flow::start() {
  hops.assign(path->size(), Hop{});
  bytes_delivered = 0;
  path->front()->arrive(*this, 0, bytes);
}

Channel::Channel(sc_core::sc_module_name name, const ChannelParams& params, std::string label)
    : sc_core::sc_module(name), params_(params), label_(std::move(label)) {
  SC_HAS_PROCESS(Channel);
  SC_METHOD(step);
  sensitive << wake_;
  dont_initialize();
}

void Channel::arrive(Flow& flow, std::size_t hop, std::uint64_t bytes) {
  Flow::Hop& state = flow.hops[hop];
  state.bytes_waiting += bytes;
  if (!state.queued) {
    state.queued = true;
    ready_.push_back(Ready{&flow, hop});
  }
  if (!serving_) wake_.notify(sc_core::SC_ZERO_TIME);
}

void Channel::step() {
  ++activations_;
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  if (serving_ && in_service_.exit_ps <= now) finish_service(now);
  deliver_due(now);
  if (!serving_) start_service(now);

  std::uint64_t next = std::numeric_limits<std::uint64_t>::max();
  if (serving_) next = in_service_.exit_ps;
  if (!delay_line_.empty()) next = std::min(next, delay_line_.front().exit_ps);
  if (next != std::numeric_limits<std::uint64_t>::max()) {
    wake_.notify(sc_core::sc_time::from_value(next - now));
  }
}

void Channel::finish_service(std::uint64_t now) {
  serving_ = false;
  InFlight done = in_service_;
  done.exit_ps = now + params_.latency.ps;
  delay_line_.push_back(done);
  Flow::Hop& state = done.flow->hops[done.hop];
  if (state.bytes_waiting > 0) {
    ready_.push_back(Ready{done.flow, done.hop});
  } else {
    state.queued = false;
  }
}

void Channel::deliver_due(std::uint64_t now) {
  while (!delay_line_.empty() && delay_line_.front().exit_ps <= now) {
    InFlight seg = delay_line_.front();
    delay_line_.pop_front();
    Flow& flow = *seg.flow;
    const std::size_t next_hop = seg.hop + 1;
    if (next_hop < flow.path->size()) {
      (*flow.path)[next_hop]->arrive(flow, next_hop, seg.bytes);
    } else {
      flow.bytes_delivered += seg.bytes;
      if (flow.bytes_delivered == flow.bytes) flow.listener->flow_finished(flow);
    }
  }
}

void Channel::start_service(std::uint64_t now) {
  if (ready_.empty()) return;
  Ready next = ready_.front();
  ready_.pop_front();
  Flow::Hop& state = next.flow->hops[next.hop];
  const std::uint64_t chunk = std::min(params_.segment_bytes, state.bytes_waiting);
  state.bytes_waiting -= chunk;
  Bandwidth rate = params_.bandwidth;
  if (next.flow->rate_cap.bytes_per_s != 0 && next.flow->rate_cap.bytes_per_s < rate.bytes_per_s) {
    rate = next.flow->rate_cap;
  }
  const Time serialize = rate.transfer_time(chunk);
  serving_ = true;
  in_service_ = InFlight{next.flow, next.hop, chunk, now + serialize.ps};
  bytes_carried_ += chunk;
  busy_ += serialize;
}

}  // namespace hcclsim
