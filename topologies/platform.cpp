#include "topologies/platform.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>

namespace hcclsim {

namespace {
std::string node_name(int node, int npus) {
  return node < npus ? "npu" + std::to_string(node) : "switch" + std::to_string(node - npus);
}
}  // namespace

Platform::Platform(const TopologySpec& spec) : spec_(spec), clock_(std::make_unique<ChannelClock>("channel_clock")) {
  const int nodes = spec.npus + spec.switches;
  auto bad_node = [&](int node) { return node < 0 || node >= nodes; };
  for (const LinkSpec& link : spec.links) {
    if (bad_node(link.a) || bad_node(link.b) || link.a == link.b) {
      throw std::invalid_argument("topology '" + spec.name + "': " + link.kind + " link " + std::to_string(link.a) +
                                  "-" + std::to_string(link.b) + " does not join two different nodes of [0, " +
                                  std::to_string(nodes - 1) + "]");
    }
  }
  for (const FabricSpec& f : spec.fabrics) {
    const std::string where = "topology '" + spec.name + "': fabric '" + f.kind + "'";
    if (f.leaf_of.size() != static_cast<std::size_t>(spec.npus)) {
      throw std::invalid_argument(where + " gives a leaf for " + std::to_string(f.leaf_of.size()) + " NPUs, not " +
                                  std::to_string(spec.npus));
    }
    if (f.spines_of.size() > static_cast<std::size_t>(nodes)) {
      throw std::invalid_argument(where + " lists spines for more nodes than the topology has");
    }
    for (const int leaf : f.leaf_of) {
      if (leaf != -1 && bad_node(leaf)) throw std::invalid_argument(where + " names a leaf outside the nodes");
    }
    for (const auto& spines : f.spines_of) {
      for (const int sw : spines) {
        if (bad_node(sw)) throw std::invalid_argument(where + " names a spine outside the nodes");
      }
    }
  }
  adjacency_.resize(static_cast<std::size_t>(nodes));
  FlowNetwork* flows = nullptr;
  if (spec.network == NetworkModel::Flow) {
    auto owned = std::make_unique<FlowNetwork>("flow_network", spec.flow_batching);
    flows = owned.get();
    network_ = std::move(owned);
  } else {
    network_ = std::make_unique<SegmentNetwork>();
  }
  for (int n = 0; n < spec.npus; ++n) {
    const std::string name = "npu" + std::to_string(n);
    engines_.push_back(std::make_unique<TaskEngine>((name + "_engine").c_str(), n, spec.npu, *network_));
    local_memory_.push_back(
        std::make_unique<Channel>((name + "_memory").c_str(), spec.npu.local_memory, name + " local memory", *clock_));
  }
  for (const LinkSpec& link : spec.links) {
    for (const auto& [from, to] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      const std::string label = link.kind + " " + node_name(from, spec.npus) + "->" + node_name(to, spec.npus);
      std::string module = label;
      std::replace(module.begin(), module.end(), ' ', '_');
      std::replace(module.begin(), module.end(), '>', '_');
      std::replace(module.begin(), module.end(), '-', '_');
      channels_.push_back(std::make_unique<Channel>(module.c_str(), link.params, label, *clock_));
      adjacency_[static_cast<std::size_t>(from)].push_back({to, channels_.back().get()});
    }
  }
  if (flows != nullptr) {
    for (const auto& c : local_memory_) flows->add_channel(*c);
    for (const auto& c : channels_) flows->add_channel(*c);
  }
  for (auto& list : adjacency_) {
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  }
}

Platform::~Platform() = default;

int Platform::server_of(int npu) const {
  return spec_.server_of.empty() ? npu / spec_.npus_per_server : spec_.server_of.at(static_cast<std::size_t>(npu));
}

bool Platform::rdma_between(int a, int b) const {
  if (spec_.sdma_domain_of.empty()) return false;
  return spec_.sdma_domain_of.at(static_cast<std::size_t>(a)) != spec_.sdma_domain_of.at(static_cast<std::size_t>(b));
}

Channel* Platform::channel(int a, int b) const {
  const auto& list = adjacency_.at(static_cast<std::size_t>(a));
  const auto it = std::lower_bound(list.begin(), list.end(), b, [](const auto& x, int node) { return x.first < node; });
  return it != list.end() && it->first == b ? it->second : nullptr;
}

namespace {
// ECMP: a fixed mix of (src, dst) (splitmix64's finalizer), so that a pair
// always takes the same spine and different pairs spread over the spines.
std::uint64_t pair_hash(int src, int dst) {
  std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                    static_cast<std::uint32_t>(dst);
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

// NPU -> its leaf -> (same leaf) NPU, or -> a spine both leaves link to ->
// the other leaf -> NPU. False if the fabric does not reach both NPUs.
bool Platform::fabric_route(const FabricSpec& fabric, int src, int dst, std::vector<Channel*>& path) const {
  const int leaf_src = fabric.leaf_of[static_cast<std::size_t>(src)];
  const int leaf_dst = fabric.leaf_of[static_cast<std::size_t>(dst)];
  if (leaf_src < 0 || leaf_dst < 0) return false;
  Channel* up = channel(src, leaf_src);
  Channel* down = channel(leaf_dst, dst);
  if (up == nullptr || down == nullptr) return false;
  if (leaf_src == leaf_dst) {
    path = {up, down};
    return true;
  }
  if (static_cast<std::size_t>(leaf_src) >= fabric.spines_of.size()) return false;
  const std::vector<int>& spines = fabric.spines_of[static_cast<std::size_t>(leaf_src)];
  // Spines both leaves reach, counted, then the hash picks one of them.
  std::size_t shared = 0;
  for (const int sw : spines) {
    if (channel(leaf_src, sw) != nullptr && channel(sw, leaf_dst) != nullptr) ++shared;
  }
  if (shared == 0) return false;
  std::size_t pick = static_cast<std::size_t>(pair_hash(src, dst) % shared);
  for (const int sw : spines) {
    Channel* to_spine = channel(leaf_src, sw);
    Channel* from_spine = to_spine != nullptr ? channel(sw, leaf_dst) : nullptr;
    if (from_spine == nullptr) continue;
    if (pick-- == 0) {
      path = {up, to_spine, from_spine, down};
      return true;
    }
  }
  return false;
}

// Breadth-first search for small hand-written topologies: switches may be
// crossed, other NPUs may not. Empty if there is no path.
std::vector<Channel*> Platform::shortest_route(int src, int dst) const {
  const std::size_t nodes = adjacency_.size();
  std::vector<int> parent(nodes, -1);
  std::vector<Channel*> via(nodes, nullptr);
  std::deque<int> queue{src};
  parent[static_cast<std::size_t>(src)] = src;
  while (!queue.empty() && parent[static_cast<std::size_t>(dst)] < 0) {
    const int node = queue.front();
    queue.pop_front();
    for (const auto& [next, ch] : adjacency_[static_cast<std::size_t>(node)]) {
      if (parent[static_cast<std::size_t>(next)] >= 0) continue;
      parent[static_cast<std::size_t>(next)] = node;
      via[static_cast<std::size_t>(next)] = ch;
      if (next >= spec_.npus || next == dst) queue.push_back(next);
    }
  }
  std::vector<Channel*> path;
  if (parent[static_cast<std::size_t>(dst)] < 0) return path;
  for (int node = dst; node != src; node = parent[static_cast<std::size_t>(node)]) {
    path.push_back(via[static_cast<std::size_t>(node)]);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

const std::vector<Channel*>& Platform::route(int src, int dst) {
  if (src < 0 || src >= spec_.npus || dst < 0 || dst >= spec_.npus) {
    throw std::invalid_argument("route from npu" + std::to_string(src) + " to npu" + std::to_string(dst) +
                                ": topology '" + spec_.name + "' has npus 0.." + std::to_string(spec_.npus - 1));
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
  auto found = routes_.find(key);
  if (found != routes_.end()) return found->second;
  std::vector<Channel*> path;
  if (src == dst) {
    path.push_back(local_memory_.at(static_cast<std::size_t>(src)).get());
  } else if (Channel* direct = channel(src, dst)) {
    path.push_back(direct);
  } else {
    // Between SDMA domains data goes through the NICs ("roce"); inside one,
    // through the other fabrics (the UB switches of an A3 supernode).
    const bool rdma = rdma_between(src, dst);
    for (const FabricSpec& fabric : spec_.fabrics) {
      if ((fabric.kind == "roce") == rdma && fabric_route(fabric, src, dst, path)) break;
    }
    if (path.empty()) path = shortest_route(src, dst);
    if (path.empty()) {
      throw std::invalid_argument("no link path from npu" + std::to_string(src) + " to npu" + std::to_string(dst) +
                                  " in topology '" + spec_.name + "'");
    }
  }
  return routes_.emplace(key, std::move(path)).first->second;
}

std::uint64_t Platform::activations() const {
  std::uint64_t total = 0;
  for (const auto& e : engines_) total += e->activations();
  for (const auto& c : local_memory_) total += c->activations();
  for (const auto& c : channels_) total += c->activations();
  return total + network_->activations();
}

}  // namespace hcclsim
