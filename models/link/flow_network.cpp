#include "models/link/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hcclsim {

namespace {
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();  // a flow not in the heap of drains
constexpr double kPsPerS = 1e12;
// Components held by at most this many channels are tried for an equal split first.
constexpr std::size_t kFewSharedChannels = 4;

// Picoseconds to drain `bytes` at `rate` bytes/s, rounded up. Exact in
// integers when both are whole numbers (a flow that never shared its
// channels ends exactly where Bandwidth::transfer_time says).
// Saturates at kTimeLimit (a run that reaches it is refused) rather than
// wrapping around 64 bits.
std::uint64_t drain_ps(double bytes, double rate) {
  if (bytes <= 0) return 0;
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (bytes < kExact && rate < kExact && bytes == std::floor(bytes) && rate == std::floor(rate)) {
    using u128 = unsigned __int128;
    const auto b = static_cast<std::uint64_t>(bytes);
    const auto r = static_cast<std::uint64_t>(rate);
    const u128 num = static_cast<u128>(b) * 1000000000000ULL;
    return static_cast<std::uint64_t>(std::min<u128>((num + r - 1) / r, kTimeLimit.ps));
  }
  const double ps = std::ceil(bytes * kPsPerS / rate);
  return ps < static_cast<double>(kTimeLimit.ps) ? static_cast<std::uint64_t>(ps) : kTimeLimit.ps;
}
}  // namespace

FlowNetwork::FlowNetwork(sc_core::sc_module_name name, WakeClock& clock, FlowBatching batching)
    : sc_core::sc_module(name), batching_(batching), deferred_at_(kNever), clock_(clock) {
  if (batching_.quantum_ps == 0) batching_.large_component = 0;  // no quantum: every change solved at once
}

void FlowNetwork::add_channel(Channel& channel) {
  channel.set_index(static_cast<std::uint32_t>(links_.size()));
  Link link;
  link.channel = &channel;
  link.capacity = channel.params().bandwidth.bytes_per_s;
  link.latency_ps = channel.params().latency.ps;
  links_.push_back(std::move(link));
}

void FlowNetwork::reread_channels() {
  for (Link& link : links_) {
    link.capacity = link.channel->params().bandwidth.bytes_per_s;
    link.latency_ps = link.channel->params().latency.ps;
  }
}

void FlowNetwork::start_flow(Flow& flow) {
  ++in_flight_;
  starting_.push_back(&flow);
  // Solved in the clock's next delta round, once for all flows starting in
  // this one.
  if (!running_ && !delta_asked_) {
    delta_asked_ = true;
    clock_.wake_delta(this);
  }
}

void FlowNetwork::on_delta() {
  delta_asked_ = false;
  run();
}

void FlowNetwork::on_clock(std::uint64_t at) {
  if (at != next_wake_) return;  // a wake-up replaced by an earlier one
  next_wake_ = kNever;
  run();
}

void FlowNetwork::place(std::uint32_t pos, const Drain& drain) {
  drains_[pos] = drain;
  drain.flow->fluid.heap_pos = pos;
}

void FlowNetwork::sift_up(std::uint32_t pos) {
  const Drain drain = drains_[pos];
  while (pos > 0) {
    const std::uint32_t parent = (pos - 1) / 2;
    if (!earlier(drain, drains_[parent])) break;
    place(pos, drains_[parent]);
    pos = parent;
  }
  place(pos, drain);
}

void FlowNetwork::sift_down(std::uint32_t pos) {
  const Drain drain = drains_[pos];
  const auto n = static_cast<std::uint32_t>(drains_.size());
  for (;;) {
    std::uint32_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && earlier(drains_[child + 1], drains_[child])) ++child;
    if (!earlier(drains_[child], drain)) break;
    place(pos, drains_[child]);
    pos = child;
  }
  place(pos, drain);
}

void FlowNetwork::set_drain(Flow& flow, std::uint64_t at) {
  flow.fluid.drain_at = at;
  flow.fluid.drain_seq = event_seq_++;
  const Drain drain{at, flow.fluid.drain_seq, &flow};
  if (flow.fluid.heap_pos == kNone) {
    drains_.push_back(drain);
    flow.fluid.heap_pos = static_cast<std::uint32_t>(drains_.size() - 1);
    sift_up(flow.fluid.heap_pos);
  } else {
    // Later than before (a slower rate or a later sequence number) or earlier.
    drains_[flow.fluid.heap_pos] = drain;
    sift_up(flow.fluid.heap_pos);
    sift_down(flow.fluid.heap_pos);
  }
}

void FlowNetwork::remove_drain(Flow& flow) {
  const std::uint32_t pos = flow.fluid.heap_pos;
  flow.fluid.heap_pos = kNone;
  const Drain last = drains_.back();
  drains_.pop_back();
  if (last.flow == &flow) return;
  place(pos, last);
  sift_up(pos);
  sift_down(last.flow->fluid.heap_pos);
}

void FlowNetwork::run() {
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  running_ = true;
  if (deferred_at_ <= now) {
    // The quantum has come: the deferred components are solved with the rest.
    for (const std::uint32_t link : deferred_) {
      links_[link].deferred = false;
      touch(link);
    }
    deferred_.clear();
    deferred_at_ = kNever;
  }
  for (;;) {
    bool work = false;
    // Drains and arrivals due now, in the order they were scheduled.
    for (;;) {
      const Drain* drain = !drains_.empty() && drains_.front().at <= now ? &drains_.front() : nullptr;
      const Arrival* arrival = !arrivals_.empty() && arrivals_.top().at <= now ? &arrivals_.top() : nullptr;
      if (drain == nullptr && arrival == nullptr) break;
      work = true;
      if (drain != nullptr && (arrival == nullptr || drain->seq < arrival->seq)) {
        Flow& flow = *drain->flow;
        remove_drain(flow);
        drained(flow, now);
      } else {
        Flow& flow = *arrival->flow;
        arrivals_.pop();
        ++events_;
        --in_flight_;
        flow.listener->flow_finished(flow);
      }
    }
    if (!starting_.empty()) {
      for (Flow* flow : starting_) begin(*flow, now);
      starting_.clear();
      work = true;
    }
    if (!dirty_.empty()) {
      recompute(now);
      work = true;
    }
    if (!work) break;
  }
  running_ = false;
  if (in_flight_ == 0) report_busy_periods();
  std::uint64_t next = kNever;
  if (!drains_.empty()) next = drains_.front().at;
  if (!arrivals_.empty()) next = std::min(next, arrivals_.top().at);
  next = std::min(next, deferred_at_);
  // Only an earlier wake-up needs a new request (a later one finds nothing due).
  if (next < next_wake_) {
    next_wake_ = next;
    clock_.wake(this, next);
  }
}

void FlowNetwork::report_busy_periods() {
  for (const std::uint32_t index : unreported_) {
    Link& link = links_[index];
    link.channel->account_busy_period(link.busy_bytes, Time{link.busy_ps}, link.busy_peak);
    link.busy_ps = 0;
    link.busy_bytes = 0;
    link.busy_peak = 0;
    link.unreported = false;
  }
  unreported_.clear();
}

void FlowNetwork::touch(std::uint32_t link) {
  if (links_[link].dirty) return;
  links_[link].dirty = true;
  dirty_.push_back(link);
}

void FlowNetwork::begin(Flow& flow, std::uint64_t now) {
  Flow::Fluid& f = flow.fluid;
  const std::size_t hops = flow.path->size();
  f.seq = ++flow_seq_;
  f.remaining = static_cast<double>(flow.bytes);
  f.rate = 0;
  f.since_ps = now;
  f.heap_pos = kNone;
  f.draining = true;
  if (f.links_of != flow.path) {
    f.links_of = flow.path;
    f.latency_ps = 0;
    f.path_bound = kNever;
    f.slot.resize(hops);
    f.links.resize(hops);
    for (std::size_t h = 0; h < hops; ++h) {
      const std::uint32_t index = (*flow.path)[h]->index();
      f.links[h] = index;
      const Link& link = links_[index];
      f.path_bound = std::min(f.path_bound, link.capacity);
      f.latency_ps += link.latency_ps;
    }
  }
  f.bound = std::min(f.path_bound, flow.rate_cap.bytes_per_s != 0 ? flow.rate_cap.bytes_per_s : kNever);
  for (std::size_t h = 0; h < hops; ++h) {
    const std::uint32_t index = f.links[h];
    Link& link = links_[index];
    if (link.flows.empty()) link.busy_since = now;
    f.slot[h] = static_cast<std::uint32_t>(link.flows.size());
    link.flows.push_back(Member{&flow, static_cast<std::uint32_t>(h)});
    link.bound_sum += f.bound;
    link.busy_bytes += flow.bytes;
    link.busy_peak = std::max(link.busy_peak, static_cast<std::uint32_t>(link.flows.size()));
    touch(index);
  }
}

void FlowNetwork::drained(Flow& flow, std::uint64_t now) {
  ++events_;
  Flow::Fluid& f = flow.fluid;
  f.draining = false;
  f.rate = 0;
  for (std::size_t h = 0; h < f.links.size(); ++h) {
    const std::uint32_t index = f.links[h];
    Link& link = links_[index];
    // O(1) removal: the last member takes this one's place.
    const std::uint32_t slot = f.slot[h];
    const Member last = link.flows.back();
    link.flows[slot] = last;
    last.flow->fluid.slot[last.hop] = slot;
    link.flows.pop_back();
    link.bound_sum -= f.bound;
    if (link.flows.empty()) {
      // Counted here and handed to the channel once the network is idle
      // (reading the channel on every idle link was a cache miss a drain).
      link.busy_ps += now - link.busy_since;
      if (!link.unreported) {
        link.unreported = true;
        unreported_.push_back(index);
      }
    } else {
      touch(index);
    }
  }
  if (f.latency_ps == 0) {
    ++events_;
    --in_flight_;
    flow.listener->flow_finished(flow);
  } else {
    arrivals_.push(Arrival{now + f.latency_ps, event_seq_++, &flow});
  }
}

// Every component of flows that a changed link can reach through links that
// can fill is solved again; the others keep their rates.
void FlowNetwork::recompute(std::uint64_t now) {
  ++epoch_;
  // The dirty list may not grow while it is walked (solving changes no membership).
  for (std::size_t i = 0; i < dirty_.size(); ++i) {
    Link& seed = links_[dirty_[i]];
    seed.dirty = false;
    if (!on_quantum(now) && seed.large_until == next_quantum(now)) {
      // Part of a component found large since the last quantum: collecting
      // it again on every start and drain would cost what the deferral saves.
      if (!seed.deferred) {
        seed.deferred = true;
        deferred_.push_back(dirty_[i]);
      }
      deferred_at_ = std::min(deferred_at_, next_quantum(now));
      continue;
    }
    // A link that could not fill before this change and cannot now couples
    // no one: its flows already solved keep their rates for all it did (a
    // change that reaches them otherwise dirties a link of theirs that can
    // fill, or one that could). Only a flow new on it (no rate yet) is solved.
    // (What it could do is noted once the link is through: a link left
    // for the next quantum is gone through again then, as now.)
    const bool coupling_unchanged = !seed.can_fill() && !seed.could_fill;
    bool left_for_quantum = false;
    for (std::size_t m = 0; m < seed.flows.size(); ++m) {
      Flow* flow = seed.flows[m].flow;
      if (flow->fluid.mark == epoch_) continue;
      if (coupling_unchanged && flow->fluid.rate != 0) continue;
      collect(*flow);
      if (batching_.large_component != 0 && comp_flows_.size() >= batching_.large_component) {
        // Events on its links until the next quantum are left for it too.
        const std::uint64_t next = next_quantum(now);
        for (const std::uint32_t index : comp_links_) links_[index].large_until = next;
        seed.large_until = next;
        if (!on_quantum(now)) {
          // Left for the next quantum (the whole component stays marked).
          if (!seed.deferred) {
            seed.deferred = true;
            deferred_.push_back(dirty_[i]);
          }
          deferred_at_ = std::min(deferred_at_, next);
          left_for_quantum = true;
          continue;
        }
      }
      solve(now);
    }
    if (!left_for_quantum) seed.could_fill = seed.can_fill();
  }
  dirty_.clear();
}

// The component of `seed`: flows joined through links that can fill.
void FlowNetwork::collect(Flow& seed) {
  comp_flows_.clear();
  comp_links_.clear();
  seed.fluid.mark = epoch_;
  stack_.push_back(&seed);
  while (!stack_.empty()) {
    Flow* flow = stack_.back();
    stack_.pop_back();
    comp_flows_.push_back(flow);
    for (const std::uint32_t index : flow->fluid.links) {
      Link& link = links_[index];
      if (!link.can_fill()) continue;
      if (link.mark == epoch_) continue;
      link.mark = epoch_;
      comp_links_.push_back(index);
      for (const Member& m : link.flows) {
        if (m.flow->fluid.mark == epoch_) continue;
        m.flow->fluid.mark = epoch_;
        stack_.push_back(m.flow);
      }
    }
  }
}

// The component just collected, solved by progressive filling
// (models/link/max_min): its links that can fill are the channels (by
// index, so that equal shares are taken in a fixed order), each flow held
// to its bound.
void FlowNetwork::solve(std::uint64_t now) {
  if (comp_links_.empty()) {
    // One flow (the search crosses only links that can fill): its bound, as
    // the filling would give it, without setting the filling up.
    apply_rate(*comp_flows_.front(), static_cast<double>(comp_flows_.front()->fluid.bound), now);
    return;
  }
  if (comp_links_.size() <= kFewSharedChannels && solve_shared_channels(now)) return;
  std::sort(comp_links_.begin(), comp_links_.end());
  DenseFlows& dense = solver_.work().dense;
  dense.capacity.resize(comp_links_.size());
  for (std::uint32_t k = 0; k < comp_links_.size(); ++k) {
    Link& link = links_[comp_links_[k]];
    link.local = k;
    dense.capacity[k] = static_cast<double>(link.capacity);
  }
  dense.first.assign(1, 0);
  dense.slot.clear();
  limit_.resize(comp_flows_.size());
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const Flow::Fluid& f = comp_flows_[i]->fluid;
    for (const std::uint32_t index : f.links) {
      const Link& link = links_[index];
      if (link.can_fill()) dense.slot.push_back(static_cast<int>(link.local));
    }
    dense.first.push_back(dense.slot.size());
    limit_[i] = static_cast<double>(f.bound);
  }
  fill_progressively(solver_.work(), dense, limit_, {});
  const std::vector<double>& shares = solver_.work().out;
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) apply_rate(*comp_flows_[i], shares[i], now);
}

// A component whose flows all cross the same few channels that can fill,
// each once, none bounded below an equal split: the filling's first level
// is the least capacity / flows (a channel's room over its load, a sum of
// ones), where every flow freezes, so each gets exactly that, without
// setting the filling up (a batch of thousands of RDMA writes through one
// NIC, solved thousands of times, spent most of its run there). False when
// the shape is another: the filling decides.
bool FlowNetwork::solve_shared_channels(std::uint64_t now) {
  const double flows = static_cast<double>(comp_flows_.size());
  double share = kNoLimit;
  for (const std::uint32_t index : comp_links_) {
    const Link& link = links_[index];
    if (link.flows.size() != comp_flows_.size()) return false;
    share = std::min(share, static_cast<double>(link.capacity) / flows);
  }
  for (const Flow* flow : comp_flows_) {
    const Flow::Fluid& f = flow->fluid;
    if (static_cast<double>(f.bound) < share) return false;
    std::size_t crossings = 0;
    for (const std::uint32_t hop : f.links) crossings += links_[hop].can_fill() ? 1 : 0;
    if (crossings != comp_links_.size()) return false;
    for (const std::uint32_t index : comp_links_) {
      if (std::count(f.links.begin(), f.links.end(), index) != 1) return false;
    }
  }
  for (Flow* flow : comp_flows_) apply_rate(*flow, share, now);
  return true;
}

// A new rate takes effect now; a flow whose rate did not change keeps its drain event.
void FlowNetwork::apply_rate(Flow& flow, double rate, std::uint64_t now) {
  Flow::Fluid& f = flow.fluid;
  if (rate == f.rate) return;
  if (f.rate > 0) {
    f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.since_ps) / kPsPerS);
  }
  f.since_ps = now;
  f.rate = rate;
  set_drain(flow, now + drain_ps(f.remaining, f.rate));
}

}  // namespace hcclsim
