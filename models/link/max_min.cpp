#include "models/link/max_min.h"

#include <algorithm>

namespace hcclsim {

// The limits are
// often all equal (then already in order) or a few values (a flow's cap
// or its narrowest channel, weighted): then a counting pass per value,
// which on tens of thousands of flows costs a tenth of a stable sort.
void order_by_limit(MaxMinShares::Work& w, const std::vector<double>& limit) {
  const std::size_t flows = limit.size();
  std::vector<std::size_t>& by_limit = w.by_limit;
  by_limit.resize(flows);
  if (std::is_sorted(limit.begin(), limit.end())) {
    for (std::size_t i = 0; i < flows; ++i) by_limit[i] = i;
    return;
  }
  constexpr std::size_t kFewValues = 8;
  std::vector<double>& values = w.limit_values;
  values.clear();
  for (const double l : limit) {
    if (std::find(values.begin(), values.end(), l) != values.end()) continue;
    if (values.size() == kFewValues) break;
    values.push_back(l);
  }
  if (values.size() < kFewValues) {
    std::sort(values.begin(), values.end());
    std::size_t at = 0;
    for (const double v : values) {
      for (std::size_t i = 0; i < flows; ++i) {
        if (limit[i] == v) by_limit[at++] = i;
      }
    }
    return;
  }
  for (std::size_t i = 0; i < flows; ++i) by_limit[i] = i;
  std::stable_sort(by_limit.begin(), by_limit.end(), [&](std::size_t a, std::size_t b) { return limit[a] < limit[b]; });
}

namespace {

// fill_progressively's first round, for a solve of which only each
// group's slowest share is wanted, without the per-channel lists and the
// heap: the level is the least limit and the least room / load of a
// loaded channel (w.unfrozen, w.load, w.room as the filling starts); if a
// flow of every group freezes at it (its limit, or a channel it crosses
// full), every group's slowest share is that level and the filling would
// end there, giving every flow the level: w.out is set so and true
// returned. Most of DirectFullmesh's solves end so (CloudMatrix384: 27 of
// 32), where the lists cost a fifth of the solve.
bool every_group_in_first_round(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                                SlowestOfGroups only) {
  const std::size_t flows = in.first.size() - 1;
  const std::size_t slots = in.capacity.size();
  double level = kNoLimit;
  for (std::size_t i = 0; i < flows; ++i) level = std::min(level, limit[i]);
  for (std::size_t k = 0; k < slots; ++k) {
    if (w.unfrozen[k] > 0) level = std::min(level, w.room[k] / w.load[k]);
  }
  const double slack = level * 1e-12;
  std::vector<char>& full = w.freezes;  // per channel here
  full.assign(slots, 0);
  for (std::size_t k = 0; k < slots; ++k) {
    full[k] = w.unfrozen[k] > 0 && w.room[k] / w.load[k] <= level + slack ? 1 : 0;
  }
  std::vector<char>& group_frozen = w.group_frozen;
  group_frozen.assign(only.groups, 0);
  std::size_t groups_left = only.groups;
  for (std::size_t i = 0; i < std::min(only.flows, flows) && groups_left > 0; ++i) {
    if (group_frozen[i % only.groups] != 0) continue;
    bool freezes = limit[i] <= level + slack;
    for (std::size_t j = in.first[i]; j < in.first[i + 1] && !freezes; ++j) {
      freezes = full[static_cast<std::size_t>(in.slot[j])] != 0;
    }
    if (freezes) {
      group_frozen[i % only.groups] = 1;
      --groups_left;
    }
  }
  if (groups_left > 0) return false;
  w.out.assign(flows, level);
  return true;
}

}  // namespace

void fill_progressively(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                        const std::vector<double>& weight, SlowestOfGroups only) {
  auto weight_of = [&weight](std::size_t i) { return weight.empty() ? 1.0 : weight[i]; };
  const bool one_weight =
      weight.empty() || std::all_of(weight.begin(), weight.end(), [&weight](double x) { return x == weight.front(); });
  const std::size_t flows = in.first.size() - 1;
  const std::size_t slots = in.capacity.size();
  std::vector<int>& unfrozen = w.unfrozen;  // per channel: flows not yet frozen
  unfrozen.assign(slots, 0);
  std::vector<double>& load = w.load;  // their summed weights
  load.assign(slots, 0.0);
  std::vector<double>& room = w.room;  // capacity left
  room.assign(in.capacity.begin(), in.capacity.end());
  {
    // (Plain pointers: through the vectors every hop reloaded them.)
    const std::size_t* hops = in.first.data();
    const int* slot = in.slot.data();
    int* count = unfrozen.data();
    double* summed = load.data();
    for (std::size_t i = 0; i < flows; ++i) {
      const double wi = weight_of(i);
      for (std::size_t j = hops[i]; j < hops[i + 1]; ++j) {
        ++count[slot[j]];
        summed[slot[j]] += wi;
      }
    }
  }
  if (only.groups > 0 && every_group_in_first_round(w, in, limit, only)) return;
  // The flows crossing each channel, in flow order (compressed rows).
  std::vector<std::size_t>& first = w.first;
  first.assign(slots + 1, 0);
  for (std::size_t k = 0; k < slots; ++k) first[k + 1] = first[k] + static_cast<std::size_t>(unfrozen[k]);
  std::vector<std::size_t>& crossing = w.crossing;
  crossing.resize(first[slots]);
  {
    std::vector<std::size_t>& fill = w.fill;
    fill.assign(first.begin(), first.end() - 1);
    const std::size_t* hops = in.first.data();
    const int* slot = in.slot.data();
    std::size_t* next = fill.data();
    std::size_t* listed = crossing.data();
    for (std::size_t i = 0; i < flows; ++i) {
      for (std::size_t j = hops[i]; j < hops[i + 1]; ++j) listed[next[slot[j]]++] = i;
    }
  }
  order_by_limit(w, limit);
  const std::vector<std::size_t>& by_limit = w.by_limit;
  LevelHeap& heap = w.heap;
  heap.reset(slots);
  for (std::size_t k = 0; k < slots; ++k) {
    if (unfrozen[k] > 0) heap.push(k, room[k] / load[k]);
  }
  std::size_t next_limit = 0;  // by_limit[next_limit..] may still be unfrozen
  std::vector<double>& out = w.out;
  out.assign(flows, 0.0);
  std::vector<char>& frozen = w.frozen;
  frozen.assign(flows, 0);
  std::vector<char>& freezes = w.freezes;  // listed in `freezing` this round
  freezes.assign(flows, 0);
  std::size_t remaining = flows;
  std::vector<std::size_t>& freezing = w.freezing;  // this round's, taken in flow order (but for one weight)
  freezing.clear();
  std::vector<std::size_t>& changed = w.changed;
  changed.clear();
  std::vector<std::uint32_t>& changed_in = w.changed_in;  // the round a channel was last listed in `changed` (1-based)
  changed_in.assign(slots, 0);
  std::uint32_t round = 0;
  std::vector<char>& group_frozen = w.group_frozen;
  group_frozen.assign(only.groups, 0);
  std::size_t groups_left = only.groups;
  // (Plain pointers in the loops below: through the vectors, each char
  // written made every other vector be reloaded.)
  char* const is_frozen = frozen.data();
  char* const marked = freezes.data();
  const auto freeze_later = [&](std::size_t i) {
    if (is_frozen[i] == 0 && marked[i] == 0) {
      marked[i] = 1;
      freezing.push_back(i);
    }
  };
  while (remaining > 0) {
    ++round;
    while (next_limit < by_limit.size() && frozen[by_limit[next_limit]]) ++next_limit;
    double level = next_limit < by_limit.size() ? limit[by_limit[next_limit]] : kNoLimit;
    if (!heap.empty()) level = std::min(level, heap.top_level());
    const double slack = level * 1e-12;
    freezing.clear();
    for (std::size_t k = next_limit; k < by_limit.size() && limit[by_limit[k]] <= level + slack; ++k) {
      freeze_later(by_limit[k]);
    }
    // Every channel full at this level: each of its unfrozen flows freezes,
    // so the channel leaves the heap for good.
    while (!heap.empty() && heap.top_level() <= level + slack) {
      const std::size_t k = heap.pop();
      for (std::size_t j = first[k]; j < first[k + 1]; ++j) freeze_later(crossing[j]);
    }
    if (one_weight) {
      // (Taken as found: each takes the same from every channel it
      // crosses, the level times the one weight, so the rooms and loads
      // come out the same in any order.)
    } else if (freezing.size() > flows / 8) {  // many: a pass over the marks puts them in order
      freezing.clear();
      for (std::size_t i = 0; i < flows; ++i) {
        if (freezes[i] != 0) freezing.push_back(i);
      }
    } else {
      std::sort(freezing.begin(), freezing.end());
    }
    changed.clear();
    const std::size_t* const hops = in.first.data();
    const int* const slot = in.slot.data();
    double* const room_of = room.data();
    double* const load_of = load.data();
    int* const count = unfrozen.data();
    std::uint32_t* const listed_in = changed_in.data();
    double* const share = out.data();
    for (const std::size_t i : freezing) {
      is_frozen[i] = 1;
      marked[i] = 0;
      share[i] = level;
      --remaining;
      if (only.groups > 0 && i < only.flows && group_frozen[i % only.groups] == 0) {
        group_frozen[i % only.groups] = 1;
        --groups_left;
      }
      const double wi = weight_of(i);
      const double taken = wi * level;
      for (std::size_t j = hops[i]; j < hops[i + 1]; ++j) {
        const auto k = static_cast<std::size_t>(slot[j]);
        room_of[k] = std::max(0.0, room_of[k] - taken);
        load_of[k] = --count[k] == 0 ? 0.0 : load_of[k] - wi;
        if (listed_in[k] != round) {
          listed_in[k] = round;
          changed.push_back(k);
        }
      }
    }
    for (const std::size_t k : changed) {
      if (unfrozen[k] > 0) {  // still in the heap: only a channel left with no unfrozen flow was popped
        heap.move(k, room[k] / load[k]);
      } else {
        heap.remove(k);  // (if not popped above)
      }
    }
    if (only.groups > 0 && groups_left == 0) {  // every group's slowest share known
      for (std::size_t i = 0; i < flows; ++i) {
        if (frozen[i] == 0) out[i] = level;
      }
      return;
    }
  }
}

void progressive_filling(MaxMinShares::Work& w, const DenseFlows& in, const std::vector<double>& limit,
                         const std::vector<double>& weight, SlowestOfGroups only, bool demand_known) {
  const std::size_t flows = in.first.size() - 1;
  const std::size_t slots = in.capacity.size();
  // A solve that stops once each group's slowest share is known visits
  // few flows past its setup: leaving channels out would cost two more
  // passes over every flow's channels than it saves (a CloudMatrix384
  // AlltoAll point: 397 M -> 333 M instructions, the same shares).
  if (only.groups > 0) return fill_progressively(w, in, limit, weight, only);
  // (Plain pointers, as in densify: through the vectors every hop reloaded them.)
  const std::size_t* first = in.first.data();
  const int* slot = in.slot.data();
  const double* capacity = in.capacity.data();
  const double* weights = weight.empty() ? nullptr : weight.data();
  std::vector<double>& demand = w.demand;
  if (!demand_known) {
    w.bound.resize(flows);
    w.demand.assign(slots, 0.0);
    add_demand(w, in, limit, weights, 0, flows);
  }
  double* load = demand.data();
  std::vector<int>& kept_as = w.kept_as;
  kept_as.assign(slots, -1);
  DenseFlows& reduced = w.reduced;
  reduced.first.assign(1, 0);
  reduced.slot.clear();
  reduced.capacity.clear();
  for (std::size_t k = 0; k < slots; ++k) {
    if (load[k] > capacity[k] * kFits) {
      kept_as[k] = static_cast<int>(reduced.capacity.size());
      reduced.capacity.push_back(capacity[k]);
    }
  }
  if (reduced.capacity.size() == slots) return fill_progressively(w, in, limit, weight, only);
  if (reduced.capacity.empty()) {  // no channel can fill: every flow runs at its bound
    w.out.assign(w.bound.begin(), w.bound.begin() + static_cast<std::ptrdiff_t>(flows));
    return;
  }
  // Only the flows that cross a kept channel are filled: a flow whose every
  // channel was dropped is held back by nothing but its limit, at which the
  // filling would freeze it without changing any channel (a pairwise step
  // on 1024 A2 NPUs: about half its solves keep no channel at all, and the
  // others leave most flows to their limits).
  std::vector<double>& shares = w.shares;
  shares.resize(flows);
  std::vector<std::size_t>& filled = w.filled;  // the flows filled, in flow order
  filled.clear();
  std::vector<double>& reduced_limit = w.reduced_limit;
  reduced_limit.clear();
  std::vector<double>& reduced_weight = w.reduced_weight;  // empty while every flow counts fully
  reduced_weight.clear();
  reduced.slot.resize(in.slot.size());
  reduced.first.resize(flows + 1);
  const int* kept = kept_as.data();
  int* reduced_slot = reduced.slot.data();
  std::size_t at = 0;
  for (std::size_t i = 0; i < flows; ++i) {
    double narrowest_dropped = 0;
    bool dropped = false;
    const std::size_t from = at;
    for (std::size_t j = first[i]; j < first[i + 1]; ++j) {
      const int k = slot[j];
      if (kept[k] >= 0) {
        reduced_slot[at++] = kept[k];
      } else {
        narrowest_dropped = dropped ? std::min(narrowest_dropped, capacity[k]) : capacity[k];
        dropped = true;
      }
    }
    const double wi = weights == nullptr ? 1.0 : weights[i];
    const double own = dropped ? std::min(limit[i], narrowest_dropped / wi) : limit[i];
    if (at == from) {
      shares[i] = own;
      continue;
    }
    filled.push_back(i);
    reduced_limit.push_back(own);
    if (weights != nullptr) reduced_weight.push_back(wi);
    reduced.first[filled.size()] = at;
  }
  reduced.slot.resize(at);
  reduced.first.resize(filled.size() + 1);
  if (!filled.empty()) fill_progressively(w, reduced, reduced_limit, reduced_weight, only);
  for (std::size_t k = 0; k < filled.size(); ++k) shares[filled[k]] = w.out[k];
  w.out.swap(shares);
}

MaxMinShares::MaxMinShares() : work_(std::make_unique<Work>()) {}
MaxMinShares::~MaxMinShares() = default;
MaxMinShares::MaxMinShares(MaxMinShares&&) noexcept = default;
MaxMinShares& MaxMinShares::operator=(MaxMinShares&&) noexcept = default;

const std::vector<double>& MaxMinShares::solve(const std::vector<const std::vector<int>*>& paths,
                                               const std::vector<double>& limit, const std::vector<double>& capacity,
                                               const std::vector<double>& weight) {
  // Channel state is kept only for the channels some flow crosses, in the
  // order first crossed (`slot_of` maps a channel to its slot).
  Work& w = *work_;
  DenseFlows& dense = w.dense;
  dense.first.assign(1, 0);
  dense.slot.clear();
  dense.capacity.clear();
  if (w.slot_of.size() < capacity.size()) w.slot_of.resize(capacity.size(), -1);
  for (const std::vector<int>* path : paths) {
    for (const int c : *path) {
      int& slot = w.slot_of[static_cast<std::size_t>(c)];
      if (slot < 0) {
        slot = static_cast<int>(dense.capacity.size());
        dense.capacity.push_back(capacity[static_cast<std::size_t>(c)]);
        w.crossed.push_back(c);
      }
      dense.slot.push_back(slot);
    }
    dense.first.push_back(dense.slot.size());
  }
  for (const int c : w.crossed) w.slot_of[static_cast<std::size_t>(c)] = -1;
  w.crossed.clear();
  progressive_filling(w, dense, limit, weight);
  return w.out;
}

std::vector<double> max_min_shares(const std::vector<const std::vector<int>*>& paths, const std::vector<double>& limit,
                                   const std::vector<double>& capacity, const std::vector<double>& weight) {
  MaxMinShares solver;
  return solver.solve(paths, limit, capacity, weight);
}

}  // namespace hcclsim
