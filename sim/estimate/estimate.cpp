#include "sim/estimate/estimate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>

namespace hcclsim {

namespace {
constexpr double kUnlimited = kNoLimit;  // bytes per ps: no cap
// fill_groups_by_counts' rounds before it leaves a solve to the filling
// (DirectFullmesh's solves by groups end within 6).
constexpr std::uint32_t kMostRoundsByCounts = 16;
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
      flag_poll(ps(n.aiv.flag_poll)),
      aiv_port(rate(n.aiv.remote_bandwidth)) {}

double StepCosts::local_copy(double bytes, bool reduce) const {
  return sdma_fixed + bytes / std::min(local_rate, sdma_cap(reduce)) + local_latency;
}

EstimateFabric::EstimateFabric(const TopologySpec& spec)
    : spec_(spec),
      costs_(spec_.npu),
      routes_(spec_),
      solve_threads_(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u))) {
  // (A solve looks up the rate of every channel it meets: from the
  // LinkSpecs, a division and a cache line each, it was 3% of a pairwise
  // AlltoAll's first point on 1024 A2 NPUs.)
  link_rates_.reserve(spec_.links.size());
  for (const LinkSpec& link : spec_.links) {
    link_rates_.push_back(rate(link.params.bandwidth));
    if (link.params.sdma_read_rate.bytes_per_s != 0 || link.params.sdma_write_rate.bytes_per_s != 0 ||
        link.params.transport_rate.bytes_per_s != 0) {
      sdma_caps_ = true;
    }
  }
  // places()'s room, on the caller's heap (built on a solve thread, whose
  // own heap is fresh pages: faulted in there, it kept a caller that
  // wanted the table at once waiting).
  places_.reserve(static_cast<std::size_t>(spec_.npus) * (3 + spec_.fabrics.size()));
}

const std::vector<int>& EstimateFabric::places() const {
  std::call_once(places_built_, [this] {
    // Level by level (chip, server, SDMA domain: 0 when there are none,
    // leaf of each fabric), each an array over the NPUs, so that the pairs
    // of a run compare contiguous ids; built on first use (100,000 NPUs: a
    // few MiB), by a solve thread as it starts when there is one.
    const auto npus = static_cast<std::size_t>(spec_.npus);
    places_.resize(npus * (3 + spec_.fabrics.size()));
    // n / size by counting, not dividing (two divisions an NPU were most of
    // this table's cost on 99,840 dies).
    auto by_blocks = [npus](int* id, int size) {
      int block = 0;
      int left = size;
      for (std::size_t n = 0; n < npus; ++n) {
        id[n] = block;
        if (--left == 0) {
          ++block;
          left = size;
        }
      }
    };
    int* const chip = places_.data();
    int* const server = chip + npus;
    int* const domain_of = server + npus;
    by_blocks(chip, std::max(1, spec_.npus_per_chip));
    if (spec_.server_of.empty()) {
      by_blocks(server, std::max(1, spec_.npus_per_server));  // (server_of's rule)
    } else {
      for (int n = 0; n < spec_.npus; ++n) server[n] = server_of(spec_, n);
    }
    const std::vector<int>& domain = spec_.sdma_domain_of;  // routes_.rdma_between's rule, without its checks
    for (std::size_t i = 0; i < npus; ++i) domain_of[i] = domain.empty() ? 0 : domain[i];
    for (std::size_t f = 0; f < spec_.fabrics.size(); ++f) {
      std::copy_n(spec_.fabrics[f].leaf_of.begin(), npus, places_.begin() + static_cast<std::ptrdiff_t>((3 + f) * npus));
    }
    blocks_.assign(3 + spec_.fabrics.size(), 0);
    for (std::size_t l = 0; l < blocks_.size() && npus > 0; ++l) {
      const int* id = places_.data() + l * npus;
      std::size_t block = 1;
      while (block < npus && id[block] == id[0]) ++block;
      int differ = 0;  // (a count, not a flag: the loops vectorize)
      if (block == 1) {  // (one NPU a block: rising ids, without a loop per block)
        for (std::size_t n = 1; n < npus; ++n) differ += id[n] > id[n - 1] ? 0 : 1;
      }
      for (std::size_t start = block; block > 1 && start < npus && differ == 0; start += block) {
        differ += id[start] > id[start - block] ? 0 : 1;
        const int first = id[start];
        const std::size_t end = std::min(start + block, npus);
        for (std::size_t n = start + 1; n < end; ++n) differ += id[n] != first ? 1 : 0;
      }
      if (differ == 0) blocks_[l] = static_cast<int>(block);
    }
  });
  return places_;
}

std::uint64_t EstimateFabric::relation(int from, int to) const {
  // Bits, high to low: same NPU, same chip, same server, SDMA domains
  // differ, same leaf of each fabric.
  const auto npus = static_cast<std::size_t>(spec_.npus);
  const int* level = places().data();
  const auto a = static_cast<std::size_t>(from);
  const auto b = static_cast<std::size_t>(to);
  std::uint64_t out = from == to ? 1 : 0;
  for (std::size_t l = 0; l < 3 + spec_.fabrics.size(); ++l, level += npus) {
    out = out << 1 | ((level[a] == level[b]) != (l == 2) ? 1 : 0);
  }
  return out;
}

PathCost EstimateFabric::path(int from, int to) const {
  // Paths of the same relation (same chip, server, SDMA domain, leaf of
  // each fabric) cost the same in the regular topologies hcclsim builds:
  // look each relation up once.
  const std::uint64_t relation = this->relation(from, to);
  for (const auto& [known, cost] : paths_) {  // a handful of relations: a scan beats a tree
    if (known == relation) return cost;
  }
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
      out.write_rate = std::min({out.write_rate, rate(p.bandwidth), rate(p.write_bandwidth), rate(p.sdma_write_rate),
                                 rate(p.transport_rate)});
      out.rate = std::min({out.rate, rate(p.sdma_read_rate), rate(p.transport_rate)});
      out.latency += ps(p.latency);
      out.write_extra = std::max(out.write_extra, ps(p.sdma_write_extra));
      out.read_extra = std::max(out.read_extra, ps(p.sdma_read_extra));
    }
  }
  paths_.emplace_back(relation, out);
  return out;
}

const std::vector<int>& EstimateFabric::route(int from, int to) const {
  const std::uint64_t key = static_cast<std::uint64_t>(from) << 32 | static_cast<std::uint32_t>(to);
  auto found = routed_.find(key);
  if (found == routed_.end()) found = routed_.emplace(key, routes_.path(from, to)).first;
  return found->second;
}

namespace {

// Two paths that cost the same to every form (one kind of a PairTable or path_kinds).
bool same_cost(const PathCost& a, const PathCost& b) {
  return a.rdma == b.rdma && a.same_chip == b.same_chip && a.latency == b.latency && a.rate == b.rate &&
         a.write_rate == b.write_rate && a.write_extra == b.write_extra && a.read_extra == b.read_extra;
}

// The flows crossing each of a part's counted channels, and each flow's
// narrowest channel: places[j] is hop j's channel's place among the
// counted ones, capacity[k] the k-th counted channel's.
ChannelCrossings list_crossings(const RoutedFlows& flows, const HopPlaces& places, const std::vector<double>& capacity) {
  ChannelCrossings out;
  out.narrowest.resize(flows.size());
  const std::size_t channels = capacity.size();
  out.first.assign(channels + 1, 0);
  const std::uint32_t* const place = places.data();
  const double* const room = capacity.data();
  std::uint32_t* const first = out.first.data();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    double narrowest = kUnlimited;  // (densify's minimum)
    for (std::size_t j = flows.first[i]; j < flows.first[i + 1]; ++j) {
      ++first[place[j] + 1];
      narrowest = room[place[j]] < narrowest ? room[place[j]] : narrowest;
    }
    out.narrowest[i] = narrowest;
  }
  for (std::size_t k = 0; k < channels; ++k) first[k + 1] += first[k];
  std::vector<std::uint32_t> next(out.first.begin(), out.first.end() - 1);
  out.crossing.resize(flows.channel.size());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    for (std::size_t j = flows.first[i]; j < flows.first[i + 1]; ++j) {
      out.crossing[next[place[j]]++] = static_cast<std::uint32_t>(i);
    }
  }
  return out;
}

// Channels given dense slots in the order the flows first cross them (a
// solve's own numbering) through the solver's map `slot_of` (-1 between
// uses), each slot's channel into `channel`; `fresh(k, c)` sets up what
// the caller keeps for slot k, given to channel c. (A struct of plain
// pointers, a local of the loop: they stay in registers.)
struct FirstCrossing {
  int* slot_of;
  int* channel;
  std::size_t slots = 0;
  template <class Fresh>
  int slot(int c, const Fresh& fresh) {
    int s = slot_of[c];
    if (s < 0) {
      s = static_cast<int>(slots);
      slot_of[c] = s;
      channel[slots] = c;
      fresh(slots++, c);
    }
    return s;
  }
  // slot_of as it was.
  void forget() const {
    for (std::size_t k = 0; k < slots; ++k) slot_of[channel[k]] = -1;
  }
};

}  // namespace

namespace {
// The memo key of a solve of `key`'s flows under `cap` (reads or writes).
std::string rate_memo(const std::string& key, double cap, bool write, bool sdma) {
  // The cap by its bits: exact (to_string's six decimals would give caps
  // that differ below 1e-6 bytes per ps one name) and a tenth of the cost.
  std::uint64_t bits = 0;
  std::memcpy(&bits, &cap, sizeof bits);
  char hex[17];
  for (int i = 15; i >= 0; --i, bits >>= 4) hex[i] = "0123456789abcdef"[bits & 15];
  hex[16] = '\0';
  return key + (write ? "|w" : "|r") + (sdma ? "s|" : "a|") + hex;
}

// Two lists of the same flows, pair for pair (a step listed again).
bool same_flows(const std::vector<FlowPair>& a, const std::vector<FlowPair>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const FlowPair& x, const FlowPair& y) {
    return x.from == y.from && x.to == y.to && x.weight == y.weight;
  });
}
}  // namespace

const std::vector<double>& EstimateFabric::flow_rates(const std::string& key,
                                                     const std::function<void(std::vector<FlowPair>&)>& flows,
                                                     double cap, bool write, bool sdma) const {
  const std::string memo = rate_memo(key, cap, write, sdma);
  const auto found = rates_.find(memo);
  if (found != rates_.end()) return found->second;
  const Listed& l = listed(flows);
  std::vector<double> rates = solve_routed(l.routed, l.weight, cap, write);
  if (sdma) cap_sdma(l.flows, write, rates);
  return rates_.emplace(memo, std::move(rates)).first->second;
}

double EstimateFabric::sdma_cap(const FlowPair& f, bool write) const {
  if (f.from == f.to) return kUnlimited;
  const PathCost p = path(f.from, f.to);
  return write ? p.write_rate : p.rate;
}

double EstimateFabric::least_sdma_cap(const std::vector<FlowPair>& flows, bool write) const {
  double least = kUnlimited;
  if (sdma_caps_) {
    for (const FlowPair& f : flows) least = std::min(least, sdma_cap(f, write));
  }
  return least;
}

void EstimateFabric::cap_sdma(const std::vector<FlowPair>& flows, bool write, std::vector<double>& rates) const {
  if (!sdma_caps_) return;
  for (std::size_t i = 0; i < flows.size() && i < rates.size(); ++i) rates[i] = std::min(rates[i], sdma_cap(flows[i], write));
}

const EstimateFabric::Listed& EstimateFabric::listed(const std::function<void(std::vector<FlowPair>&)>& flows) const {
  std::vector<FlowPair> list;
  flows(list);
  if (same_flows(list, listed_.flows)) return listed_;
  listed_.flows = std::move(list);
  listed_.routed = RoutedFlows{};
  route_flows(listed_.flows, listed_.routed);
  std::vector<double>& weight = listed_.weight;  // empty while every flow counts fully
  weight.clear();
  for (std::size_t i = 0; i < listed_.flows.size(); ++i) {
    if (listed_.flows[i].weight != 1 && weight.empty()) weight.assign(listed_.flows.size(), 1.0);
    if (!weight.empty()) weight[i] = listed_.flows[i].weight;
  }
  return listed_;
}

const std::vector<double>& EstimateFabric::kept_rates(const std::string& key,
                                                     const std::function<std::vector<double>()>& solve) const {
  const std::string memo = "solved/" + key;
  auto found = rates_.find(memo);
  if (found == rates_.end()) found = rates_.emplace(memo, solve()).first;
  return found->second;
}

void EstimateFabric::route_flows(const std::vector<FlowPair>& list, RoutedFlows& out) const {
  // A flow from an NPU to itself crosses its memory channel, numbered
  // after the links' channels.
  const auto links = static_cast<int>(2 * spec_.links.size());
  flows_routed_ += list.size();
  // (Room for the usual four hops a flow in a fresh list: growing by
  // doubling copied the routes of a thousand-flow step several times.)
  if (out.channel.empty()) {
    out.first.reserve(list.size() + 1);
    out.channel.reserve(4 * list.size());
  }
  for (std::size_t i = 0; i < list.size();) {
    if (list[i].from == list[i].to) {
      out.channel.push_back(links + list[i].from);
      out.first.push_back(out.channel.size());
      ++i;
      continue;
    }
    std::size_t run = i + 1;  // [i, run): transfers between two NPUs
    while (run < list.size() && list[run].from != list[run].to) ++run;
    const FlowPair* const pairs = list.data() + i;
    routes_.append_paths(run - i, [pairs](std::size_t k) { return std::make_pair(pairs[k].from, pairs[k].to); }, out.first,
                         out.channel);
    i = run;
  }
}

const EstimateFabric::BetweenLeaves& EstimateFabric::between_leaves() const {
  std::call_once(between_leaves_made_, [this] {
    between_leaves_.routes = &routes_.leaf_spine_routes();
    for (int kind = 0; kind < 2; ++kind) {
      const RouteFinder::LeafSpineRoutes& routes = *between_leaves_.routes;
      if (!routes.has(kind)) continue;
      // One rate for every NPU's links to its leaf, none slower between the leaves.
      const std::vector<int>& edges = routes.edge_channels(kind);
      double edge = edges.empty() ? 0 : channel_rate(edges.front());
      for (const int c : edges) {
        if (channel_rate(c) != edge) edge = 0;
      }
      for (const std::vector<int>* middle : {&routes.to_spine_channels(kind), &routes.from_spine_channels(kind)}) {
        for (const int c : *middle) {
          if (channel_rate(c) < edge) edge = 0;
        }
      }
      between_leaves_.edge_rate[static_cast<std::size_t>(kind)] = edge;
    }
  });
  return between_leaves_;
}

double EstimateFabric::route_between_leaves(const std::vector<FlowPair>& list, RoutedFlows& out) const {
  const auto fail = [&out] {
    out = RoutedFlows{};
    return 0.0;
  };
  if (out.size() != 0 || !out.channel.empty()) return fail();
  const BetweenLeaves& fabric = between_leaves();
  const RouteFinder::LeafSpineRoutes& routes = *fabric.routes;
  // Each NPU sends at most one flow and receives at most one (so only its
  // own flows cross its links to its leaf), all those links alike.
  out.first.resize(list.size() + 1);
  out.channel.resize(2 * list.size());
  int kind = 0;
  const std::ptrdiff_t hops =
      routes.middles_of_permutation(list.data(), list.size(), out.first.data() + 1, out.channel.data(), kind);
  const double edge = fabric.edge_rate[static_cast<std::size_t>(kind)];
  if (hops < 0 || list.empty() || !(edge > 0)) return fail();
  out.channel.resize(static_cast<std::size_t>(hops));
  flows_routed_ += list.size();
  return edge;
}

std::vector<double> EstimateFabric::solve_routed(const RoutedFlows& flows, const std::vector<double>& weight, double cap,
                                                 bool write, SlowestOfGroups only) const {
  return solve_routed(std::vector<const RoutedFlows*>{&flows}, weight, cap, write, only);
}

std::vector<double> EstimateFabric::solve_routed(const std::vector<const RoutedFlows*>& parts,
                                                 const std::vector<double>& weight, double cap, bool write,
                                                 SlowestOfGroups only) const {
  return solve_with(solver_, parts, weight, cap, write, only);
}

const std::vector<double>& EstimateFabric::solve_with(MaxMinShares& solver, const std::vector<const RoutedFlows*>& parts,
                                               const std::vector<double>& weight, double cap, bool write,
                                               SlowestOfGroups only) const {
  MaxMinShares::Work& w = solver.work();
  // (A solve of every share needs each flow's demand; densify adds it.)
  const bool demand = only.groups == 0;
  const std::vector<double> limit = densify(solver, parts, weight, cap, write, demand);
  progressive_filling(w, w.dense, limit, weight, only, demand);
  return w.out;
}

std::vector<int>& EstimateFabric::slot_map(MaxMinShares& solver) const {
  std::vector<int>& slot_of = solver.work().slot_of;
  const std::size_t channels = 2 * spec_.links.size() + static_cast<std::size_t>(spec_.npus);
  if (slot_of.size() < channels) slot_of.resize(channels, -1);
  return slot_of;
}

ChannelCounts EstimateFabric::count_channels(MaxMinShares& solver, const RoutedFlows& flows, HopPlaces& places) const {
  std::vector<int>& slot_of = slot_map(solver);
  ChannelCounts out;
  places.resize(flows.channel.size());
  std::uint32_t* place = places.data();
  for (const int c : flows.channel) {
    int& slot = slot_of[static_cast<std::size_t>(c)];
    if (slot < 0) {
      slot = static_cast<int>(out.size());
      out.emplace_back(c, 0);
    }
    *place++ = static_cast<std::uint32_t>(slot);
    ++out[static_cast<std::size_t>(slot)].second;
  }
  for (const auto& counted : out) slot_of[static_cast<std::size_t>(counted.first)] = -1;
  return out;
}

bool EstimateFabric::fill_groups_by_counts(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out) const {
  const SlowestOfGroups only = job.only;
  if (only.groups == 0 || job.least || !job.weight.empty() || job.write || job.parts.empty() ||
      job.counts.size() != job.parts.size()) {
    return false;
  }
  std::size_t flows = 0;
  for (std::size_t p = 0; p < job.parts.size(); ++p) {
    if (job.counts[p] == nullptr || &job.counts[p]->flows() != job.parts[p]) return false;
    flows += job.parts[p]->size();
  }
  if (flows == 0 || flows > std::numeric_limits<std::uint32_t>::max()) return false;
  const auto counts_of = [&](const CountedPart* part) -> const ChannelCounts& {
    return part->counts([&](const RoutedFlows& routed, HopPlaces& places) { return count_channels(solver, routed, places); });
  };
  for (const CountedPart* part : job.counts) counts_of(part);  // (before the merge below takes the slot map)
  MaxMinShares::Work& w = solver.work();
  std::vector<int>& slot_of = slot_map(solver);
  // The channels in the order the flows first cross them (densify's slots), with their hops.
  std::vector<int>& count = w.unfrozen;
  std::vector<double>& capacity = w.room;
  count.clear();
  capacity.clear();
  int most = 0;
  for (const CountedPart* part : job.counts) {
    for (const auto& [c, n] : counts_of(part)) {
      int& slot = slot_of[static_cast<std::size_t>(c)];
      if (slot < 0) {
        slot = static_cast<int>(count.size());
        count.push_back(0);
        capacity.push_back(channel_rate(c));
        w.crossed.push_back(c);
      }
      most = std::max(most, count[static_cast<std::size_t>(slot)] += n);
    }
  }
  // A channel's load, the filling's sum of its flows' weights in flow order:
  // every flow weighs the share, so it is the share added once per hop.
  const bool partly = job.share != 1;  // (solve_job's weights: the share, each flow)
  const double weight = partly ? job.share : 1.0;
  std::vector<double>& load_of = w.load;  // by hops
  load_of.assign(static_cast<std::size_t>(most) + 1, 0.0);
  for (std::size_t n = 1; n < load_of.size(); ++n) load_of[n] = load_of[n - 1] + weight;
  // The least limit: densify's, the cap and (counted for part of the time)
  // each flow's narrowest channel, every channel being some flow's.
  double level = std::min(kUnlimited, job.cap);
  if (partly) {
    for (const double c : capacity) level = std::min(level, c);
  }
  // Then every_group_in_first_round's: the least room / load.
  for (std::size_t k = 0; k < count.size(); ++k) {
    level = std::min(level, capacity[k] / load_of[static_cast<std::size_t>(count[k])]);
  }
  const double slack = level * 1e-12;
  std::vector<char>& full = w.freezes;
  full.assign(count.size(), 0);
  for (std::size_t k = 0; k < count.size(); ++k) {
    full[k] = capacity[k] / load_of[static_cast<std::size_t>(count[k])] <= level + slack ? 1 : 0;
  }
  std::vector<char>& group_frozen = w.group_frozen;
  group_frozen.assign(only.groups, 0);
  std::size_t groups_left = only.groups;
  std::size_t i = 0;  // over the parts' flows
  for (std::size_t p = 0; p < job.parts.size() && groups_left > 0; ++p) {
    const RoutedFlows& part = *job.parts[p];
    for (std::size_t k = 0; k < part.size() && i < std::min(only.flows, flows) && groups_left > 0; ++k, ++i) {
      if (group_frozen[i % only.groups] != 0) continue;
      double limit = job.cap;
      bool crosses_full = false;
      for (std::size_t j = part.first[k]; j < part.first[k + 1]; ++j) {
        const auto slot = static_cast<std::size_t>(slot_of[static_cast<std::size_t>(part.channel[j])]);
        if (partly) limit = std::min(limit, capacity[slot]);
        crosses_full = crosses_full || full[slot] != 0;
      }
      if (limit <= level + slack || crosses_full) {
        group_frozen[i % only.groups] = 1;
        --groups_left;
      }
    }
  }
  bool solved = groups_left == 0;
  if (!solved) {
    std::vector<const ChannelCounts*> counted;
    for (const CountedPart* part : job.counts) counted.push_back(&counts_of(part));
    solved = rounds_by_counts(solver, job, counted, flows, weight, out);
  }
  if (groups_left == 0) {
    out.assign(job.kept == 0 ? flows : std::min(job.kept, flows), level);
    ++first_rounds_by_counts_;
  }
  for (const int c : w.crossed) slot_of[static_cast<std::size_t>(c)] = -1;
  w.crossed.clear();
  return solved;
}

namespace {

// The least of value(i) for i < n, with the running minima in registers,
// four at a time (the minimum of positive rates is the same in any
// order): rounds_by_counts' two scans, written in its frame, stored and
// reloaded the running minimum at each step, and took two thirds of its
// perf samples on 99,840 dies' first AlltoAll point.
template <class Value>
double least_in_lanes(std::size_t n, const Value& value) {
  double least[4] = {kUnlimited, kUnlimited, kUnlimited, kUnlimited};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (std::size_t lane = 0; lane < 4; ++lane) least[lane] = std::min(least[lane], value(i + lane));
  }
  for (; i < n; ++i) least[0] = std::min(least[0], value(i));
  return std::min(std::min(least[0], least[1]), std::min(least[2], least[3]));
}

}  // namespace

bool EstimateFabric::rounds_by_counts(MaxMinShares& solver, const SolveJob& job,
                                      const std::vector<const ChannelCounts*>& counted, std::size_t flows, double weight,
                                      std::vector<double>& out) const {
  const SlowestOfGroups only = job.only;
  MaxMinShares::Work& w = solver.work();
  const std::vector<int>& slot_of = w.slot_of;
  const std::size_t parts = job.parts.size();
  // fill_groups_by_counts' slots: each one's channel, hops and capacity.
  std::vector<int>& unfrozen = w.unfrozen;  // per slot: its hops not yet frozen
  const std::vector<double>& capacity = w.room;
  const std::size_t slots = unfrozen.size();
  const std::vector<double>& load_of = w.load;  // by hops
  const bool partly = job.share != 1;  // (solve_job's weights: the share, each flow)
  // Per slot and part, the part's own number for the channel (-1: not crossed).
  std::vector<int>& part_slot = w.kept_as;
  part_slot.assign(slots * parts, -1);
  for (std::size_t p = 0; p < parts; ++p) {
    for (std::size_t own = 0; own < counted[p]->size(); ++own) {
      const auto k = static_cast<std::size_t>(slot_of[static_cast<std::size_t>((*counted[p])[own].first)]);
      part_slot[k * parts + p] = static_cast<int>(own);
    }
  }
  // Each part's lists, made by the first solve that wants them, with its channels' capacities.
  const auto lists_of = [&](std::size_t p) -> const ChannelCrossings& {
    return job.counts[p]->crossings([&](const RoutedFlows& routed, const HopPlaces& places) {
      std::vector<double>& own_capacity = w.own_capacity;
      own_capacity.resize(counted[p]->size());
      for (std::size_t own = 0; own < own_capacity.size(); ++own) {
        own_capacity[own] = capacity[static_cast<std::size_t>(slot_of[static_cast<std::size_t>((*counted[p])[own].first)])];
      }
      return list_crossings(routed, places, own_capacity);
    });
  };
  std::vector<double>& room = w.count_room;
  room.assign(capacity.begin(), capacity.end());
  std::vector<double>& load = w.count_load;
  load.resize(slots);
  std::vector<double>& level_of = w.count_level;  // room / load: the filling's heap key
  level_of.resize(slots);
  for (std::size_t k = 0; k < slots; ++k) {
    load[k] = load_of[static_cast<std::size_t>(unfrozen[k])];
    level_of[k] = room[k] / load[k];
  }
  // Each flow's limit, densify's: the cap and (counted for part of the
  // time) its narrowest channel; the parts' flows numbered in order.
  std::vector<double>& limit = w.flow_limit;
  limit.resize(flows);
  std::vector<std::size_t>& part_first = w.first;  // per part, its first flow's number
  part_first.assign(1, 0);
  double least_limit = kUnlimited;
  for (std::size_t p = 0; p < parts; ++p) {
    const std::vector<double>& narrowest = lists_of(p).narrowest;
    double* const to = limit.data() + part_first[p];
    const double* const own = narrowest.data();
    const double cap = job.cap;
    least_limit = std::min(least_limit, least_in_lanes(narrowest.size(), [&](std::size_t f) {
                             const double l = partly && own[f] < cap ? own[f] : cap;
                             to[f] = l;
                             return l;
                           }));
    part_first.push_back(part_first[p] + narrowest.size());
  }
  const std::size_t wanted = job.kept == 0 ? flows : std::min(job.kept, flows);
  std::vector<char>& frozen = w.frozen;
  frozen.assign(flows, 0);
  std::vector<char>& freezes = w.freezes;  // listed in `freezing` this round
  freezes.assign(flows, 0);
  std::vector<double>& rates = w.out;
  rates.assign(wanted, 0.0);
  std::vector<char>& group_frozen = w.group_frozen;
  group_frozen.assign(only.groups, 0);
  std::size_t groups_left = only.groups;
  std::size_t remaining = flows;
  std::vector<std::size_t>& freezing = w.freezing;
  std::vector<std::size_t>& changed = w.changed;
  std::vector<std::uint32_t>& changed_in = w.changed_in;
  changed_in.assign(slots, 0);
  // The flows by limit, as the filling takes them, put in order once the
  // level reaches the least limit: until then no flow is held back by its
  // limit (most of these solves end before: their flows are held back by
  // the channels, and ordering them was a tenth of a first DirectFullmesh
  // point on 99,840 dies).
  bool ordered = false;
  const std::vector<std::size_t>& by_limit = w.by_limit;
  std::size_t next_limit = 0;  // by_limit[next_limit..] may still be rising
  bool solved = false;
  std::uint32_t round = 1;
  for (; round <= kMostRoundsByCounts && !solved; ++round) {
    // The level: the least room / load of a loaded channel, and the least limit of a flow still rising.
    double level = least_in_lanes(slots, [&](std::size_t k) { return unfrozen[k] > 0 ? level_of[k] : kUnlimited; });
    if (!ordered && level + level * 1e-12 >= least_limit) {
      order_by_limit(w, limit);
      ordered = true;
    }
    if (ordered) {
      while (next_limit < flows && frozen[by_limit[next_limit]] != 0) ++next_limit;
      if (next_limit < flows) level = std::min(level, limit[by_limit[next_limit]]);
    }
    const double top = level + level * 1e-12;  // (the filling's slack)
    // The flows that freeze: at their limit, or crossing a full channel
    // (found through each part's list of the flows crossing it).
    freezing.clear();
    const auto freeze_later = [&](std::size_t i) {
      if (frozen[i] == 0 && freezes[i] == 0) {
        freezes[i] = 1;
        freezing.push_back(i);
      }
    };
    for (std::size_t k = next_limit; ordered && k < flows && limit[by_limit[k]] <= top; ++k) freeze_later(by_limit[k]);
    for (std::size_t k = 0; k < slots; ++k) {
      if (unfrozen[k] == 0 || level_of[k] > top) continue;
      for (std::size_t p = 0; p < parts; ++p) {
        const int own = part_slot[k * parts + p];
        if (own < 0) continue;
        const ChannelCrossings& lists = lists_of(p);
        const auto o = static_cast<std::size_t>(own);
        for (std::uint32_t e = lists.first[o]; e < lists.first[o + 1]; ++e) freeze_later(part_first[p] + lists.crossing[e]);
      }
    }
    std::sort(freezing.begin(), freezing.end());  // (flow order, as the filling takes them)
    for (const std::size_t i : freezing) {
      frozen[i] = 1;
      freezes[i] = 0;
      if (i < wanted) rates[i] = level;
      if (i < only.flows && group_frozen[i % only.groups] == 0) {
        group_frozen[i % only.groups] = 1;
        --groups_left;
      }
    }
    remaining -= freezing.size();
    if (groups_left == 0 || remaining == 0) {  // every group's slowest share known: the rest at the level
      for (std::size_t i = 0; i < wanted; ++i) {
        if (frozen[i] == 0) rates[i] = level;
      }
      solved = true;
      break;
    }
    // The frozen flows leave their channels: each hop takes the weight x
    // the level from the room and the weight from the load.
    const double taken = weight * level;
    changed.clear();
    std::size_t p = 0;
    for (const std::size_t i : freezing) {
      while (i >= part_first[p + 1]) ++p;
      const RoutedFlows& part = *job.parts[p];
      const std::size_t f = i - part_first[p];
      for (std::size_t j = part.first[f]; j < part.first[f + 1]; ++j) {
        const auto k = static_cast<std::size_t>(slot_of[static_cast<std::size_t>(part.channel[j])]);
        room[k] = std::max(0.0, room[k] - taken);
        load[k] = --unfrozen[k] == 0 ? 0.0 : load[k] - weight;
        if (changed_in[k] != round) {
          changed_in[k] = round;
          changed.push_back(k);
        }
      }
    }
    for (const std::size_t k : changed) {
      if (unfrozen[k] > 0) level_of[k] = room[k] / load[k];
    }
  }
  if (!solved) return false;
  out.assign(rates.begin(), rates.end());
  ++later_rounds_by_counts_;
  return true;
}

bool EstimateFabric::solve_alike_flows(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out) const {
  if (job.only.groups != 0 || job.least || !job.weight.empty() || job.write || job.parts.empty()) return false;
  // Parts routed between leaves: each flow also crosses its two links to
  // the leaves, of this rate, first and last (route_between_leaves).
  const double edge = job.edge_rate;
  const bool partly = job.share != 1;  // (solve_job's weights: the share, each flow)
  const double weight = partly ? job.share : 1.0;
  std::size_t flows = 0;
  std::size_t hops = 0;
  for (const RoutedFlows* part : job.parts) {
    flows += part->size();
    hops += part->channel.size();
  }
  if (flows == 0) return false;
  MaxMinShares::Work& w = solver.work();
  w.scratch_for(hops);
  int* const slot_of = slot_map(solver).data();
  double* const capacity = w.capacity_scratch.data();
  int* const crossings = w.count_scratch.data();  // per channel: its hops
  // The channels in the order the flows first cross them (densify's
  // slots), with their hops counted; every flow must cross one and have
  // the same narrowest channel.
  FirstCrossing slots{slot_of, w.slot_scratch.data()};
  const auto fresh = [&](std::size_t k, int c) {
    capacity[k] = channel_rate(c);
    crossings[k] = 0;
  };
  double narrowest_of_all = 0;
  bool alike = true;
  for (const RoutedFlows* part : job.parts) {
    const std::size_t* const first = part->first.data();
    const int* const channel = part->channel.data();
    if (edge > 0) {  // every flow's narrowest is its links to the leaves (route_between_leaves held the others no slower)
      narrowest_of_all = edge;
      for (std::size_t j = 0; j < part->channel.size(); ++j) ++crossings[slots.slot(channel[j], fresh)];
      continue;
    }
    for (std::size_t i = 0; i < part->size() && alike; ++i) {
      double narrowest = kUnlimited;
      for (std::size_t j = first[i]; j < first[i + 1]; ++j) {
        const int slot = slots.slot(channel[j], fresh);
        ++crossings[slot];
        const double rate_of = capacity[slot];
        narrowest = rate_of < narrowest ? rate_of : narrowest;  // (densify's minimum)
      }
      if (part == job.parts.front() && i == 0) narrowest_of_all = narrowest;
      alike = first[i] != first[i + 1] && narrowest == narrowest_of_all;
    }
  }
  if (!alike) {
    slots.forget();
    return false;
  }
  // Every flow's limit and bound, as densify finds them.
  const double limit = partly ? (narrowest_of_all < job.cap ? narrowest_of_all : job.cap) : job.cap;
  const double bound = std::min(limit, narrowest_of_all / weight);  // (flow_bound_and_demand's)
  // Kept: the channels whose demand (their hops' flows at the bound) does
  // not fit, progressive_filling's rule, numbered in order. (The demand is
  // the hops times one flow's, not summed hop by hop: it only decides which
  // channels are kept, with a margin far above the rounding.)
  const double wanted = weight * bound;
  // A link to a leaf carries one flow of each part at most: it stays out
  // when that many fit (SolveJob::edge_rate's condition).
  if (edge > 0 && static_cast<double>(job.parts.size()) * wanted > edge * kFits) {
    slots.forget();
    throw std::logic_error("estimate: flows routed between leaves counting more than 1 / parts each");
  }
  std::vector<int>& kept_slot = w.kept_as;  // per slot: its kept slot, -1 when dropped
  kept_slot.resize(slots.slots);
  DenseFlows& reduced = w.reduced;
  reduced.capacity.clear();
  for (std::size_t k = 0; k < slots.slots; ++k) {
    kept_slot[k] = -1;
    if (static_cast<double>(crossings[k]) * wanted > capacity[k] * kFits) {
      kept_slot[k] = static_cast<int>(reduced.capacity.size());
      reduced.capacity.push_back(capacity[k]);
    }
  }
  ++alike_solves_;
  const std::size_t wanted_rates = job.kept == 0 ? flows : std::min(job.kept, flows);
  out.assign(wanted_rates, bound);  // every flow at its bound, until filled
  if (reduced.capacity.empty()) {  // no channel can fill
    slots.forget();
    return true;
  }
  // The flows that cross a kept channel, in flow order, with their kept
  // hops and their limits from the dropped ones (progressive_filling's
  // reduced problem).
  std::vector<std::size_t>& filled = w.filled;
  filled.clear();
  std::vector<double>& reduced_limit = w.reduced_limit;
  reduced_limit.clear();
  std::vector<double>& reduced_weight = w.reduced_weight;  // empty while every flow counts fully
  reduced_weight.clear();
  reduced.first.assign(1, 0);
  reduced.slot.resize(hops);
  int* const reduced_slot = reduced.slot.data();
  const int* const kept = kept_slot.data();
  std::size_t at = 0;
  std::size_t flow = 0;
  for (const RoutedFlows* part : job.parts) {
    const std::size_t* const first = part->first.data();
    const int* const channel = part->channel.data();
    for (std::size_t i = 0; i < part->size(); ++i, ++flow) {
      double narrowest_dropped = edge;  // (its links to the leaves, when listed apart: dropped)
      bool dropped = edge > 0;
      const std::size_t from = at;
      for (std::size_t j = first[i]; j < first[i + 1]; ++j) {
        const int slot = slot_of[channel[j]];
        const int k = kept[slot];
        if (k >= 0) {
          reduced_slot[at++] = k;
        } else {
          narrowest_dropped = dropped ? std::min(narrowest_dropped, capacity[slot]) : capacity[slot];
          dropped = true;
        }
      }
      if (at == from) continue;
      filled.push_back(flow);
      reduced_limit.push_back(dropped ? std::min(limit, narrowest_dropped / weight) : limit);
      if (partly) reduced_weight.push_back(weight);
      reduced.first.push_back(at);
    }
  }
  reduced.slot.resize(at);
  slots.forget();
  fill_progressively(w, reduced, reduced_limit, reduced_weight, {});
  for (std::size_t k = 0; k < filled.size() && filled[k] < wanted_rates; ++k) out[filled[k]] = w.out[k];
  return true;
}

void EstimateFabric::solve_job(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out,
                               std::vector<double>& shares) const {
  if (job.edge_rate > 0) {  // (its parts list only some hops: no other solve reads them right)
    if (!solve_alike_flows(solver, job, out)) {
      throw std::logic_error("estimate: a solve of flows routed between leaves that are not alike");
    }
    return;
  }
  if (fill_groups_by_counts(solver, job, out)) return;
  if (solve_alike_flows(solver, job, out)) return;
  const std::vector<double>* weight = &job.weight;
  if (job.weight.empty() && job.share != 1) {
    std::size_t flows = 0;
    for (const RoutedFlows* part : job.parts) flows += part->size();
    shares.assign(flows, job.share);
    weight = &shares;
  }
  if (job.least) {  // (no part: nothing to solve, no rate)
    out.clear();
    if (job.parts.size() == 1) out.push_back(slowest_with(solver, *job.parts.front(), *weight, job.cap, job.write));
    return;
  }
  const std::vector<double>& rates = solve_with(solver, job.parts, *weight, job.cap, job.write, job.only);
  const std::size_t kept = job.kept == 0 ? rates.size() : std::min(job.kept, rates.size());
  out.assign(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(kept));
}

// The jobs and their rates in deques (an element stays where it is while
// more are added), taken in order under the mutex and solved outside it;
// each result goes to its job's place, so the order of solving changes
// nothing.
struct EstimateFabric::SolveBatch::State {
  explicit State(const EstimateFabric& f) : fabric(f) {}
  const EstimateFabric& fabric;
  std::mutex mutex;
  std::condition_variable added;
  std::deque<SolveJob> jobs;
  std::deque<std::vector<double>> rates;
  std::deque<char> solved;  // per job: its rates are in
  std::size_t next = 0;     // the first job not taken
  std::size_t leading = 0;  // the jobs before it are all solved
  bool closed = false;      // no job will be added (or the batch is given up)
  bool given_up = false;    // a thread failed: the others stop after their current job
  std::condition_variable solved_one;  // (finish(progress) waits on it for the helpers' jobs)
  std::vector<std::exception_ptr> failed;  // per thread; the caller's is 0
  bool helped = false;  // the fabric's solve threads serve it (until served())
};

// The fabric's other solve threads: each waits for a batch to be posted,
// takes its jobs (SolveBatch::work) until the batch is closed and every
// job taken, and reports back; one batch at a time (the fabric's rule).
struct EstimateFabric::SolveThreads {
  std::mutex mutex;
  std::condition_variable posted, served;
  std::vector<std::thread> threads;
  std::function<void(std::size_t)> task;  // being served: run by each thread with its number (1..)
  // Tasks posted so far, and the stop: written under the lock.
  std::atomic<std::uint64_t> posts{0};
  std::atomic<bool> stopping{false};
  std::size_t serving = 0;                // threads not yet back from the task posted
  std::size_t warming = 0;                // threads still making their working memory
  std::condition_variable warmed;
  // Posts `each` to every thread.
  void post(std::function<void(std::size_t)> each) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      task = std::move(each);
      serving = threads.size();
      ++posts;
    }
    posted.notify_all();
  }
  // Once every thread is back from the task posted.
  void wait_served() {
    std::unique_lock<std::mutex> lock(mutex);
    served.wait(lock, [this] { return serving == 0; });
    task = nullptr;
  }
};

EstimateFabric::~EstimateFabric() { stop_solve_threads(); }

void EstimateFabric::stop_solve_threads() const {
  if (!solve_pool_) return;
  {
    const std::lock_guard<std::mutex> lock(solve_pool_->mutex);
    solve_pool_->stopping = true;
  }
  solve_pool_->posted.notify_all();
  for (std::thread& t : solve_pool_->threads) t.join();
  solve_pool_.reset();
}

void EstimateFabric::set_solve_threads(int threads) {
  stop_solve_threads();  // (the next batch starts as many as it now may)
  solve_threads_ = threads < 1 ? 1 : threads;
}

void EstimateFabric::start_solve_threads() const {
  if (solve_threads_ > 1) solve_pool();
  // The caller's slot map too, while the helpers make theirs. (Its heap's
  // next pages are faulted in ahead of it already: tools/systemc_main.cpp.
  // Faulting 16 MiB more here made a 99,840-die command 10 ms longer for
  // 0.2 ms off its first point.)
  slot_map(solver_);
}

void EstimateFabric::await_solve_threads() const {
  if (!solve_pool_) return;
  std::unique_lock<std::mutex> lock(solve_pool_->mutex);
  solve_pool_->warmed.wait(lock, [this] { return solve_pool_->warming == 0; });
}

// A solve thread back from a task sleeps until the next is posted. (A
// 5 ms spin before sleeping, and each thread faulting in 4 MiB of its heap
// as it started, were tuned to the project's VM; against tools/bench's
// targets neither paid 10%, docs/performance.md.)
EstimateFabric::SolveThreads& EstimateFabric::solve_pool() const {
  if (solve_pool_) return *solve_pool_;
  solve_pool_ = std::make_unique<SolveThreads>();
  SolveThreads& pool = *solve_pool_;
  const auto helpers = static_cast<std::size_t>(std::max(solve_threads_, 1) - 1);
  if (helpers_.size() < helpers) helpers_.resize(helpers);
  for (std::size_t t = 0; t < helpers; ++t) {
    try {
      {
        const std::lock_guard<std::mutex> lock(pool.mutex);
        ++pool.warming;
      }
      pool.threads.emplace_back([this, &pool, t] {
        // Its slot map first, which every solve takes (one int a channel,
        // 5 MiB on 99,840 dies): faulted in as the thread starts, while the
        // caller plans and routes, rather than in its first job. Then the
        // first thread builds the NPUs' places, which the kinds of path
        // take, off the caller's way (1.3 MiB a level on 99,840 dies).
        // (Only a head start: should it fail, the first job or caller that
        // wants them makes them, and reports the failure; a call_once left
        // by an exception is not done.) await_solve_threads waits for this.
        try {
          slot_map(helpers_[t]);
          if (t == 0) places();
        } catch (...) {
        }
        {
          const std::lock_guard<std::mutex> lock(pool.mutex);
          --pool.warming;
        }
        pool.warmed.notify_all();
        std::uint64_t seen = 0;
        for (;;) {
          std::function<void(std::size_t)>* task = nullptr;
          {
            std::unique_lock<std::mutex> lock(pool.mutex);
            pool.posted.wait(lock, [&] { return pool.stopping || pool.posts != seen; });
            if (pool.stopping) return;
            seen = pool.posts;
            task = &pool.task;  // (left as it is until every thread is back)
          }
          (*task)(t + 1);
          {
            const std::lock_guard<std::mutex> lock(pool.mutex);
            --pool.serving;
          }
          pool.served.notify_all();
        }
      });
    } catch (const std::system_error&) {  // no more threads to be had: the others take the jobs
      const std::lock_guard<std::mutex> lock(pool.mutex);
      --pool.warming;
      break;
    }
    ++threads_started_;
  }
  return pool;
}

EstimateFabric::SolveBatch::SolveBatch(const EstimateFabric& fabric) : state_(std::make_unique<State>(fabric)) {
  state_->failed.resize(static_cast<std::size_t>(std::max(fabric.solve_threads_, 1)));
}

void EstimateFabric::SolveBatch::start_helpers() {
  // At the second job: a batch of one (a step solved at each point of a
  // sweep) is solved by the caller, without the other threads.
  if (state_->failed.size() < 2) return;
  SolveThreads& pool = state_->fabric.solve_pool();
  if (pool.threads.empty()) return;
  state_->helped = true;
  pool.post([this](std::size_t thread) { work(state_->fabric.helpers_[thread - 1], thread); });
}

void EstimateFabric::SolveBatch::served() {
  if (!state_->helped) return;
  state_->fabric.solve_pool_->wait_served();
  state_->helped = false;
}

void EstimateFabric::on_solve_threads(const std::function<void(std::size_t, std::size_t)>& each) const {
  SolveThreads* pool = solve_threads_ > 1 ? &solve_pool() : nullptr;
  if (pool == nullptr || pool->threads.empty()) return each(0, 1);
  const std::size_t threads = pool->threads.size() + 1;
  std::vector<std::exception_ptr> failed(threads);
  pool->post([&](std::size_t thread) {
    try {
      each(thread, threads);
    } catch (...) {
      failed[thread] = std::current_exception();
    }
  });
  try {
    each(0, threads);
  } catch (...) {
    failed[0] = std::current_exception();
  }
  pool->wait_served();
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
}

EstimateFabric::SolveBatch::~SolveBatch() {
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->closed = true;
    state_->next = state_->jobs.size();
  }
  state_->added.notify_all();
  served();
}

void EstimateFabric::SolveBatch::add(SolveJob job) {
  std::size_t jobs = 0;
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->jobs.push_back(std::move(job));
    state_->rates.emplace_back();
    state_->solved.push_back(0);
    jobs = state_->jobs.size();
  }
  if (jobs == (several_ ? 1 : 2)) start_helpers();
  state_->added.notify_one();
}

// Solves job i on `thread`; false when it failed (the batch is given up).
bool EstimateFabric::SolveBatch::solve(MaxMinShares& solver, std::size_t thread, std::size_t i,
                                       std::vector<double>& shares) {
  State& s = *state_;
  try {
    s.fabric.solve_job(solver, s.jobs[i], s.rates[i], shares);
    for (const CountedPart* part : s.jobs[i].counts) {
      if (part != nullptr) part->solved_one();
    }
  } catch (...) {
    s.failed[thread] = std::current_exception();
    {
      const std::lock_guard<std::mutex> lock(s.mutex);
      s.closed = s.given_up = true;
      s.next = s.jobs.size();  // the others stop after their current job
    }
    s.added.notify_all();
    s.solved_one.notify_all();
    return false;
  }
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.solved[i] = 1;
    while (s.leading < s.solved.size() && s.solved[s.leading] != 0) ++s.leading;
  }
  s.solved_one.notify_all();
  return true;
}

void EstimateFabric::SolveBatch::work(MaxMinShares& solver, std::size_t thread) {
  State& s = *state_;
  std::vector<double> shares;
  for (;;) {
    std::size_t i = 0;
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      s.added.wait(lock, [&s] { return s.next < s.jobs.size() || s.closed; });
      if (s.next >= s.jobs.size()) return;  // closed, every job taken
      i = s.next++;
    }
    if (!solve(solver, thread, i, shares)) return;
  }
}

std::vector<double>& EstimateFabric::SolveBatch::rates_of(std::size_t job) { return state_->rates[job]; }

std::vector<std::vector<double>> EstimateFabric::SolveBatch::finish(const std::function<void(std::size_t)>& progress) {
  State& s = *state_;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.closed = true;
  }
  s.added.notify_all();
  std::vector<double> shares;
  std::size_t told = 0;  // progress was last given this many
  try {
    for (;;) {
      constexpr std::size_t kNone = static_cast<std::size_t>(-1);
      std::size_t take = kNone;
      std::size_t leading = 0;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        if (s.next < s.jobs.size()) {
          take = s.next++;
        } else {  // every job taken: wait for the helpers' to come in
          s.solved_one.wait(lock, [&] { return s.leading > told || s.leading == s.jobs.size() || s.given_up; });
        }
        if (s.given_up) break;
        leading = s.leading;
      }
      // What is solved is given, then the job taken is solved. (Giving
      // first and taking a job after was slower on 1024 A2 NPUs' AlltoAll:
      // 10.9 against 10.5 ms, 11 alternated pairs.)
      if (leading > told) progress(told = leading);
      if (take != kNone) {
        if (!solve(s.fabric.solver_, 0, take, shares)) break;
      } else if (leading == s.jobs.size()) {
        break;
      }
    }
  } catch (...) {  // progress failed: the helpers stop after their current job
    {
      const std::lock_guard<std::mutex> lock(s.mutex);
      s.next = s.jobs.size();
    }
    served();
    throw;
  }
  served();
  for (const std::exception_ptr& e : s.failed) {
    if (e) std::rethrow_exception(e);
  }
  return std::vector<std::vector<double>>(std::make_move_iterator(s.rates.begin()), std::make_move_iterator(s.rates.end()));
}

std::vector<std::vector<double>> EstimateFabric::SolveBatch::finish() {
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->closed = true;
  }
  state_->added.notify_all();
  work(state_->fabric.solver_, 0);
  served();
  for (const std::exception_ptr& e : state_->failed) {
    if (e) std::rethrow_exception(e);
  }
  return std::vector<std::vector<double>>(std::make_move_iterator(state_->rates.begin()),
                                          std::make_move_iterator(state_->rates.end()));
}

std::vector<const std::vector<double>*> EstimateFabric::kept_rates_each(
    const std::vector<std::string>& keys, const std::function<SolveJob(std::size_t)>& job,
    const std::function<void()>& meanwhile) const {
  SolveBatch batch(*this);  // each job solved while the next is listed and routed
  std::vector<std::size_t> solved;  // the keys not kept yet, in order
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (rates_.count("solved/" + keys[i]) > 0) continue;
    bool repeated = false;  // a key listed twice is solved once
    for (const std::size_t k : solved) repeated = repeated || keys[k] == keys[i];
    if (!repeated) solved.push_back(i);
  }
  if (solved.size() > 1) batch.expect_several();
  for (const std::size_t i : solved) batch.add(job(i));
  if (meanwhile) meanwhile();
  std::vector<std::vector<double>> rates = batch.finish();
  for (std::size_t k = 0; k < solved.size(); ++k) rates_.emplace("solved/" + keys[solved[k]], std::move(rates[k]));
  std::vector<const std::vector<double>*> out;
  for (const std::string& key : keys) out.push_back(&rates_.at("solved/" + key));
  return out;
}

std::vector<double> EstimateFabric::densify(MaxMinShares& solver, const std::vector<const RoutedFlows*>& parts,
                                            const std::vector<double>& weight, double cap, bool write,
                                            bool demand) const {
  // Each channel crossed is given a dense slot when first crossed (a
  // supernode fabric has millions of channels and a solve touches a few
  // thousand); a flow's own limit is `cap` and, for a write, the write
  // caps of its links. The parts are read in place, not joined (copying
  // three rounds' routes for each solve cost what routing them did).
  const std::size_t links = 2 * spec_.links.size();
  std::size_t count = 0;
  std::size_t hops = 0;
  for (const RoutedFlows* part : parts) {
    count += part->size();
    hops += part->channel.size();
  }
  MaxMinShares::Work& w = solver.work();
  std::vector<int>& slot_of = slot_map(solver);
  DenseFlows& dense = w.dense;
  dense.first.resize(count + 1);
  dense.first[0] = 0;
  dense.slot.resize(hops);
  // A solve has at most one slot per hop: the per-slot arrays are filled in
  // scratch arrays of that size (grown, never shrunk: no zeroing per solve)
  // and copied out at the end, so that the loop below keeps its pointers in
  // registers (no push_back that may move them).
  w.scratch_for(hops);
  std::vector<double> limit(count, cap);
  const bool partly = !weight.empty();
  if (demand) w.bound.resize(count);
  std::size_t slots = 0;
  // Every array as a plain pointer copied into the loop's own locals: through
  // the vectors, or through a lambda's captures, every hop reloaded them (and
  // kept a flow's running minimum in memory), most of a solve's set-up. The
  // loop is made once per kind of solve, so that no hop tests what the solve fixes.
  auto list = [&](auto partly_kind, auto write_kind, auto demand_kind) {
    constexpr bool kPartly = decltype(partly_kind)::value;
    constexpr bool kWrite = decltype(write_kind)::value;
    constexpr bool kDemand = decltype(demand_kind)::value;
    int* const dense_slot = dense.slot.data();
    std::size_t* const dense_first = dense.first.data();
    double* const capacity_of = w.capacity_scratch.data();
    double* const limit_of = limit.data();
    double* const bound_of = kDemand ? w.bound.data() : nullptr;
    double* const load = kDemand ? w.demand_scratch.data() : nullptr;
    const double* const weights = kPartly ? weight.data() : nullptr;
    const double own_cap = cap;
    FirstCrossing found{slot_of.data(), w.slot_scratch.data()};
    const auto fresh = [&](std::size_t k, int c) {
      capacity_of[k] = channel_rate(c);
      if (kDemand) load[k] = 0.0;
    };
    std::size_t flow = 0;   // counted over the parts
    std::size_t at = 0;     // its first hop in dense.slot
    for (const RoutedFlows* part : parts) {
      const std::size_t* const first = part->first.data();
      const int* const channel = part->channel.data();
      const std::size_t flows = part->size();
      for (std::size_t k = 0; k < flows; ++k, ++flow) {
        double own = own_cap;
        double narrowest = kUnlimited;
        const std::size_t from = at;
        for (std::size_t j = first[k]; j < first[k + 1]; ++j) {
          const int c = channel[j];
          const int slot = found.slot(c, fresh);
          const double capacity = capacity_of[slot];
          dense_slot[at++] = slot;
          narrowest = capacity < narrowest ? capacity : narrowest;
          if (kWrite && static_cast<std::size_t>(c) < links) {
            own = std::min(own, rate(spec_.links[static_cast<std::size_t>(c) / 2].params.write_bandwidth));
          }
        }
        // A flow that counts for part of the time still moves no faster
        // than its narrowest channel.
        if (kPartly) own = narrowest < own ? narrowest : own;
        limit_of[flow] = own;
        dense_first[flow + 1] = at;
        if (kDemand) {  // progressive_filling's first pass (add_demand), the hops still in cache
          bound_of[flow] = at == from ? own
                                      : flow_bound_and_demand(own, narrowest, kPartly ? weights[flow] : 1.0, dense_slot,
                                                              from, at, load);
        }
      }
    }
    slots = found.slots;
  };
  using Yes = std::true_type;
  using No = std::false_type;
  auto with_write = [&](auto partly_kind, auto write_kind) {
    if (demand) {
      list(partly_kind, write_kind, Yes{});
    } else {
      list(partly_kind, write_kind, No{});
    }
  };
  auto with_partly = [&](auto partly_kind) {
    if (write) {
      with_write(partly_kind, Yes{});
    } else {
      with_write(partly_kind, No{});
    }
  };
  if (partly) {
    with_partly(Yes{});
  } else {
    with_partly(No{});
  }
  const auto found = static_cast<std::ptrdiff_t>(slots);
  dense.capacity.assign(w.capacity_scratch.begin(), w.capacity_scratch.begin() + found);
  if (demand) w.demand.assign(w.demand_scratch.begin(), w.demand_scratch.begin() + found);
  for (std::size_t k = 0; k < slots; ++k) slot_of[static_cast<std::size_t>(w.slot_scratch[k])] = -1;
  return limit;
}

double EstimateFabric::slowest_with(MaxMinShares& solver, const RoutedFlows& flows, const std::vector<double>& weight,
                                    double cap, bool write) const {
  // Progressive filling raises every flow's rate together from zero, so the
  // first flows to freeze do so at the least of the flows' limits and the
  // channels' capacity / load, and no flow ends below that level: it is
  // the least of solve_routed's rates (the same limits and divisions, the
  // loads summed in flow order as the filling sums them), found in one
  // pass over the hops instead of a filling. (The filling's channel
  // reduction leaves the level as it is: a channel it drops is never the
  // first to fill.) A channel's load goes to a slot given when it is first
  // crossed, as densify gives them, without listing the flows' slots.
  const std::size_t links = 2 * spec_.links.size();
  MaxMinShares::Work& w = solver.work();
  // (Per slot, densify's scratch arrays: plain pointers that no push_back
  // moves, and each channel's capacity found once, not at every hop.)
  const std::size_t hops = flows.channel.size();
  w.scratch_for(hops);
  double* const capacity = w.capacity_scratch.data();
  double* const load = w.demand_scratch.data();
  FirstCrossing slots{slot_map(solver).data(), w.slot_scratch.data()};
  const auto fresh = [&](std::size_t k, int c) {
    capacity[k] = channel_rate(c);
    load[k] = 0.0;
  };
  const std::size_t* const first = flows.first.data();
  const int* const channel = flows.channel.data();
  const bool partly = !weight.empty();
  double level = kUnlimited;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const double wi = partly ? weight[i] : 1.0;
    double limit = cap;
    for (std::size_t j = first[i]; j < first[i + 1]; ++j) {
      const int c = channel[j];
      const int slot = slots.slot(c, fresh);
      load[slot] += wi;
      // (densify's limits: a flow counted for part of the time still moves
      // no faster than its narrowest channel; a write, than its links' write caps)
      if (partly) limit = std::min(limit, capacity[slot]);
      if (write && static_cast<std::size_t>(c) < links) {
        limit = std::min(limit, rate(spec_.links[static_cast<std::size_t>(c) / 2].params.write_bandwidth));
      }
    }
    level = std::min(level, limit);
  }
  for (std::size_t k = 0; k < slots.slots; ++k) {
    if (load[k] > 0) level = std::min(level, capacity[k] / load[k]);
  }
  slots.forget();
  return level;
}

double EstimateFabric::shared_rate(const std::string& key, const std::function<void(std::vector<FlowPair>&)>& flows,
                                   double cap, bool write, bool sdma) const {
  const std::string memo = rate_memo(key, cap, write, sdma);
  const auto found = slowest_.find(memo);
  if (found != slowest_.end()) return found->second;
  const Listed& l = listed(flows);
  double least = l.routed.size() == 0 ? cap : slowest_routed(l.routed, l.weight, cap, write);
  if (sdma && l.routed.size() != 0) least = std::min(least, least_sdma_cap(l.flows, write));
  return slowest_.emplace(memo, least).first->second;
}

std::vector<double> EstimateFabric::shared_rates(const std::vector<RateQuery>& queries) const {
  std::vector<double> out(queries.size(), 0.0);
  std::vector<std::size_t> solved;  // the queries not memoized, one job each
  std::vector<std::string> memos;
  std::deque<Listed> lists;         // their flows and routes, kept until the batch ends
  std::vector<const Listed*> listed_for;  // per solved query, its list in `lists`
  std::vector<char> asked_again(queries.size(), 0);
  SolveBatch batch(*this);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const RateQuery& q = queries[i];
    std::string memo = rate_memo(q.key, q.cap, q.write, q.sdma);
    const auto found = slowest_.find(memo);
    if (found != slowest_.end()) {
      out[i] = found->second;
      continue;
    }
    if (std::find(memos.begin(), memos.end(), memo) != memos.end()) {
      asked_again[i] = 1;  // (filled from its first asking below)
      continue;
    }
    // The same list again (a step under two caps) keeps its routes: listed()'s rule.
    const Listed& l = listed(q.flows);
    if (lists.empty() || !same_flows(lists.back().flows, l.flows)) lists.push_back(l);
    memos.push_back(std::move(memo));
    solved.push_back(i);
    listed_for.push_back(&lists.back());
    if (lists.back().routed.size() == 0) {
      out[i] = q.cap;  // shared_rate's rule for no flow
      SolveJob none;
      none.least = true;
      batch.add(std::move(none));
      continue;
    }
    SolveJob job;
    job.parts = {&lists.back().routed};
    job.weight = lists.back().weight;
    job.cap = q.cap;
    job.write = q.write;
    job.least = true;
    batch.add(std::move(job));
  }
  const std::vector<std::vector<double>> least = batch.finish();
  for (std::size_t k = 0; k < solved.size(); ++k) {
    const std::size_t i = solved[k];
    if (!least[k].empty()) out[i] = least[k].front();
    if (queries[i].sdma && !least[k].empty()) out[i] = std::min(out[i], least_sdma_cap(listed_for[k]->flows, queries[i].write));
    slowest_.emplace(memos[k], out[i]);
  }
  for (std::size_t i = 0; i < queries.size(); ++i) {  // a query asked twice takes its first's
    if (asked_again[i]) out[i] = slowest_.at(rate_memo(queries[i].key, queries[i].cap, queries[i].write, queries[i].sdma));
  }
  return out;
}

void PairRuns::add_run(int from, int to, int stride, int count) {
  if (count <= 0) return;
  runs.push_back(Run{from, to, count == 1 ? 1 : stride, count});
  pairs += static_cast<std::size_t>(count);
}

void PairRuns::add_rotation(int first, int stride, int members, int ahead, std::size_t most) {
  const auto room = [&](int count) {  // (`pairs` counts the runs before, and the first of these)
    return static_cast<int>(std::min(static_cast<std::size_t>(count), most - std::min(most, pairs)));
  };
  add_run(first, first + ahead * stride, stride, room(members - ahead));
  add_run(first + (members - ahead) * stride, first, stride, room(ahead));
}

void PairRuns::add(int from, int to) {
  ++pairs;
  if (!runs.empty()) {
    Run& last = runs.back();
    const int step = from - last.from;  // as a run of one's stride
    if (last.count == 1 && step > 0 && to - last.to == step) {
      last.stride = step;
      last.count = 2;
      return;
    }
    if (last.count > 1 && from == last.from + last.count * last.stride && to == last.to + last.count * last.stride) {
      ++last.count;
      return;
    }
  }
  runs.push_back(Run{from, to, 1, 1});
}

namespace {
// code[k] takes one more bit per pair k of a run: whether the two NPUs'
// ids at one level are equal (`differ`: unequal). A run of stride 1
// compares two contiguous stretches, which the compiler vectorizes.
void add_level_bit(std::uint32_t* code, const int* level, const PairRuns::Run& run, bool differ) {
  const int* a = level + run.from;
  const int* b = level + run.to;
  const auto n = static_cast<std::size_t>(run.count);
  const std::uint32_t flip = differ ? 1 : 0;
  if (run.stride == 1) {
    for (std::size_t k = 0; k < n; ++k) code[k] = code[k] << 1 | ((a[k] == b[k] ? 1 : 0) ^ flip);
  } else {
    const auto stride = static_cast<std::ptrdiff_t>(run.stride);
    for (std::size_t k = 0; k < n; ++k) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(k) * stride;
      code[k] = code[k] << 1 | ((a[at] == b[at] ? 1 : 0) ^ flip);
    }
  }
}
}  // namespace

void EstimateFabric::classify(const PairRuns& pairs, std::vector<PathCost>& kinds,
                              std::vector<std::uint8_t>* kind_of) const {
  // A pair's kind follows its relation (relation()'s bits): the bits of
  // every pair first, level by level over each run (32-bit codes, four to
  // an SSE register; more fabrics than fit take relation() pair by pair),
  // then path() once per relation seen, found by the bits in a table when
  // they are few (millions of pairs on 99,840 dies), else by a scan of
  // those seen.
  const auto npus = static_cast<std::size_t>(spec_.npus);
  const std::size_t levels = 3 + spec_.fabrics.size();
  const std::size_t bits = 1 + levels;
  const bool packed = bits <= 32;
  const int* level = places().data();
  // A run of pairs a constant distance d apart repeats its relations: at a
  // level of blocks of size B (blocks_) the pairs (a, a + d) share a block
  // as a mod B + d lies in [0, B) when |d| is under B, never when it is B
  // or more, always in one block. So the relations repeat every lcm of the
  // blocks of the levels where |d| is under a block (1 when there is none:
  // the whole run one relation), and only that head of the run is
  // classified, the rest a copy of it (a pairwise step on 1024 A2 NPUs is
  // one relation a run; DirectFullmesh's near distances on 99,840 dies
  // repeat every 768 pairs of 8,192).
  constexpr std::size_t kRunOfOne = 64;  // (shorter runs: the per-pair loops cost no more than the check)
  const auto head_of = [&](const PairRuns::Run& run) {
    PairRuns::Run head = run;
    const auto count = static_cast<std::size_t>(std::max(run.count, 0));
    if (run.stride != 1 || count < kRunOfOne) return head;
    const auto distance = static_cast<std::size_t>(std::abs(run.to - run.from));
    std::size_t period = 1;
    for (std::size_t l = 0; l < levels; ++l) {
      const auto block = static_cast<std::size_t>(blocks_[l]);
      if (block == 0) return head;
      if (distance == 0 || distance >= block || block >= npus) continue;
      period = std::lcm(period, block);
      if (2 * period > count) return head;
    }
    head.count = static_cast<int>(period);
    return head;
  };
  std::vector<PairRuns::Run> heads;
  heads.reserve(pairs.runs.size());
  std::size_t head_pairs = 0;
  for (const PairRuns::Run& run : pairs.runs) {
    heads.push_back(head_of(run));
    head_pairs += static_cast<std::size_t>(heads.back().count);
  }
  // Only the kinds wanted (no pair's kind): a run of stride 1 over levels of
  // whole blocks keeps its relation between the pairs where one of its ends
  // enters a block of a level whose blocks are longer than its distance
  // (the others' bits never change), so its head is walked from one such
  // pair to the next, each taken as the pairs up to the next are: the same
  // relations, first seen at the same pairs. (DirectFullmesh's 256 sampled
  // distances on 99,840 dies: 768 pairs each, or about 100 pairs walked.)
  const bool whole_blocks =
      kind_of == nullptr && std::all_of(blocks_.begin(), blocks_.end(), [](int b) { return b > 0; });
  auto walked = [&](const PairRuns::Run& run) { return whole_blocks && run.stride == 1 && run.count >= static_cast<int>(kRunOfOne); };
  // From pair k of a walked run: the next pair where its relation may change (run.count: none).
  auto next_change = [&](const PairRuns::Run& run, int k) {
    const auto distance = static_cast<std::size_t>(std::abs(run.to - run.from));
    std::size_t next = static_cast<std::size_t>(run.count);
    for (std::size_t l = 0; l < levels; ++l) {
      const auto block = static_cast<std::size_t>(blocks_[l]);
      if (distance == 0 || distance >= block || block >= npus) continue;
      for (const int end : {run.from + k, run.to + k}) {
        next = std::min(next, static_cast<std::size_t>(k) + block - static_cast<std::size_t>(end) % block);
      }
    }
    return static_cast<int>(next);
  };
  std::vector<std::uint32_t>& code = codes_;
  code.resize(packed ? head_pairs : 0);
  std::size_t at = 0;
  for (const PairRuns::Run& run : packed ? heads : std::vector<PairRuns::Run>{}) {
    if (walked(run)) continue;  // (no codes: its relations are taken as it is walked)
    std::fill_n(code.begin() + static_cast<std::ptrdiff_t>(at), run.count, run.from == run.to ? 1 : 0);
    for (std::size_t l = 0; l < levels; ++l) add_level_bit(code.data() + at, level + l * npus, run, l == 2);
    at += static_cast<std::size_t>(run.count);
  }
  constexpr std::size_t kTableBits = 12;
  std::vector<std::int16_t> by_relation(bits <= kTableBits ? std::size_t{1} << bits : 0, -1);
  std::vector<std::pair<std::uint64_t, std::uint8_t>> seen;  // beyond kTableBits
  // A relation not seen yet: its path's kind, among `kinds` or added.
  const auto first_seen = [&](std::uint64_t rel, int from, int to) {
    const PathCost p = path(from, to);
    std::size_t i = 0;
    while (i < kinds.size() && !same_cost(kinds[i], p)) ++i;
    if (i == kinds.size()) kinds.push_back(p);
    const auto kind = static_cast<std::uint8_t>(std::min<std::size_t>(i, 255));
    if (!by_relation.empty()) {
      by_relation[rel] = static_cast<std::int16_t>(kind);
    } else {
      seen.emplace_back(rel, kind);
    }
    return kind;
  };
  // A relation's kind, by the table or among those seen, else first_seen's.
  const auto kind_of_relation = [&](std::uint64_t rel, int from, int to) {
    int kind = -1;
    if (!by_relation.empty()) {
      kind = by_relation[rel];
    } else {
      const auto known = std::find_if(seen.begin(), seen.end(), [rel](const auto& s) { return s.first == rel; });
      if (known != seen.end()) kind = known->second;
    }
    return kind < 0 ? first_seen(rel, from, to) : kind;
  };
  if (kind_of != nullptr) kind_of->resize(pairs.pairs);
  std::uint8_t* out = kind_of != nullptr ? kind_of->data() : nullptr;
  at = 0;                 // the run's first pair in `out`
  std::size_t coded = 0;  // its head's first in `code`
  for (std::size_t r = 0; r < heads.size(); ++r) {
    const PairRuns::Run& run = heads[r];
    if (walked(run)) {
      for (int k = 0; k < run.count; k = next_change(run, k)) kind_of_relation(relation(run.from + k, run.to + k), run.from + k, run.to + k);
      continue;  // (no kind_of to fill, no codes taken)
    }
    if (packed && !by_relation.empty()) {  // the common case, a lookup per pair
      const std::int16_t* table = by_relation.data();
      for (int k = 0; k < run.count; ++k) {
        const std::uint32_t rel = code[coded + static_cast<std::size_t>(k)];
        int kind = table[rel];
        if (kind < 0) kind = first_seen(rel, run.from + k * run.stride, run.to + k * run.stride);
        if (out != nullptr) out[at + static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(kind);
      }
    } else {
      for (int k = 0; k < run.count; ++k) {
        const int from = run.from + k * run.stride;
        const int to = run.to + k * run.stride;
        const int kind = kind_of_relation(packed ? code[coded + static_cast<std::size_t>(k)] : relation(from, to), from, to);
        if (out != nullptr) out[at + static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(kind);
      }
    }
    // The rest of the run: its head's kinds again, period after period.
    const auto period = static_cast<std::size_t>(run.count);
    const auto count = static_cast<std::size_t>(pairs.runs[r].count);
    for (std::size_t done = period; out != nullptr && done < count;) {
      const std::size_t copied = std::min(done, count - done);
      std::copy_n(out + at, copied, out + at + done);
      done += copied;
    }
    at += count;
    coded += period;
  }
}

const std::vector<PathCost>& EstimateFabric::path_kinds(const std::string& key,
                                                        const std::function<void(PairRuns&)>& pairs) const {
  const auto found = kinds_.find(key);
  if (found != kinds_.end()) return found->second;
  PairRuns runs;
  pairs(runs);
  std::vector<PathCost> kinds;
  classify(runs, kinds, nullptr);
  return kinds_.emplace(key, std::move(kinds)).first->second;
}

const EstimateFabric::PairTable& EstimateFabric::pair_table(const std::string& key,
                                                            const std::function<void(PairRuns&)>& pairs) const {
  const auto found = tables_.find(key);
  if (found != tables_.end()) return found->second;
  PairRuns runs;
  pairs(runs);
  PairTable table;
  classify(runs, table.kinds, &table.kind_of);
  return tables_.emplace(key, std::move(table)).first->second;
}

const std::vector<EstimateFabric::RankStep>& EstimateFabric::rank_steps(
    const std::string& key, const std::function<std::vector<RankStep>()>& build) const {
  auto found = rank_steps_.find(key);
  if (found == rank_steps_.end()) found = rank_steps_.emplace(key, build()).first;
  return found->second;
}

}  // namespace hcclsim
