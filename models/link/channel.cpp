#include "models/link/channel.h"

#include "models/link/network.h"

#include <algorithm>
#include <limits>

namespace hcclsim {

void Flow::start() {
  hops.assign(path->size(), Hop{});
  bytes_delivered = 0;
  segment = path->front()->params().segment_bytes;
  for (const Channel* ch : *path) segment = std::min(segment, ch->params().segment_bytes);
  path->front()->arrive(*this, 0, bytes);
}

void SegmentNetwork::start_flow(Flow& flow) { flow.start(); }

Channel::Channel(sc_core::sc_module_name name, const ChannelParams& params, std::string label, WakeClock& clock)
    : sc_core::sc_module(name), params_(params), label_(std::move(label)), clock_(clock) {}

void Channel::arrive(Flow& flow, std::size_t hop, std::uint64_t bytes, std::uint64_t tail_ps) {
  Flow::Hop& state = flow.hops[hop];
  state.bytes_waiting += bytes;
  if (hop > 0) state.tails.push_back(tail_ps);
  if (!state.queued) {
    state.queued = true;
    queues().ready.push_back(Ready{&flow, hop});
    peak_flows_ = std::max(peak_flows_, ++active_flows_);
  }
  if (!serving_) {
    start_service(sc_core::sc_time_stamp().value());
    reschedule();
  }
}

void Channel::on_clock(std::uint64_t now) {
  if (now != next_wake_) return;  // a wake-up that was replaced by another
  next_wake_ = WakeClock::kNever;
  ++activations_;
  if (serving_ && in_service_.exit_ps <= now) finish_service(now);
  deliver_due(now);
  if (!serving_) start_service(now);
  reschedule();
}

void Channel::reschedule() {
  std::uint64_t next = WakeClock::kNever;
  if (serving_) next = in_service_.exit_ps;
  if (queues_ && !queues_->delay_line.empty()) next = std::min(next, queues_->delay_line.front().exit_ps);
  if (next != next_wake_ && next != WakeClock::kNever) {
    next_wake_ = next;
    clock_.wake(this, next);
  }
}

void Channel::finish_service(std::uint64_t now) {
  serving_ = false;
  InFlight done = in_service_;
  // A middle hop forwarded the segment when it started it. The last hop
  // reports only the flow's end: its final segment arrives `latency` later
  // (the earlier ones are not observable, and a wake-up each would double the
  // events of one-hop transfers).
  if (done.hop + 1 == done.flow->path->size()) {
    Flow& flow = *done.flow;
    flow.bytes_delivered += done.bytes;
    if (flow.bytes_delivered == flow.bytes) {
      done.exit_ps = now + params_.latency.ps;
      queues().delay_line.push_back(done);
    }
  }
  Flow::Hop& state = done.flow->hops[done.hop];
  if (state.bytes_waiting > 0) {
    queues().ready.push_back(Ready{done.flow, done.hop});
  } else {
    state.queued = false;
    --active_flows_;
  }
}

void Channel::deliver_due(std::uint64_t now) {
  std::deque<InFlight>& delay_line = queues().delay_line;
  while (!delay_line.empty() && delay_line.front().exit_ps <= now) {
    InFlight seg = delay_line.front();
    delay_line.pop_front();
    Flow& flow = *seg.flow;
    const std::size_t next_hop = seg.hop + 1;
    if (next_hop < flow.path->size()) {
      (*flow.path)[next_hop]->arrive(flow, next_hop, seg.bytes, seg.tail_ps);
    } else {
      flow.listener->flow_finished(flow);  // its last segment has arrived
    }
  }
}

void Channel::start_service(std::uint64_t now) {
  std::deque<Ready>& ready = queues().ready;
  if (ready.empty()) return;
  Ready next = ready.front();
  ready.pop_front();
  Flow& flow = *next.flow;
  Flow::Hop& state = flow.hops[next.hop];
  const std::uint64_t chunk = std::min(flow.segment, state.bytes_waiting);
  state.bytes_waiting -= chunk;
  Bandwidth rate = params_.bandwidth;
  if (flow.rate_cap.bytes_per_s != 0 && flow.rate_cap.bytes_per_s < rate.bytes_per_s) rate = flow.rate_cap;
  const Time serialize = rate.transfer_time(chunk);
  // Cut-through: it cannot end before its tail has come in from the last hop.
  std::uint64_t end = now + serialize.ps;
  if (next.hop > 0) {
    end = std::max(end, state.tails.front());
    state.tails.pop_front();
  }
  serving_ = true;
  in_service_ = InFlight{next.flow, next.hop, chunk, end, end + params_.latency.ps};
  if (next.hop + 1 < flow.path->size()) {
    // Its head goes on to the next channel now.
    queues().delay_line.push_back(InFlight{next.flow, next.hop, chunk, now + params_.latency.ps, end + params_.latency.ps});
  }
  bytes_carried_ += chunk;
  busy_ += Time{end - now};
}

}  // namespace hcclsim
