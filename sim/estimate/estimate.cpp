#include "sim/estimate/estimate.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>

namespace hcclsim {

namespace {
constexpr double kUnlimited = 1e30;  // bytes per ps: no cap
double ps(Time t) { return static_cast<double>(t.ps); }
double rate(Bandwidth b) { return b.bytes_per_s == 0 ? kUnlimited : static_cast<double>(b.bytes_per_s) / 1e12; }
}  // namespace

StepCosts::StepCosts(const NpuParams& n)
    : launch(ps(n.stream.op_launch)),
      dispatch(ps(n.stream.task_dispatch)),
      record_local(ps(n.notify.record_local)),
      record_remote(ps(n.notify.record_remote)),
      wait(ps(n.notify.wait)),
      sdma_fixed(ps(n.sdma.task_fixed)),
      sdma_read_fixed(ps(n.sdma.read_fixed)),
      copy_rate(rate(n.sdma.copy_bandwidth)),
      reduce_rate(rate(n.sdma.reduce_bandwidth)),
      local_rate(rate(n.local_memory.bandwidth)),
      local_latency(ps(n.local_memory.latency)),
      rdma_post(ps(n.rdma.post)),
      rdma_notify_bytes(static_cast<double>(n.rdma.notify_bytes)),
      aiv_fixed(ps(n.aiv.copy_fixed)),
      aiv_rate(rate(n.aiv.core_bandwidth)),
      flag_write(ps(n.aiv.flag_write)),
      flag_poll(ps(n.aiv.flag_poll)) {}

double StepCosts::local_copy(double bytes, bool reduce) const {
  return sdma_fixed + bytes / std::min(local_rate, sdma_cap(reduce)) + local_latency;
}

EstimateFabric::EstimateFabric(const TopologySpec& spec) : spec_(spec), costs_(spec_.npu), routes_(spec_) {}

PathCost EstimateFabric::path(int from, int to) const {
  // Paths of the same relation (same chip, server, SDMA domain, leaf of
  // each fabric) cost the same in the regular topologies hcclsim builds:
  // look each relation up once.
  std::uint64_t relation = from == to ? 1 : 0;
  relation = relation << 1 | (from / spec_.npus_per_chip == to / spec_.npus_per_chip ? 1 : 0);
  relation = relation << 1 | (server_of(spec_, from) == server_of(spec_, to) ? 1 : 0);
  relation = relation << 1 | (routes_.rdma_between(from, to) ? 1 : 0);
  for (const FabricSpec& f : spec_.fabrics) {
    relation = relation << 1 | (f.leaf_of[static_cast<std::size_t>(from)] == f.leaf_of[static_cast<std::size_t>(to)] ? 1 : 0);
  }
  const auto found = paths_.find(relation);
  if (found != paths_.end()) return found->second;
  PathCost out;
  out.same_chip = from / spec_.npus_per_chip == to / spec_.npus_per_chip;
  if (from == to) {
    out.rate = out.write_rate = costs_.local_rate;
    out.latency = costs_.local_latency;
  } else {
    out.rdma = routes_.rdma_between(from, to);
    out.rate = out.write_rate = kUnlimited;
    for (const int c : routes_.path(from, to)) {
      const ChannelParams& p = spec_.links[static_cast<std::size_t>(c / 2)].params;
      out.rate = std::min(out.rate, rate(p.bandwidth));
      out.write_rate = std::min({out.write_rate, rate(p.bandwidth), rate(p.write_bandwidth)});
      out.latency += ps(p.latency);
    }
  }
  paths_.emplace(relation, out);
  return out;
}

double EstimateFabric::channel_rate(int channel) const {
  const auto c = static_cast<std::size_t>(channel);
  const std::size_t links = 2 * spec_.links.size();
  return c >= links ? costs_.local_rate : rate(spec_.links[c / 2].params.bandwidth);
}

const std::vector<int>& EstimateFabric::route(int from, int to) const {
  const std::uint64_t key = static_cast<std::uint64_t>(from) << 32 | static_cast<std::uint32_t>(to);
  auto found = routed_.find(key);
  if (found == routed_.end()) found = routed_.emplace(key, routes_.path(from, to)).first;
  return found->second;
}

namespace {

// Flows over channels in dense form: flow i crosses the channels
// slot[first[i]] .. slot[first[i + 1] - 1], each an index into `capacity`.
struct DenseFlows {
  std::vector<std::size_t> first{0};
  std::vector<int> slot;
  std::vector<double> capacity;
};

// max_min_shares on dense flows. Progressive filling, as the detailed flow
// model solves the shares: raise every unfrozen flow's rate together; a
// flow freezes at its own limit or when a channel it crosses is full. A
// channel's unfrozen load is the sum of its unfrozen flows' weights.
// Each round scans the channels still loaded for the fullest (their
// room / load kept from when it last changed) and visits only the flows
// that freeze (found through their channels and by limit) and their
// channels, so that tens of thousands of flows solve in milliseconds.
std::vector<double> progressive_filling(const DenseFlows& in, const std::vector<double>& limit,
                                        const std::vector<double>& weight) {
  auto weight_of = [&weight](std::size_t i) { return weight.empty() ? 1.0 : weight[i]; };
  const std::size_t flows = in.first.size() - 1;
  const std::size_t slots = in.capacity.size();
  std::vector<int> unfrozen(slots, 0);   // per channel: flows not yet frozen
  std::vector<double> load(slots, 0.0);  // their summed weights
  std::vector<double> room(in.capacity);  // capacity left
  for (std::size_t i = 0; i < flows; ++i) {
    for (std::size_t j = in.first[i]; j < in.first[i + 1]; ++j) {
      const auto k = static_cast<std::size_t>(in.slot[j]);
      ++unfrozen[k];
      load[k] += weight_of(i);
    }
  }
  // The flows crossing each channel, in flow order (compressed rows).
  std::vector<std::size_t> first(slots + 1, 0);
  for (std::size_t k = 0; k < slots; ++k) first[k + 1] = first[k] + static_cast<std::size_t>(unfrozen[k]);
  std::vector<std::size_t> crossing(first[slots]);
  {
    std::vector<std::size_t> fill(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < flows; ++i) {
      for (std::size_t j = in.first[i]; j < in.first[i + 1]; ++j) crossing[fill[static_cast<std::size_t>(in.slot[j])]++] = i;
    }
  }
  std::vector<std::size_t> by_limit(flows);
  for (std::size_t i = 0; i < flows; ++i) by_limit[i] = i;
  if (!std::is_sorted(limit.begin(), limit.end())) {  // (often all equal: then already in order)
    std::stable_sort(by_limit.begin(), by_limit.end(), [&](std::size_t a, std::size_t b) { return limit[a] < limit[b]; });
  }
  // The level (room / load) of each channel with unfrozen flows, side by
  // side for the scans of every round (at most a few dozen rounds, over a
  // few thousand channels): `level_at[m]` is channel loaded[m]'s, kept from
  // when it last changed. A channel whose flows all froze reads as
  // infinitely far from full until the array is compacted. (The levels
  // are never negative zero or NaN, so the least is the same value in
  // whatever order it is taken.)
  constexpr double kNeverFull = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> loaded;
  std::vector<double> level_at;
  std::vector<std::size_t> at_of(slots);  // channel -> its index in loaded
  for (std::size_t k = 0; k < slots; ++k) {
    if (unfrozen[k] == 0) continue;
    at_of[k] = loaded.size();
    loaded.push_back(k);
    level_at.push_back(room[k] / load[k]);
  }
  std::size_t drained = 0;  // entries of loaded whose flows all froze
  std::size_t next_limit = 0;  // by_limit[next_limit..] may still be unfrozen
  std::vector<double> out(flows, 0.0);
  std::vector<char> frozen(flows, 0);
  std::size_t remaining = flows;
  // The flows that freeze in a round, as a bit per flow: taken in flow
  // order (each once), as a scan over the flows would.
  std::vector<std::uint64_t> freezing((flows + 63) / 64, 0);
  auto freeze_later = [&freezing](std::size_t i) { freezing[i / 64] |= std::uint64_t{1} << (i % 64); };
  std::vector<std::size_t> changed;
  while (remaining > 0) {
    while (next_limit < by_limit.size() && frozen[by_limit[next_limit]]) ++next_limit;
    double level = next_limit < by_limit.size() ? limit[by_limit[next_limit]] : kUnlimited;
    {
      // Four running minima, so that the scan is not one chain of dependent compares.
      const std::size_t n = level_at.size();
      double least[4] = {level, level, level, level};
      std::size_t m = 0;
      for (; m + 4 <= n; m += 4) {
        for (std::size_t u = 0; u < 4; ++u) least[u] = std::min(least[u], level_at[m + u]);
      }
      for (; m < n; ++m) least[0] = std::min(least[0], level_at[m]);
      level = std::min(std::min(least[0], least[1]), std::min(least[2], least[3]));
    }
    const double slack = level * 1e-12;
    for (std::size_t k = next_limit; k < by_limit.size() && limit[by_limit[k]] <= level + slack; ++k) {
      if (!frozen[by_limit[k]]) freeze_later(by_limit[k]);
    }
    for (std::size_t m = 0; m < level_at.size(); ++m) {
      if (level_at[m] > level + slack) continue;
      const std::size_t k = loaded[m];
      for (std::size_t j = first[k]; j < first[k + 1]; ++j) {
        if (!frozen[crossing[j]]) freeze_later(crossing[j]);
      }
    }
    changed.clear();
    for (std::size_t word = 0; word < freezing.size(); ++word) {
      for (std::uint64_t bits = freezing[word]; bits != 0; bits &= bits - 1) {
        const std::size_t i = word * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
        frozen[i] = 1;
        out[i] = level;
        --remaining;
        for (std::size_t j = in.first[i]; j < in.first[i + 1]; ++j) {
          const auto k = static_cast<std::size_t>(in.slot[j]);
          room[k] = std::max(0.0, room[k] - weight_of(i) * level);
          load[k] = --unfrozen[k] == 0 ? 0.0 : load[k] - weight_of(i);
          changed.push_back(k);
        }
      }
      freezing[word] = 0;
    }
    for (const std::size_t k : changed) {
      double& at = level_at[at_of[k]];
      if (at == kNeverFull) continue;  // counted as drained already
      if (unfrozen[k] > 0) {
        at = room[k] / load[k];
      } else {
        at = kNeverFull;
        ++drained;
      }
    }
    if (2 * drained > level_at.size()) {
      std::size_t kept = 0;
      for (std::size_t m = 0; m < level_at.size(); ++m) {
        if (level_at[m] == kNeverFull) continue;
        loaded[kept] = loaded[m];
        level_at[kept] = level_at[m];
        at_of[loaded[kept]] = kept;
        ++kept;
      }
      loaded.resize(kept);
      level_at.resize(kept);
      drained = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<double> max_min_shares(const std::vector<const std::vector<int>*>& paths, const std::vector<double>& limit,
                                   const std::vector<double>& capacity, const std::vector<double>& weight) {
  // Channel state is kept only for the channels some flow crosses, in the
  // order first crossed (`slot_of` maps a channel to its slot).
  DenseFlows dense;
  std::vector<int> slot_of(capacity.size(), -1);
  for (const std::vector<int>* path : paths) {
    for (const int c : *path) {
      int& slot = slot_of[static_cast<std::size_t>(c)];
      if (slot < 0) {
        slot = static_cast<int>(dense.capacity.size());
        dense.capacity.push_back(capacity[static_cast<std::size_t>(c)]);
      }
      dense.slot.push_back(slot);
    }
    dense.first.push_back(dense.slot.size());
  }
  return progressive_filling(dense, limit, weight);
}

const std::vector<double>& EstimateFabric::flow_rates(const std::string& key,
                                                     const std::function<void(std::vector<FlowPair>&)>& flows,
                                                     double cap, bool write) const {
  const std::string memo = key + (write ? "|w|" : "|r|") + std::to_string(cap);
  const auto found = rates_.find(memo);
  if (found != rates_.end()) return found->second;
  std::vector<FlowPair> list;
  flows(list);
  // Channels crossed, the NPUs' memory channels after the links', each
  // given a dense slot when first crossed (a supernode fabric has millions
  // of channels and a solve touches a few thousand); a flow's own limit is
  // `cap` and, for a write, the write caps of its links.
  const std::size_t links = 2 * spec_.links.size();
  if (slot_of_.empty()) slot_of_.assign(links + static_cast<std::size_t>(spec_.npus), -1);
  DenseFlows dense;
  std::vector<int> channels;
  std::vector<double> limit(list.size(), cap);
  std::vector<double> weight;  // empty while every flow counts fully
  for (std::size_t i = 0; i < list.size(); ++i) {
    const FlowPair& f = list[i];
    if (f.weight != 1 && weight.empty()) weight.assign(list.size(), 1.0);
    if (!weight.empty()) weight[i] = f.weight;
    channels.clear();
    if (f.from == f.to) {
      channels.push_back(static_cast<int>(links) + f.from);
    } else {
      routes_.append_path(f.from, f.to, channels);
    }
    for (const int c : channels) {
      int& slot = slot_of_[static_cast<std::size_t>(c)];
      if (slot < 0) {
        slot = static_cast<int>(dense.capacity.size());
        dense.capacity.push_back(channel_rate(c));
        crossed_.push_back(c);
      }
      dense.slot.push_back(slot);
      if (write && static_cast<std::size_t>(c) < links) {
        limit[i] = std::min(limit[i], rate(spec_.links[static_cast<std::size_t>(c) / 2].params.write_bandwidth));
      }
    }
    dense.first.push_back(dense.slot.size());
  }
  for (const int c : crossed_) slot_of_[static_cast<std::size_t>(c)] = -1;
  crossed_.clear();
  // A flow that counts for part of the time still moves no faster than its
  // narrowest channel.
  for (std::size_t i = 0; i < list.size() && !weight.empty(); ++i) {
    for (std::size_t j = dense.first[i]; j < dense.first[i + 1]; ++j) {
      limit[i] = std::min(limit[i], dense.capacity[static_cast<std::size_t>(dense.slot[j])]);
    }
  }
  return rates_.emplace(memo, progressive_filling(dense, limit, weight)).first->second;
}

double EstimateFabric::shared_rate(const std::string& key, const std::function<void(std::vector<FlowPair>&)>& flows,
                                   double cap, bool write) const {
  const std::vector<double>& rates = flow_rates(key, flows, cap, write);
  return rates.empty() ? cap : *std::min_element(rates.begin(), rates.end());
}

const std::vector<PathCost>& EstimateFabric::path_kinds(const std::string& key,
                                                        const std::function<void(std::vector<FlowPair>&)>& flows) const {
  const auto found = kinds_.find(key);
  if (found != kinds_.end()) return found->second;
  std::vector<FlowPair> list;
  flows(list);
  std::vector<PathCost> kinds;
  for (const FlowPair& f : list) {
    const PathCost p = path(f.from, f.to);
    const bool known = std::any_of(kinds.begin(), kinds.end(), [&](const PathCost& k) {
      return k.rdma == p.rdma && k.same_chip == p.same_chip && k.latency == p.latency && k.rate == p.rate &&
             k.write_rate == p.write_rate;
    });
    if (!known) kinds.push_back(p);
  }
  return kinds_.emplace(key, std::move(kinds)).first->second;
}

const EstimateFabric::PairTable& EstimateFabric::pair_table(const std::string& key, int rows, int cols,
                                                           const std::function<FlowPair(int, int)>& pair) const {
  const auto found = tables_.find(key);
  if (found != tables_.end()) return found->second;
  PairTable table;
  table.kind_of.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    for (int col = 0; col < cols; ++col) {
      const FlowPair f = pair(r, col);
      const PathCost p = path(f.from, f.to);
      std::size_t k = 0;
      while (k < table.kinds.size() &&
             !(table.kinds[k].rdma == p.rdma && table.kinds[k].same_chip == p.same_chip &&
               table.kinds[k].latency == p.latency && table.kinds[k].rate == p.rate &&
               table.kinds[k].write_rate == p.write_rate)) {
        ++k;
      }
      if (k == table.kinds.size()) table.kinds.push_back(p);
      table.kind_of[static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(col)] =
          static_cast<std::uint8_t>(std::min<std::size_t>(k, 255));
    }
  }
  return tables_.emplace(key, std::move(table)).first->second;
}

const std::vector<EstimateFabric::RankStep>& EstimateFabric::rank_steps(
    const std::string& key, const std::function<std::vector<RankStep>()>& build) const {
  auto found = rank_steps_.find(key);
  if (found == rank_steps_.end()) found = rank_steps_.emplace(key, build()).first;
  return found->second;
}

const EstimateFn* find_estimate(const std::string& name) {
  static const std::map<std::string, EstimateFn> all = [] {
    std::map<std::string, EstimateFn> out;
    register_mesh_estimates(out);
    register_level1_estimates(out);
    register_hierarchical_estimates(out);
    register_ring_estimates(out);
    register_aiv_estimates(out);
    return out;
  }();
  const auto it = all.find(name);
  return it == all.end() ? nullptr : &it->second;
}

}  // namespace hcclsim
