// Max-min fair shares by progressive filling: hcclsim's one solver of how
// flows share channels, used by the detailed flow network
// (models/link/flow_network.cpp) and by the estimate (sim/estimate).
//
// The rule: every unfrozen flow's rate rises together; a flow freezes at
// its own limit, or when a channel it crosses is full (its capacity given
// out), at the level reached then. Levels within 1e-12 of each other are
// one level (rounding, not a different bottleneck). Rates, limits and
// capacities are in any one unit the caller picks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/unzeroed_allocator.h"

namespace hcclsim {

// A limit no share reaches.
inline constexpr double kNoLimit = 1e30;

// Flows over channels in dense form: flow i crosses the channels
// slot[first[i]] .. slot[first[i + 1] - 1], each an index into `capacity`.
struct DenseFlows {
  std::vector<std::size_t> first{0};
  // (Sized to the hops, then cut to the slots written: left unzeroed, since
  // zeroing each solve's regrowth was 2% of a 1024-NPU AlltoAll's first point.)
  std::vector<int, UnzeroedAllocator<int>> slot;
  std::vector<double> capacity;
};

// Channels by level (room / load), least on top, ties by channel: a
// binary heap whose entries move in place when a level changes, so that
// it holds each loaded channel once. (Levels are never negative zero or
// NaN, so the least is the same value whatever the order.)
class LevelHeap {
 public:
  // Empty, for channels 0..channels-1 (its arrays reused from the last solve).
  void reset(std::size_t channels) {
    level_.assign(channels, 0.0);
    at_.assign(channels, kOut);
    order_.clear();
  }
  bool empty() const { return order_.empty(); }
  double top_level() const { return level_[order_.front()]; }
  void push(std::size_t channel, double level) {
    level_[channel] = level;
    at_[channel] = order_.size();
    order_.push_back(channel);
    up(order_.size() - 1);
  }
  // The channel on top, taken out.
  std::size_t pop() {
    const std::size_t top = order_.front();
    remove(top);
    return top;
  }
  void remove(std::size_t channel) {
    const std::size_t at = at_[channel];
    if (at == kOut) return;
    at_[channel] = kOut;
    const std::size_t last = order_.back();
    order_.pop_back();
    if (last == channel) return;
    place(at, last);
    down(up(at));
  }
  // A new level for a channel in the heap.
  void move(std::size_t channel, double level) {
    level_[channel] = level;
    down(up(at_[channel]));
  }

 private:
  static constexpr std::size_t kOut = static_cast<std::size_t>(-1);
  bool below(std::size_t a, std::size_t b) const {
    return level_[a] < level_[b] || (level_[a] == level_[b] && a < b);
  }
  void place(std::size_t at, std::size_t channel) {
    order_[at] = channel;
    at_[channel] = at;
  }
  std::size_t up(std::size_t at) {
    const std::size_t channel = order_[at];
    while (at > 0 && below(channel, order_[(at - 1) / 2])) {
      place(at, order_[(at - 1) / 2]);
      at = (at - 1) / 2;
    }
    place(at, channel);
    return at;
  }
  void down(std::size_t at) {
    const std::size_t channel = order_[at];
    for (;;) {
      std::size_t child = 2 * at + 1;
      if (child >= order_.size()) break;
      if (child + 1 < order_.size() && below(order_[child + 1], order_[child])) ++child;
      if (!below(order_[child], channel)) break;
      place(at, order_[child]);
      at = child;
    }
    place(at, channel);
  }
  std::vector<double> level_;
  std::vector<std::size_t> at_;     // channel -> its place in order_, kOut when not there
  std::vector<std::size_t> order_;  // the heap
};

// A solve of which only the slowest share of each group is wanted: flow
// i < `flows` is in group i % `groups` (a form that follows one
// representative per slot takes each slot's slowest read). Progressive
// filling freezes flows slowest first, so once every group has a frozen
// flow its slowest share is known: the filling stops there, and the flows
// still rising are given that level (a bound below their shares). groups
// 0: every share is wanted.
struct SlowestOfGroups {
  std::size_t flows = 0;
  std::size_t groups = 0;
};

// max_min_shares with its working memory kept from solve to solve: a caller
// that solves thousands of small groups (the flow network, RdmaRun) otherwise
// spends more on allocating it than on the solves. The shares returned
// stay valid until the next solve.
class MaxMinShares {
 public:
  MaxMinShares();
  ~MaxMinShares();
  MaxMinShares(MaxMinShares&&) noexcept;
  MaxMinShares& operator=(MaxMinShares&&) noexcept;
  const std::vector<double>& solve(const std::vector<const std::vector<int>*>& paths, const std::vector<double>& limit,
                                   const std::vector<double>& capacity, const std::vector<double>& weight = {});
  struct Work;  // below
  Work& work() { return *work_; }

 private:
  std::unique_ptr<Work> work_;
};

// The solver's working memory: every array of a solve, kept for the next.
// (Public: the estimate's shortcut solves, sim/estimate, set up and read
// it around the filling; the arrays marked theirs below are only theirs.)
struct MaxMinShares::Work {
  DenseFlows dense;        // solve(): the flows over the channels they cross
  std::vector<int> slot_of;  // solve(): a channel's dense slot (-1: none), reset after each solve
  std::vector<int> crossed;
  std::vector<double> bound, demand, reduced_limit, reduced_weight, shares;  // progressive_filling
  std::vector<std::size_t> filled;
  std::vector<int> kept_as;
  DenseFlows reduced;
  std::vector<int> unfrozen;  // fill_progressively
  std::vector<double> load, room;
  std::vector<std::size_t> first, crossing, fill, by_limit, freezing, changed;
  std::vector<char> frozen, freezes;
  std::vector<std::uint32_t> changed_in;
  std::vector<char> group_frozen;  // SlowestOfGroups: a flow of the group has frozen
  std::vector<double> limit_values;  // order_by_limit's distinct limits
  LevelHeap heap;
  std::vector<double> out;  // the shares
  // The estimate's (sim/estimate/estimate.cpp): fill_groups_by_counts' per slot its room, load and room / load; per flow its limit.
  std::vector<double> count_room, count_load, count_level;
  std::vector<double> flow_limit;
  std::vector<double> own_capacity;  // rounds_by_counts': a part's counted channels' capacities
  // Per slot, sized to a solve's hops (grown, never shrunk): densify's and
  // solve_alike_flows' channel, capacity, demand and hops of each slot.
  std::vector<int> slot_scratch;
  std::vector<double> capacity_scratch, demand_scratch;
  std::vector<int> count_scratch;
  void scratch_for(std::size_t hops) {
    if (slot_scratch.size() >= hops) return;
    slot_scratch.resize(hops);
    capacity_scratch.resize(hops);
    demand_scratch.resize(hops);
    count_scratch.resize(hops);
  }
};

// The flows by limit, ties in flow order, into w.by_limit.
void order_by_limit(MaxMinShares::Work& w, const std::vector<double>& limit);

// max_min_shares on dense flows. Progressive filling, as the detailed flow
// model solves the shares: raise every unfrozen flow's rate together; a
// flow freezes at its own limit or when a channel it crosses is full. A
// channel's unfrozen load is the sum of its unfrozen flows' weights.
// Each round takes the fullest channel (the least room / load) from a
// heap and visits only the flows that freeze (found through their
// channels and by limit) and their channels, so that a round costs what
// it changes: a CloudMatrix384 AlltoAll round of 18,000 flows takes over
// a thousand rounds, each freezing a few flows.
// The shares go to w.out; every array is w's, reused from solve to solve.
void fill_progressively(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                        const std::vector<double>& weight, SlowestOfGroups only = {});

// A channel is kept in a solve unless its demand fits with a margin far
// above rounding and far below any share that matters (a tie, demand equal
// to capacity, fills only when its flows reach their bounds anyway).
inline constexpr double kFits = 1 + 1e-9;

// One flow's bound (its limit, and its narrowest channel's capacity / its
// weight), returned, and its demand on its slots [from, to) (at least one;
// weight x bound) added to `load`.
inline double flow_bound_and_demand(double limit, double narrowest, double weight, const int* slot, std::size_t from,
                                    std::size_t to, double* load) {
  const double bound = std::min(limit, narrowest / weight);
  const double wanted = weight * bound;
  for (std::size_t j = from; j < to; ++j) load[slot[j]] += wanted;
  return bound;
}

// Each flow's bound into w.bound and its demand added to w.demand, for
// flows [from, to): progressive_filling's first pass, which densify makes
// as it lists each flow's slots (the hops still in cache). w.bound holds
// the flows, w.demand the slots crossed.
inline void add_demand(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                       const double* weights, std::size_t from, std::size_t to) {
  const std::size_t* first = in.first.data();
  const int* slot = in.slot.data();
  const double* capacity = in.capacity.data();
  double* bound = w.bound.data();
  double* load = w.demand.data();
  for (std::size_t i = from; i < to; ++i) {
    bound[i] = limit[i];
    if (first[i] == first[i + 1]) continue;
    double narrowest = capacity[slot[first[i]]];
    for (std::size_t j = first[i] + 1; j < first[i + 1]; ++j) narrowest = std::min(narrowest, capacity[slot[j]]);
    bound[i] = flow_bound_and_demand(limit[i], narrowest, weights == nullptr ? 1.0 : weights[i], slot, first[i],
                                     first[i + 1], load);
  }
}

// fill_progressively, on the channels that can fill. Most channels of a
// step never do: a flow never runs faster than its bound (its limit, and
// capacity / weight of each channel it crosses), and a channel whose flows
// all at their bounds still fit in it cannot hold any of them back. Such a
// channel is dropped from the solve, its own cap on each flow kept as a
// limit: the constraints left imply the dropped ones, so the shares are the
// same (a pairwise AlltoAll step on 1024 A2 NPUs keeps about 100 spine
// channels of 2,300; the NICs, loaded once each, go).
void progressive_filling(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                         const std::vector<double>& weight, SlowestOfGroups only = {}, bool demand_known = false);

// Max-min fair shares of flows over channels by progressive filling: flow i crosses the channels `paths[i]`
// (indices into `capacity`, bytes per ps) and is held to `limit[i]`; it
// loads each channel with `weight[i]` times its rate (empty: 1).
std::vector<double> max_min_shares(const std::vector<const std::vector<int>*>& paths, const std::vector<double>& limit,
                                   const std::vector<double>& capacity, const std::vector<double>& weight = {});

}  // namespace hcclsim
