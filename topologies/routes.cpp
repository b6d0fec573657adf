#include "topologies/routes.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>

namespace hcclsim {

RouteFinder::RouteFinder(const TopologySpec& spec)
    : spec_(&spec),
      npu_ends_(spec.fabrics.size()),
      leaf_spines_at_(spec.fabrics.size()),
      spine_lists_(spec.fabrics.size()),
      spines_between_(spec.fabrics.size()) {
  int fabrics_of_kind[2] = {0, 0};
  for (std::size_t f = 0; f < spec.fabrics.size(); ++f) {
    roce_.push_back(spec.fabrics[f].kind == "roce" ? 1 : 0);
    const std::size_t kind = roce_.back() != 0 ? 1 : 0;
    only_fabric_[kind] = static_cast<int>(f);
    ++fabrics_of_kind[kind];
    npu_ends_[f].resize(static_cast<std::size_t>(spec.npus));
    leaf_spines_at_[f].assign(spec.fabrics[f].spines_of.size(), -1);
  }
  for (int kind = 0; kind < 2; ++kind) {
    if (fabrics_of_kind[kind] != 1) only_fabric_[kind] = -1;
  }
  // Compressed rows: count each node's links, then place them, in link
  // order, and sort each row by neighbour (one array, not a vector per node:
  // a 99,840-die supernode has millions of links).
  const std::size_t nodes = static_cast<std::size_t>(spec.npus + spec.switches);
  auto linked = [&](const LinkSpec& link) {
    // A link outside the nodes is the Platform's error to report; skip it here.
    return link.a >= 0 && link.b >= 0 && link.a < spec.npus + spec.switches && link.b < spec.npus + spec.switches;
  };
  first_neighbour_.assign(nodes + 1, 0);
  for (const LinkSpec& link : spec.links) {
    if (!linked(link)) continue;
    ++first_neighbour_[static_cast<std::size_t>(link.a) + 1];
    ++first_neighbour_[static_cast<std::size_t>(link.b) + 1];
  }
  for (std::size_t n = 0; n < nodes; ++n) first_neighbour_[n + 1] += first_neighbour_[n];
  neighbours_.resize(first_neighbour_[nodes]);
  std::vector<std::size_t> fill(first_neighbour_.begin(), first_neighbour_.end() - 1);
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    const LinkSpec& link = spec.links[i];
    if (!linked(link)) continue;
    const int forward = static_cast<int>(2 * i);
    neighbours_[fill[static_cast<std::size_t>(link.a)]++] = {link.b, forward};
    neighbours_[fill[static_cast<std::size_t>(link.b)]++] = {link.a, forward + 1};
  }
  // (Builders list links in node order, so most rows are in order already.)
  const auto by_neighbour = [](const auto& x, const auto& y) { return x.first < y.first; };
  for (std::size_t n = 0; n < nodes; ++n) {
    const auto begin = neighbours_.begin() + static_cast<std::ptrdiff_t>(first_neighbour_[n]);
    const auto end = neighbours_.begin() + static_cast<std::ptrdiff_t>(first_neighbour_[n + 1]);
    if (!std::is_sorted(begin, end, by_neighbour)) std::sort(begin, end, by_neighbour);
  }
  npu_neighbours_.assign(nodes, {1, 0});
  for (std::size_t n = 0; n < nodes; ++n) {
    for (std::size_t k = first_neighbour_[n]; k < first_neighbour_[n + 1] && neighbours_[k].first < spec.npus; ++k) {
      auto& [lowest, highest] = npu_neighbours_[n];
      if (lowest > highest) lowest = neighbours_[k].first;  // (rows by neighbour: the first is the lowest)
      highest = neighbours_[k].first;
    }
  }
}

int RouteFinder::channel(int a, int b) const {
  if (a < 0 || static_cast<std::size_t>(a) + 1 >= first_neighbour_.size()) throw std::out_of_range("RouteFinder::channel: no node " + std::to_string(a));
  const auto begin = neighbours_.begin() + static_cast<std::ptrdiff_t>(first_neighbour_[static_cast<std::size_t>(a)]);
  const auto end = neighbours_.begin() + static_cast<std::ptrdiff_t>(first_neighbour_[static_cast<std::size_t>(a) + 1]);
  const auto it = std::lower_bound(begin, end, b, [](const auto& x, int node) { return x.first < node; });
  return it != end && it->first == b ? it->second : -1;
}

bool RouteFinder::rdma_between(int a, int b) const {
  if (spec_->sdma_domain_of.empty()) return false;
  return spec_->sdma_domain_of.at(static_cast<std::size_t>(a)) != spec_->sdma_domain_of.at(static_cast<std::size_t>(b));
}

int RouteFinder::add_leaf_spines(std::size_t fabric, int leaf) const {
  const std::vector<int>& spines = spec_->fabrics[fabric].spines_of[static_cast<std::size_t>(leaf)];
  LeafSpines out;
  out.first = leaf_spine_hops_.size();
  out.count = spines.size();
  bool linked = true;
  for (const int sw : spines) {
    leaf_spine_hops_.emplace_back(channel(leaf, sw), channel(sw, leaf));
    linked = linked && leaf_spine_hops_.back().first >= 0 && leaf_spine_hops_.back().second >= 0;
  }
  if (linked) {
    std::map<std::vector<int>, int>& lists = spine_lists_[fabric];
    out.list = lists.try_emplace(spines, static_cast<int>(lists.size())).first->second;  // (a new list: the next id)
  }
  const int at = static_cast<int>(leaf_spines_.size());
  leaf_spines_at_[fabric][static_cast<std::size_t>(leaf)] = at;
  leaf_spines_.push_back(out);
  return at;
}

const RouteFinder::NpuEnd& RouteFinder::fill_npu_end(std::size_t f, int n) const {
  const std::vector<int>& leaf_of = spec_->fabrics[f].leaf_of;
  NpuEnd end;
  end.leaf = leaf_of[static_cast<std::size_t>(n)];
  end.up = end.down = -1;
  if (end.leaf >= 0) {
    end.up = channel(n, end.leaf);
    end.down = channel(end.leaf, n);
    if (static_cast<std::size_t>(end.leaf) < leaf_spines_at_[f].size()) {
      int at = leaf_spines_at_[f][static_cast<std::size_t>(end.leaf)];
      if (at < 0) at = add_leaf_spines(f, end.leaf);
      const LeafSpines& spines = leaf_spines_[static_cast<std::size_t>(at)];
      end.list = spines.list;
      end.first = static_cast<std::uint32_t>(spines.first);
      end.count = static_cast<std::uint32_t>(spines.count);
    } else {
      end.list = kNoSpinesRow;
    }
  }
  NpuEnd& kept = npu_ends_[f][static_cast<std::size_t>(n)];
  kept = end;
  return kept;
}

const RouteFinder::LeafSpineRoutes& RouteFinder::leaf_spine_routes() const {
  if (leaf_spine_routes_) return *leaf_spine_routes_;
  auto routes = std::make_unique<LeafSpineRoutes>();
  const auto npus = static_cast<std::size_t>(spec_->npus);
  routes->npus_ = static_cast<unsigned>(npus);
  routes->neighbours_ = npu_neighbours_.data();
  const std::vector<int>& domain = spec_->sdma_domain_of;
  routes->domain_ = domain.empty() ? nullptr : domain.data();
  const bool domains_known = domain.empty() || domain.size() >= npus;
  for (std::size_t kind = 0; kind < 2 && domains_known && npu_neighbours_.size() >= npus; ++kind) {
    const int f = only_fabric_[kind];
    if (f < 0) continue;
    const auto fabric = static_cast<std::size_t>(f);
    const FabricArrays a = arrays_of(fabric);
    if (a.npus < npus) continue;
    // Each NPU's end as fabric_hops reads it (looked up once each): the
    // leaves numbered as first met, each with the one list of spines (so
    // spine k of every leaf is the same spine: fabric_hops' pick).
    LeafSpineRoutes::Kind k;
    std::vector<int> index_of(a.leaves, -1);
    int list = -1;
    bool uniform = true;
    k.leaf_of.resize(npus);
    for (std::size_t n = 0; n < npus && uniform; ++n) {
      const NpuEnd& end = npu_end(fabric, a, static_cast<int>(n));
      if (end.up < 0 || end.down < 0 || end.list == kNoSpinesRow) {
        uniform = false;
        break;
      }
      int& index = index_of[static_cast<std::size_t>(end.leaf)];
      if (index < 0) {
        if (list < 0) {
          list = end.list;
          k.spines = end.count;
        }
        if (end.list < 0 || end.list != list || end.count == 0) {
          uniform = false;
          break;
        }
        index = static_cast<int>(k.to_spine.size() / k.spines);
        for (std::size_t s = 0; s < k.spines; ++s) {
          k.to_spine.push_back(leaf_spine_hops_[end.first + s].first);
          k.from_spine.push_back(leaf_spine_hops_[end.first + s].second);
        }
      }
      k.leaf_of[n] = index;
      k.edges.push_back(end.up);
      k.edges.push_back(end.down);
    }
    if (!uniform || k.spines == 0) continue;
    routes->kinds_[kind] = std::move(k);
  }
  leaf_spine_routes_ = std::move(routes);
  return *leaf_spine_routes_;
}

const RouteFinder::SpineHops& RouteFinder::spines_between(std::size_t fabric, int leaf_src, int leaf_dst) const {
  auto& memo = spines_between_[fabric];
  const std::uint64_t key = static_cast<std::uint64_t>(static_cast<std::uint32_t>(leaf_src)) << 32 |
                            static_cast<std::uint32_t>(leaf_dst);
  const auto found = memo.find(key);
  if (found != memo.end()) return found->second;
  // The spines of the source leaf, in their order, that link to both leaves.
  SpineHops hops;
  hops.first = spine_hops_.size();
  for (const int sw : spec_->fabrics[fabric].spines_of[static_cast<std::size_t>(leaf_src)]) {
    const int to_spine = channel(leaf_src, sw);
    const int from_spine = to_spine >= 0 ? channel(sw, leaf_dst) : -1;
    if (from_spine >= 0) spine_hops_.emplace_back(to_spine, from_spine);
  }
  hops.count = spine_hops_.size() - hops.first;
  return memo.emplace(key, hops).first->second;
}

bool RouteFinder::spines_path(std::size_t fabric_index, int src, int dst, int leaf_src, int leaf_dst, int up, int down,
                              std::vector<int>& path) const {
  const SpineHops& shared = spines_between(fabric_index, leaf_src, leaf_dst);
  if (shared.count == 0) return false;
  const SpineHop& hop = spine_hops_[shared.first + spine_pick(src, dst, shared.count)];
  path.push_back(up);
  path.push_back(hop.first);
  path.push_back(hop.second);
  path.push_back(down);
  return true;
}

std::vector<int> RouteFinder::shortest_path(int src, int dst) const {
  const std::size_t nodes = first_neighbour_.size() - 1;
  std::vector<int> parent(nodes, -1);
  std::vector<int> via(nodes, -1);
  std::deque<int> queue{src};
  parent[static_cast<std::size_t>(src)] = src;
  while (!queue.empty() && parent[static_cast<std::size_t>(dst)] < 0) {
    const int node = queue.front();
    queue.pop_front();
    for (std::size_t k = first_neighbour_[static_cast<std::size_t>(node)]; k < first_neighbour_[static_cast<std::size_t>(node) + 1]; ++k) {
      const auto [next, ch] = neighbours_[k];
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
  std::vector<int> out;
  append_path(src, dst, out);
  return out;
}

void RouteFinder::append_path_general(int src, int dst, std::vector<int>& out) const {
  const int direct = may_link(src, dst) ? channel(src, dst) : -1;
  if (direct >= 0) {
    out.push_back(direct);
    return;
  }
  const bool rdma = rdma_between(src, dst);
  for (std::size_t f = 0; f < spec_->fabrics.size(); ++f) {
    if ((roce_[f] != 0) == rdma && fabric_path(f, src, dst, out)) return;
  }
  const std::vector<int> found = shortest_path(src, dst);
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace hcclsim
