#include "models/link/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hcclsim {

namespace {
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
constexpr double kPsPerS = 1e12;

// Picoseconds to drain `bytes` at `rate` bytes/s, rounded up. Exact in
// integers when both are whole numbers (a flow that never shared its
// channels ends exactly where Bandwidth::transfer_time says).
std::uint64_t drain_ps(double bytes, double rate) {
  if (bytes <= 0) return 0;
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (bytes < kExact && rate < kExact && bytes == std::floor(bytes) && rate == std::floor(rate)) {
    using u128 = unsigned __int128;
    const auto b = static_cast<std::uint64_t>(bytes);
    const auto r = static_cast<std::uint64_t>(rate);
    const u128 num = static_cast<u128>(b) * 1000000000000ULL;
    return static_cast<std::uint64_t>((num + r - 1) / r);
  }
  return static_cast<std::uint64_t>(std::ceil(bytes * kPsPerS / rate));
}
}  // namespace

FlowNetwork::FlowNetwork(sc_core::sc_module_name name) : sc_core::sc_module(name), notified_at_(kNever) {
  SC_HAS_PROCESS(FlowNetwork);
  SC_METHOD(run);
  sensitive << wake_;
  dont_initialize();
}

void FlowNetwork::add_channel(Channel& channel) {
  channel.set_index(static_cast<std::uint32_t>(links_.size()));
  Link link;
  link.channel = &channel;
  link.capacity = channel.params().bandwidth.bytes_per_s;
  links_.push_back(std::move(link));
}

void FlowNetwork::start_flow(Flow& flow) {
  starting_.push_back(&flow);
  // Solved in this network's own process, once for all flows starting in
  // this delta cycle.
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  if (!running_ && notified_at_ != now) {
    notified_at_ = now;
    wake_.notify(sc_core::SC_ZERO_TIME);
  }
}

void FlowNetwork::schedule(Event e) {
  e.seq = event_seq_++;
  events_queue_.push(e);
}

void FlowNetwork::run() {
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  notified_at_ = kNever;
  running_ = true;
  for (;;) {
    bool work = false;
    while (!events_queue_.empty() && events_queue_.top().at <= now) {
      const Event e = events_queue_.top();
      events_queue_.pop();
      Flow& flow = *e.flow;
      if (e.kind == Kind::Drained) {
        if (!flow.fluid.draining || flow.fluid.token != e.token) continue;  // its rate changed since
        drained(flow, now);
      } else {
        ++events_;
        flow.listener->flow_finished(flow);
      }
      work = true;
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
  if (!events_queue_.empty()) {
    notified_at_ = events_queue_.top().at;
    wake_.notify(sc_core::sc_time::from_value(notified_at_ - now));
  }
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
  f.token = 0;
  f.draining = true;
  f.latency_ps = 0;
  f.bound = flow.rate_cap.bytes_per_s != 0 ? flow.rate_cap.bytes_per_s : kNever;
  for (const Channel* ch : *flow.path) {
    f.bound = std::min(f.bound, ch->params().bandwidth.bytes_per_s);
    f.latency_ps += ch->params().latency.ps;
  }
  f.slot.resize(hops);
  for (std::size_t h = 0; h < hops; ++h) {
    Channel* ch = (*flow.path)[h];
    Link& link = links_[ch->index()];
    if (link.flows.empty()) link.busy_since = now;
    f.slot[h] = static_cast<std::uint32_t>(link.flows.size());
    link.flows.push_back(Member{&flow, static_cast<std::uint32_t>(h)});
    link.bound_sum += f.bound;
    ch->account(flow.bytes, Time{});
    touch(ch->index());
  }
}

void FlowNetwork::drained(Flow& flow, std::uint64_t now) {
  ++events_;
  Flow::Fluid& f = flow.fluid;
  f.draining = false;
  f.token = 0;
  f.rate = 0;
  for (std::size_t h = 0; h < flow.path->size(); ++h) {
    const std::uint32_t index = (*flow.path)[h]->index();
    Link& link = links_[index];
    // O(1) removal: the last member takes this one's place.
    const std::uint32_t slot = f.slot[h];
    const Member last = link.flows.back();
    link.flows[slot] = last;
    last.flow->fluid.slot[last.hop] = slot;
    link.flows.pop_back();
    link.bound_sum -= f.bound;
    if (link.flows.empty()) {
      link.channel->account(0, Time{now - link.busy_since});
    } else {
      touch(index);
    }
  }
  if (f.latency_ps == 0) {
    ++events_;
    flow.listener->flow_finished(flow);
  } else {
    schedule(Event{now + f.latency_ps, 0, &flow, 0, Kind::Arrived});
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
    for (std::size_t m = 0; m < seed.flows.size(); ++m) {
      Flow* flow = seed.flows[m].flow;
      if (flow->fluid.mark == epoch_) continue;
      collect(*flow);
      solve(now);
    }
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
    for (const Channel* ch : *flow->path) {
      Link& link = links_[ch->index()];
      if (!link.can_fill() || link.mark == epoch_) continue;
      link.mark = epoch_;
      comp_links_.push_back(ch->index());
      for (const Member& m : link.flows) {
        if (m.flow->fluid.mark == epoch_) continue;
        m.flow->fluid.mark = epoch_;
        stack_.push_back(m.flow);
      }
    }
  }
}

void FlowNetwork::freeze(Flow& flow, double rate) {
  flow.fluid.new_rate = rate;
  flow.fluid.frozen = true;
  for (const Channel* ch : *flow.path) {
    const std::uint32_t index = ch->index();
    Link& link = links_[index];
    if (!link.can_fill()) continue;
    link.left = std::max(0.0, link.left - rate);
    if (--link.unfrozen > 0) {
      shares_.push_back(Share{link.left / link.unfrozen, index});
      std::push_heap(shares_.begin(), shares_.end(), std::greater<Share>());
    }
  }
}

// Progressive filling over the component just collected.
void FlowNetwork::solve(std::uint64_t now) {
  // Flows by limit (then start order): the next flow to stop at its own limit.
  std::sort(comp_flows_.begin(), comp_flows_.end(), [](const Flow* a, const Flow* b) {
    return a->fluid.bound != b->fluid.bound ? a->fluid.bound < b->fluid.bound : a->fluid.seq < b->fluid.seq;
  });
  for (Flow* flow : comp_flows_) flow->fluid.frozen = false;
  shares_.clear();
  // Links by index, so that equal shares are taken in a fixed order.
  std::sort(comp_links_.begin(), comp_links_.end());
  for (const std::uint32_t index : comp_links_) {
    Link& link = links_[index];
    link.left = static_cast<double>(link.capacity);
    link.unfrozen = static_cast<std::uint32_t>(link.flows.size());
    shares_.push_back(Share{link.left / link.unfrozen, index});
  }
  std::make_heap(shares_.begin(), shares_.end(), std::greater<Share>());
  std::size_t next = 0;  // into comp_flows_, by limit
  for (;;) {
    while (next < comp_flows_.size() && comp_flows_[next]->fluid.frozen) ++next;
    if (next == comp_flows_.size()) break;
    // The lowest share still current (an entry is stale once its link changed).
    while (!shares_.empty()) {
      const Share& top = shares_.front();
      const Link& link = links_[top.link];
      if (link.unfrozen > 0 && top.level == link.left / link.unfrozen) break;
      std::pop_heap(shares_.begin(), shares_.end(), std::greater<Share>());
      shares_.pop_back();
    }
    Flow& limited = *comp_flows_[next];
    const double limit = static_cast<double>(limited.fluid.bound);
    if (shares_.empty() || limit <= shares_.front().level) {
      freeze(limited, limit);
      continue;
    }
    const Share top = shares_.front();
    std::pop_heap(shares_.begin(), shares_.end(), std::greater<Share>());
    shares_.pop_back();
    Link& full = links_[top.link];
    for (std::size_t m = 0; m < full.flows.size(); ++m) {
      Flow& flow = *full.flows[m].flow;
      if (!flow.fluid.frozen) freeze(flow, top.level);
    }
  }
  // New rates take effect now; a flow whose rate did not change keeps its drain event.
  for (Flow* flow : comp_flows_) {
    Flow::Fluid& f = flow->fluid;
    if (f.new_rate == f.rate) continue;
    if (f.rate > 0) {
      f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.since_ps) / kPsPerS);
    }
    f.since_ps = now;
    f.rate = f.new_rate;
    f.token = ++token_seq_;
    schedule(Event{now + drain_ps(f.remaining, f.rate), 0, flow, f.token, Kind::Drained});
  }
}

}  // namespace hcclsim
