#include "topologies/routes.h"

#include <algorithm>
#include <cstdint>
#include <deque>

namespace hcclsim {

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

RouteFinder::RouteFinder(const TopologySpec& spec) : spec_(&spec) {
  adjacency_.resize(static_cast<std::size_t>(spec.npus + spec.switches));
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    const LinkSpec& link = spec.links[i];
    // A link outside the nodes is the Platform's error to report; skip it here.
    if (link.a < 0 || link.b < 0 || link.a >= spec.npus + spec.switches || link.b >= spec.npus + spec.switches) continue;
    const int forward = static_cast<int>(2 * i);
    adjacency_.at(static_cast<std::size_t>(link.a)).push_back({link.b, forward});
    adjacency_.at(static_cast<std::size_t>(link.b)).push_back({link.a, forward + 1});
  }
  for (auto& list : adjacency_) {
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  }
}

int RouteFinder::channel(int a, int b) const {
  const auto& list = adjacency_.at(static_cast<std::size_t>(a));
  const auto it = std::lower_bound(list.begin(), list.end(), b, [](const auto& x, int node) { return x.first < node; });
  return it != list.end() && it->first == b ? it->second : -1;
}

bool RouteFinder::rdma_between(int a, int b) const {
  if (spec_->sdma_domain_of.empty()) return false;
  return spec_->sdma_domain_of.at(static_cast<std::size_t>(a)) != spec_->sdma_domain_of.at(static_cast<std::size_t>(b));
}

bool RouteFinder::fabric_path(const FabricSpec& fabric, int src, int dst, std::vector<int>& path) const {
  const int leaf_src = fabric.leaf_of[static_cast<std::size_t>(src)];
  const int leaf_dst = fabric.leaf_of[static_cast<std::size_t>(dst)];
  if (leaf_src < 0 || leaf_dst < 0) return false;
  const int up = channel(src, leaf_src);
  const int down = channel(leaf_dst, dst);
  if (up < 0 || down < 0) return false;
  if (leaf_src == leaf_dst) {
    path = {up, down};
    return true;
  }
  if (static_cast<std::size_t>(leaf_src) >= fabric.spines_of.size()) return false;
  const std::vector<int>& spines = fabric.spines_of[static_cast<std::size_t>(leaf_src)];
  // Spines both leaves reach, counted, then the hash picks one of them.
  std::size_t shared = 0;
  for (const int sw : spines) {
    if (channel(leaf_src, sw) >= 0 && channel(sw, leaf_dst) >= 0) ++shared;
  }
  if (shared == 0) return false;
  std::size_t pick = static_cast<std::size_t>(pair_hash(src, dst) % shared);
  for (const int sw : spines) {
    const int to_spine = channel(leaf_src, sw);
    const int from_spine = to_spine >= 0 ? channel(sw, leaf_dst) : -1;
    if (from_spine < 0) continue;
    if (pick-- == 0) {
      path = {up, to_spine, from_spine, down};
      return true;
    }
  }
  return false;
}

std::vector<int> RouteFinder::shortest_path(int src, int dst) const {
  const std::size_t nodes = adjacency_.size();
  std::vector<int> parent(nodes, -1);
  std::vector<int> via(nodes, -1);
  std::deque<int> queue{src};
  parent[static_cast<std::size_t>(src)] = src;
  while (!queue.empty() && parent[static_cast<std::size_t>(dst)] < 0) {
    const int node = queue.front();
    queue.pop_front();
    for (const auto& [next, ch] : adjacency_[static_cast<std::size_t>(node)]) {
      if (parent[static_cast<std::size_t>(next)] >= 0) continue;
      parent[static_cast<std::size_t>(next)] = node;
      via[static_cast<std::size_t>(next)] = ch;
      if (next >= spec_->npus || next == dst) queue.push_back(next);
    }
  }
  std::vector<int> path;
  if (parent[static_cast<std::size_t>(dst)] < 0) return path;
  for (int node = dst; node != src; node = parent[static_cast<std::size_t>(node)]) {
    path.push_back(via[static_cast<std::size_t>(node)]);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int> RouteFinder::path(int src, int dst) const {
  const int direct = channel(src, dst);
  if (direct >= 0) return {direct};
  std::vector<int> path;
  const bool rdma = rdma_between(src, dst);
  for (const FabricSpec& fabric : spec_->fabrics) {
    if ((fabric.kind == "roce") == rdma && fabric_path(fabric, src, dst, path)) return path;
  }
  return shortest_path(src, dst);
}

}  // namespace hcclsim
