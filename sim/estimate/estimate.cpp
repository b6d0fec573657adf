#include "sim/estimate/estimate.h"

#include <algorithm>
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

std::vector<double> max_min_shares(const std::vector<const std::vector<int>*>& paths, const std::vector<double>& limit,
                                   const std::vector<double>& capacity, const std::vector<double>& weight) {
  // Progressive filling, as the detailed flow model solves the shares: raise
  // every unfrozen flow's rate together; a flow freezes at its own limit or
  // when a channel it crosses is full. A channel's unfrozen load is the sum
  // of its unfrozen flows' weights. Each round visits the channels and only
  // the flows that freeze (found through their channels and by limit), so
  // that tens of thousands of flows solve in milliseconds.
  //
  // Per-channel state is kept only for the channels some flow crosses, in
  // the order first crossed (`slot_of` maps a channel to its slot): a
  // supernode fabric has millions of channels and a solve touches a few
  // thousand, so nothing here is sized by the whole fabric but `slot_of`.
  auto weight_of = [&weight](std::size_t i) { return weight.empty() ? 1.0 : weight[i]; };
  std::vector<int> slot_of(capacity.size(), -1);
  std::vector<int> unfrozen;    // per slot: flows not yet frozen
  std::vector<double> load;     // per slot: their summed weights
  std::vector<double> room;     // per slot: capacity left
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (const int c : *paths[i]) {
      int& slot = slot_of[static_cast<std::size_t>(c)];
      if (slot < 0) {
        slot = static_cast<int>(unfrozen.size());
        unfrozen.push_back(0);
        load.push_back(0.0);
        room.push_back(capacity[static_cast<std::size_t>(c)]);
      }
      ++unfrozen[static_cast<std::size_t>(slot)];
      load[static_cast<std::size_t>(slot)] += weight_of(i);
    }
  }
  const std::size_t slots = unfrozen.size();
  // The flows crossing each slot, in flow order (compressed rows).
  std::vector<std::size_t> first(slots + 1, 0);
  for (std::size_t k = 0; k < slots; ++k) first[k + 1] = first[k] + static_cast<std::size_t>(unfrozen[k]);
  std::vector<std::size_t> crossing(first[slots]);
  {
    std::vector<std::size_t> fill(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      for (const int c : *paths[i]) crossing[fill[static_cast<std::size_t>(slot_of[static_cast<std::size_t>(c)])]++] = i;
    }
  }
  std::vector<std::size_t> by_limit(paths.size());
  for (std::size_t i = 0; i < by_limit.size(); ++i) by_limit[i] = i;
  std::stable_sort(by_limit.begin(), by_limit.end(), [&](std::size_t a, std::size_t b) { return limit[a] < limit[b]; });
  std::size_t next_limit = 0;  // by_limit[next_limit..] may still be unfrozen
  std::vector<double> out(paths.size(), 0.0);
  std::vector<char> frozen(paths.size(), 0);
  std::size_t remaining = paths.size();
  std::vector<std::size_t> now;
  while (remaining > 0) {
    while (next_limit < by_limit.size() && frozen[by_limit[next_limit]]) ++next_limit;
    double level = next_limit < by_limit.size() ? limit[by_limit[next_limit]] : kUnlimited;
    for (std::size_t k = 0; k < slots; ++k) {
      if (unfrozen[k] > 0) level = std::min(level, room[k] / load[k]);
    }
    const double slack = level * 1e-12;
    now.clear();
    for (std::size_t k = next_limit; k < by_limit.size() && limit[by_limit[k]] <= level + slack; ++k) {
      if (!frozen[by_limit[k]]) now.push_back(by_limit[k]);
    }
    for (std::size_t k = 0; k < slots; ++k) {
      if (unfrozen[k] == 0 || room[k] / load[k] > level + slack) continue;
      for (std::size_t j = first[k]; j < first[k + 1]; ++j) {
        if (!frozen[crossing[j]]) now.push_back(crossing[j]);
      }
    }
    // Freeze in flow order (each once), as a scan over the flows would.
    std::sort(now.begin(), now.end());
    now.erase(std::unique(now.begin(), now.end()), now.end());
    for (const std::size_t i : now) {
      frozen[i] = 1;
      out[i] = level;
      --remaining;
      for (const int c : *paths[i]) {
        const auto k = static_cast<std::size_t>(slot_of[static_cast<std::size_t>(c)]);
        room[k] = std::max(0.0, room[k] - weight_of(i) * level);
        load[k] = --unfrozen[k] == 0 ? 0.0 : load[k] - weight_of(i);
      }
    }
  }
  return out;
}

const std::vector<double>& EstimateFabric::flow_rates(const std::string& key,
                                                     const std::function<void(std::vector<FlowPair>&)>& flows,
                                                     double cap, bool write) const {
  const std::string memo = key + (write ? "|w|" : "|r|") + std::to_string(cap);
  const auto found = rates_.find(memo);
  if (found != rates_.end()) return found->second;
  std::vector<FlowPair> list;
  flows(list);
  // Channels crossed, the NPUs' memory channels after the links'; a flow's
  // own limit is `cap` and, for a write, the write caps of its links.
  const std::size_t links = 2 * spec_.links.size();
  std::vector<std::vector<int>> paths(list.size());
  std::vector<double> limit(list.size(), cap);
  std::vector<double> capacity(links + static_cast<std::size_t>(spec_.npus), 0.0);
  std::vector<double> weight;  // empty while every flow counts fully
  for (std::size_t i = 0; i < list.size(); ++i) {
    const FlowPair& f = list[i];
    if (f.weight != 1 && weight.empty()) weight.assign(list.size(), 1.0);
    if (!weight.empty()) weight[i] = f.weight;
    paths[i] = f.from == f.to ? std::vector<int>{static_cast<int>(links) + f.from} : routes_.path(f.from, f.to);
    for (const int c : paths[i]) {
      capacity[static_cast<std::size_t>(c)] = channel_rate(c);
      if (write && static_cast<std::size_t>(c) < links) {
        limit[i] = std::min(limit[i], rate(spec_.links[static_cast<std::size_t>(c) / 2].params.write_bandwidth));
      }
    }
  }
  // A flow that counts for part of the time still moves no faster than its
  // narrowest channel.
  for (std::size_t i = 0; i < list.size() && !weight.empty(); ++i) {
    for (const int c : paths[i]) limit[i] = std::min(limit[i], capacity[static_cast<std::size_t>(c)]);
  }
  std::vector<const std::vector<int>*> crossed;
  for (const std::vector<int>& path : paths) crossed.push_back(&path);
  std::vector<double> out = max_min_shares(crossed, limit, capacity, weight);
  return rates_.emplace(memo, std::move(out)).first->second;
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
