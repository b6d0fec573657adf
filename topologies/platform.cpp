#include "topologies/platform.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace hcclsim {

namespace {
std::string node_name(int node, int npus) {
  return node < npus ? "npu" + std::to_string(node) : "switch" + std::to_string(node - npus);
}
}  // namespace

Platform::Platform(const TopologySpec& spec) : spec_(spec) {
  const int nodes = spec.npus + spec.switches;
  adjacency_.resize(static_cast<std::size_t>(nodes));
  for (int n = 0; n < spec.npus; ++n) {
    const std::string name = "npu" + std::to_string(n);
    engines_.push_back(std::make_unique<TaskEngine>((name + "_engine").c_str(), n, spec.npu));
    local_memory_.push_back(
        std::make_unique<Channel>((name + "_memory").c_str(), spec.npu.local_memory, name + " local memory"));
  }
  for (const LinkSpec& link : spec.links) {
    for (const auto& [from, to] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      const std::string label = link.kind + " " + node_name(from, spec.npus) + "->" + node_name(to, spec.npus);
      std::string module = label;
      std::replace(module.begin(), module.end(), ' ', '_');
      std::replace(module.begin(), module.end(), '>', '_');
      std::replace(module.begin(), module.end(), '-', '_');
      channels_.push_back(std::make_unique<Channel>(module.c_str(), link.params, label));
      adjacency_[static_cast<std::size_t>(from)].push_back({to, channels_.back().get()});
    }
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
  for (const auto& [to, ch] : adjacency_.at(static_cast<std::size_t>(a))) {
    if (to == b) return ch;
  }
  return nullptr;
}

const std::vector<Channel*>& Platform::route(int src, int dst) {
  auto found = routes_.find({src, dst});
  if (found != routes_.end()) return found->second;
  std::vector<Channel*> path;
  if (src == dst) {
    path.push_back(local_memory_.at(static_cast<std::size_t>(src)).get());
  } else {
    // Breadth-first search; switches may be crossed, other NPUs may not.
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
    if (parent[static_cast<std::size_t>(dst)] < 0) {
      throw std::invalid_argument("no link path from npu" + std::to_string(src) + " to npu" + std::to_string(dst) +
                                  " in topology '" + spec_.name + "'");
    }
    for (int node = dst; node != src; node = parent[static_cast<std::size_t>(node)]) {
      path.push_back(via[static_cast<std::size_t>(node)]);
    }
    std::reverse(path.begin(), path.end());
  }
  return routes_.emplace(std::pair{src, dst}, std::move(path)).first->second;
}

std::uint64_t Platform::activations() const {
  std::uint64_t total = 0;
  for (const auto& e : engines_) total += e->activations();
  for (const auto& c : local_memory_) total += c->activations();
  for (const auto& c : channels_) total += c->activations();
  return total;
}

}  // namespace hcclsim
