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
  // The same, appended to `out` (no allocation per path for callers routing millions).
  void append_path(int src, int dst, std::vector<int>& out) const;
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
  bool fabric_path(std::size_t fabric, int src, int dst, std::vector<int>& path) const;
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
