// Routes over a topology's links, found from the TopologySpec alone, so that
// the SystemC platform and the closed-form estimate (sim/estimate) take the
// same path between two NPUs. A path is a list of channel indices: link i of
// spec.links is channel 2i from a to b and 2i + 1 from b to a.
// Lookups fill a memo (below): one RouteFinder is not for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "topologies/platform_spec.h"

namespace hcclsim {

class RouteFinder {
 public:
  explicit RouteFinder(const TopologySpec& spec);

  // Channel index from node a to node b, or -1 if they are not linked.
  int channel(int a, int b) const;
  // Data and notifies between a and b travel as RDMA writes (different SDMA domains).
  bool rdma_between(int a, int b) const;
  // Channels from src to dst (src != dst): a direct link; else through a
  // fabric (between SDMA domains the "roce" fabric, inside one the others):
  // NPU -> leaf -> (other leaf: a spine both leaves reach, picked by a hash
  // of (src, dst) as ECMP does -> that leaf) -> NPU; else the fewest-hop
  // path over links (ties broken by lowest node id). Empty when no path exists.
  std::vector<int> path(int src, int dst) const;
  // The same, appended to `out` (no allocation per path for callers routing
  // millions). Inline: the common route, between NPUs that no link joins,
  // through the one fabric for their kind of traffic, is taken here without
  // the general search's calls (a pairwise AlltoAll routes a quarter of a
  // million flows at its first point).
  void append_path(int src, int dst, std::vector<int>& out) const {
    if (!leaf_spine_path(src, dst, out)) append_path_general(src, dst, out);
  }
  const TopologySpec& spec() const { return *spec_; }

 private:
  // Through spine k of the spines both leaves reach: the channels leaf -> spine k and spine k -> other leaf.
  using SpineHop = std::pair<int, int>;
  struct SpineHops {
    std::size_t first = 0;  // into spine_hops_
    std::size_t count = 0;
  };
  // An NPU's channels to and from its leaf (-1: not linked).
  struct LeafLinks {
    int up = -2;  // -2: not looked up yet
    int down = -2;
  };
  // (Inline, for leaf_spine_path; the leaves whose spines differ go to spines_path.)
  bool fabric_path(std::size_t fabric_index, int src, int dst, std::vector<int>& path) const {
    const FabricSpec& fabric = spec_->fabrics[fabric_index];
    const int leaf_src = fabric.leaf_of[static_cast<std::size_t>(src)];
    const int leaf_dst = fabric.leaf_of[static_cast<std::size_t>(dst)];
    if (leaf_src < 0 || leaf_dst < 0) return false;
    const int up = leaf_links(fabric_index, src, leaf_src).up;
    const int down = leaf_links(fabric_index, dst, leaf_dst).down;
    if (up < 0 || down < 0) return false;
    if (leaf_src == leaf_dst) {
      path.push_back(up);
      path.push_back(down);
      return true;
    }
    if (static_cast<std::size_t>(leaf_src) >= fabric.spines_of.size()) return false;
    // The hash picks one of the spines both leaves reach.
    const LeafSpines from = leaf_spines(fabric_index, leaf_src);
    const bool dst_listed = static_cast<std::size_t>(leaf_dst) < fabric.spines_of.size();
    const LeafSpines to = dst_listed ? leaf_spines(fabric_index, leaf_dst) : LeafSpines{};
    if (from.list < 0 || from.list != to.list) return spines_path(fabric_index, src, dst, leaf_src, leaf_dst, up, down, path);
    // The same spines, all linked: spines_between's k-th is spine k.
    if (from.count == 0) return false;
    const std::size_t k = spine_pick(src, dst, from.count);
    // (push_back: an initializer list's range insert, or a resize, cost a fifth of routing a flow)
    path.push_back(up);
    path.push_back(leaf_spine_hops_[from.first + k].first);
    path.push_back(leaf_spine_hops_[to.first + k].second);
    path.push_back(down);
    return true;
  }
  // fabric_path between leaves whose spines differ: through one both reach (spines_between).
  bool spines_path(std::size_t fabric_index, int src, int dst, int leaf_src, int leaf_dst, int up, int down,
                   std::vector<int>& path) const;
  void append_path_general(int src, int dst, std::vector<int>& out) const;
  // append_path's route when no link may join src and dst and one fabric
  // carries their kind of traffic: fabric_path's channels, appended, and
  // true; else false and nothing appended.
  bool leaf_spine_path(int src, int dst, std::vector<int>& out) const {
    if (may_link(src, dst) || src < 0 || dst < 0) return false;
    const auto s = static_cast<std::size_t>(src);
    const auto d = static_cast<std::size_t>(dst);
    const std::vector<int>& domain = spec_->sdma_domain_of;
    if (!domain.empty() && (s >= domain.size() || d >= domain.size())) return false;
    const int f = only_fabric_[!domain.empty() && domain[s] != domain[d] ? 1 : 0];
    if (f < 0) return false;
    const std::vector<int>& leaf_of = spec_->fabrics[static_cast<std::size_t>(f)].leaf_of;
    return s < leaf_of.size() && d < leaf_of.size() && fabric_path(static_cast<std::size_t>(f), src, dst, out);
  }
  // ECMP's pick among `count` spines for (src, dst): a fixed mix of the
  // pair (splitmix64's finalizer), so that a pair always takes the same
  // spine and different pairs spread over the spines, modulo count
  // (inline: a pairwise step routes thousands of pairs).
  static std::size_t spine_pick(int src, int dst, std::size_t count) {
    std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                      static_cast<std::uint32_t>(dst);
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    const std::uint64_t hash = x ^ (x >> 31);
    // (A power of two, as most spine counts are, without the division.)
    return static_cast<std::size_t>((count & (count - 1)) == 0 ? hash & (count - 1) : hash % count);
  }
  // A leaf's channels to and from each of its spines, in spines_of order:
  // leaf_spine_hops_[first .. first + count), each (leaf -> spine, spine -> leaf).
  struct LeafSpines {
    int list = -1;  // -1: some spine not linked both ways; else the id of its list of spines
    std::size_t first = 0;
    std::size_t count = 0;
  };
  // (Inline: a route looks up both ends' leaf links and spines.)
  const LeafLinks& leaf_links(std::size_t fabric, int npu, int leaf) const {
    LeafLinks& out = leaf_links_[fabric][static_cast<std::size_t>(npu)];
    if (out.up == -2) out = LeafLinks{channel(npu, leaf), channel(leaf, npu)};
    return out;
  }
  LeafSpines leaf_spines(std::size_t fabric, int leaf) const {  // (a copy: a lookup may add to leaf_spines_)
    const int at = leaf_spines_at_[fabric][static_cast<std::size_t>(leaf)];
    return at >= 0 ? leaf_spines_[static_cast<std::size_t>(at)] : add_leaf_spines(fabric, leaf);
  }
  LeafSpines add_leaf_spines(std::size_t fabric, int leaf) const;
  const SpineHops& spines_between(std::size_t fabric, int leaf_src, int leaf_dst) const;
  std::vector<int> shortest_path(int src, int dst) const;

  // Whether a and b may be linked: b is not an NPU, or an NPU within the
  // range of a's NPU neighbours (a route between NPUs of different servers
  // skips channel()'s search).
  bool may_link(int a, int b) const {
    if (b >= spec_->npus || a < 0 || static_cast<std::size_t>(a) >= npu_neighbours_.size()) return true;
    const auto [lowest, highest] = npu_neighbours_[static_cast<std::size_t>(a)];
    return b >= lowest && b <= highest;
  }

  const TopologySpec* spec_;
  // Per node, its lowest and highest neighbour that is an NPU (none: {1, 0}).
  std::vector<std::pair<int, int>> npu_neighbours_;
  // Node n's (neighbour, channel) pairs, by neighbour:
  // neighbours_[first_neighbour_[n] .. first_neighbour_[n + 1]).
  std::vector<std::size_t> first_neighbour_;
  std::vector<std::pair<int, int>> neighbours_;
  std::vector<char> roce_;  // per fabric: its kind is "roce" (carries the RDMA traffic)
  // The fabric carrying SDMA traffic [0] and RDMA traffic [1] when exactly
  // one does (leaf_spine_path's), else -1.
  int only_fabric_[2] = {-1, -1};
  // Per fabric, per NPU (sized up front), looked up when the NPU is first routed over it.
  mutable std::vector<std::vector<LeafLinks>> leaf_links_;
  // Per fabric, per leaf, looked up when the leaf is first routed through;
  // two leaves with the same list of spines, each linked both ways to all
  // of them, reach spine k through their k-th channels (every leaf/spine
  // fabric hcclsim builds), with no lookup per pair of leaves.
  // Per fabric, per node (sized up front): its index in leaf_spines_ (-1: none yet).
  mutable std::vector<std::vector<int>> leaf_spines_at_;
  mutable std::vector<LeafSpines> leaf_spines_;
  mutable std::vector<SpineHop> leaf_spine_hops_;
  mutable std::vector<std::map<std::vector<int>, int>> spine_lists_;  // per fabric: the distinct lists, numbered
  // Memo of spines_between, per fabric by (source leaf, destination leaf),
  // for the leaves that differ in their spines: every pair of NPUs under
  // the same two leaves picks among the same spines.
  mutable std::vector<std::unordered_map<std::uint64_t, SpineHops>> spines_between_;
  mutable std::vector<SpineHop> spine_hops_;
};

}  // namespace hcclsim
