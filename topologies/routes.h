// Routes over a topology's links, found from the TopologySpec alone, so that
// the SystemC platform and the closed-form estimate (sim/estimate) take the
// same path between two NPUs. A path is a list of channel indices: link i of
// spec.links is channel 2i from a to b and 2i + 1 from b to a.
// Lookups fill a memo (below): one RouteFinder is not for concurrent use.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
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
  // append_path for n pairs, pair_at(i) giving the i-th (src, dst), src !=
  // dst: each path appended to `out` and its end (out's size after it) to
  // `ends`. The route through one leaf/spine fabric is taken in a loop that
  // writes into room made up front, with the fabrics' arrays in hand; any
  // other pair goes through append_path. (A first AlltoAll point routes
  // 230,000 flows on 1024 A2 NPUs, 280,000 on 99,840 dies; pair by pair,
  // push_back was over a quarter of routing them.)
  template <class PairAt, class Ends, class Channels>
  void append_paths(std::size_t n, const PairAt& pair_at, Ends& ends, Channels& out) const;
  // The routes through the one fabric of each kind of traffic (SDMA, RDMA)
  // whose every NPU hangs off a leaf, linked both ways, and whose leaves
  // all reach the same spines, each both ways (every leaf/spine fabric
  // hcclsim builds), as flat arrays made once and never written after:
  // for callers that route pairs by the hundred thousand (a pairwise
  // AlltoAll's first point), with nothing looked up or memoized per pair.
  // Each pair is routed as append_path routes it.
  class LeafSpineRoutes {
   public:
    // For n pairs (src, dst) of NPUs, each NPU sending at most once and
    // receiving at most once, all of one kind of traffic (0 SDMA, 1 RDMA,
    // set in `kind`) through such a fabric: each pair's hops between its
    // first (src's link to its leaf) and its last (the leaf's link to dst)
    // written on from `out` (2 through the spine ECMP picks, as
    // append_path routes it, or none under one leaf), and its end (the
    // hops written so far) to ends[i]. Returns the hops written, or -1 at
    // the first pair that is routed otherwise (not two NPUs, NPUs a link
    // may join, no such fabric for their kind), of another kind than the
    // first, or whose NPU sends or receives twice. (In locals: through the
    // members, every hop written reloaded them.)
    template <class Pair>
    std::ptrdiff_t middles_of_permutation(const Pair* pairs, std::size_t n, std::size_t* ends, int* out,
                                          int& kind) const {
      if (n == 0) return 0;
      const unsigned npus = npus_;
      const int src0 = pairs[0].from;
      const int dst0 = pairs[0].to;
      if (static_cast<unsigned>(src0) >= npus || static_cast<unsigned>(dst0) >= npus) return -1;
      const int* const domain = domain_;
      const int of_kind = domain != nullptr && domain[src0] != domain[dst0] ? 1 : 0;
      const Kind& k = kinds_[static_cast<std::size_t>(of_kind)];
      if (k.spines == 0) return -1;
      const std::pair<int, int>* const neighbours = neighbours_;
      const int* const leaf_of = k.leaf_of.data();
      const int* const to_spine = k.to_spine.data();
      const int* const from_spine = k.from_spine.data();
      const std::size_t spines = k.spines;
      std::vector<char> seen(2 * static_cast<std::size_t>(npus), 0);
      char* const sent = seen.data();
      char* const received = sent + npus;
      int* at = out;
      for (std::size_t i = 0; i < n; ++i) {
        const int src = pairs[i].from;
        const int dst = pairs[i].to;
        if (static_cast<unsigned>(src) >= npus || static_cast<unsigned>(dst) >= npus || src == dst) return -1;
        const auto [lowest, highest] = neighbours[src];
        if (dst >= lowest && dst <= highest) return -1;  // (may_link)
        if ((domain != nullptr && domain[src] != domain[dst] ? 1 : 0) != of_kind) return -1;
        if (sent[src] != 0 || received[dst] != 0) return -1;
        sent[src] = 1;
        received[dst] = 1;
        const int leaf_src = leaf_of[src];
        const int leaf_dst = leaf_of[dst];
        if (leaf_src != leaf_dst) {
          const std::size_t pick = spine_pick(src, dst, spines);
          at[0] = to_spine[static_cast<std::size_t>(leaf_src) * spines + pick];
          at[1] = from_spine[static_cast<std::size_t>(leaf_dst) * spines + pick];
          at += 2;
        }
        ends[i] = static_cast<std::size_t>(at - out);
      }
      kind = of_kind;
      return at - out;
    }
    // Whether kind (0 SDMA, 1 RDMA) has such a fabric.
    bool has(int kind) const { return kinds_[kind].spines != 0; }
    // Of such a fabric: the NPUs' channels to and from their leaves, and
    // the leaves' channels to and from the spines.
    const std::vector<int>& edge_channels(int kind) const { return kinds_[kind].edges; }
    const std::vector<int>& to_spine_channels(int kind) const { return kinds_[kind].to_spine; }
    const std::vector<int>& from_spine_channels(int kind) const { return kinds_[kind].from_spine; }

   private:
    friend class RouteFinder;
    struct Kind {
      std::size_t spines = 0;  // 0: no such fabric
      std::vector<int> leaf_of;  // per NPU: its leaf's index
      std::vector<int> to_spine, from_spine;  // per leaf index * spines + spine k
      std::vector<int> edges;  // per NPU: its channels to and from its leaf
    };
    unsigned npus_ = 0;
    const std::pair<int, int>* neighbours_ = nullptr;  // RouteFinder's npu_neighbours_
    const int* domain_ = nullptr;  // per NPU; null: one SDMA domain
    std::array<Kind, 2> kinds_;
  };
  // Made on the first call (not for concurrent first calls).
  const LeafSpineRoutes& leaf_spine_routes() const;
  const TopologySpec& spec() const { return *spec_; }
  // ECMP's pick among `count` spines for (src, dst): a fixed mix of the
  // pair (splitmix64's finalizer), so that a pair always takes the same
  // spine and different pairs spread over the spines, modulo count
  // (inline: a pairwise step routes thousands of pairs). Also the pick
  // among the spines left when some are down (Platform::route).
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

 private:
  // Through spine k of the spines both leaves reach: the channels leaf -> spine k and spine k -> other leaf.
  using SpineHop = std::pair<int, int>;
  struct SpineHops {
    std::size_t first = 0;  // into spine_hops_
    std::size_t count = 0;
  };
  // An NPU's end of the routes through a fabric, looked up when the NPU
  // is first routed over it: its leaf, its channels to and from it, and
  // its leaf's spines (one record for each end of a flow, where the
  // lookups by leaf took five arrays and a check of each memo: 99,840
  // dies' first AlltoAll point routes 270,000 flows).
  struct NpuEnd {
    int up = -2;    // channel NPU -> leaf; -1: none, or no leaf; -2: not looked up yet
    int down = -1;  // channel leaf -> NPU
    int leaf = -1;
    int list = -1;  // the leaf's list of spines (LeafSpines::list), or kNoSpinesRow
    std::uint32_t first = 0;  // the leaf's spine hops: leaf_spine_hops_[first .. first + count)
    std::uint32_t count = 0;
  };
  static constexpr int kNoSpinesRow = -3;  // NpuEnd::list of a leaf beyond the fabric's spines_of
  // NpuEnd of NPU n in fabric f (a.ends[n]), looked up.
  const NpuEnd& fill_npu_end(std::size_t f, int n) const;
  // The arrays of fabric f that its routes read (in locals in append_paths' loop).
  struct FabricArrays {
    const int* leaf_of = nullptr;
    std::size_t npus = 0;    // leaf_of's size
    std::size_t leaves = 0;  // spines_of's size
    NpuEnd* ends = nullptr;      // npu_ends_[f]
  };
  FabricArrays arrays_of(std::size_t f) const {
    const FabricSpec& fabric = spec_->fabrics[f];
    return FabricArrays{fabric.leaf_of.data(), fabric.leaf_of.size(), fabric.spines_of.size(), npu_ends_[f].data()};
  }
  // NPU n's end in fabric f (arrays a), looked up the first time.
  const NpuEnd& npu_end(std::size_t f, const FabricArrays& a, int n) const {
    return a.ends[n].up != -2 ? a.ends[n] : fill_npu_end(f, n);
  }
  // The one fabric of each kind of traffic (SDMA [0], RDMA [1]), with the
  // arrays its routes read: fabric -1 when there is none, or when some NPU
  // is not under a leaf of it (append_paths' loop).
  struct TrafficFabric {
    int fabric = -1;
    FabricArrays arrays;
  };
  std::array<TrafficFabric, 2> traffic_fabrics() const {
    std::array<TrafficFabric, 2> out;
    for (std::size_t kind = 0; kind < 2; ++kind) {
      const int f = only_fabric_[kind];
      if (f < 0) continue;
      out[kind].arrays = arrays_of(static_cast<std::size_t>(f));
      if (out[kind].arrays.npus >= static_cast<std::size_t>(spec_->npus)) out[kind].fabric = f;
    }
    return out;
  }
  // The route through fabric f (arrays a) between NPUs src and dst (both
  // below a.npus), written to `at`: NPU -> leaf -> NPU, or through the
  // spine the hash picks when both leaves reach the same spines, each
  // linked both ways (every leaf/spine fabric hcclsim builds): its hops,
  // 2 or 4. 0: no route through the fabric; -1: the leaves' spines differ
  // (spines_path's). (Inlined, forced: a first AlltoAll point routes
  // hundreds of thousands of flows, and as a call its register saves were
  // a fifth of its cost.)
  [[gnu::always_inline]] int fabric_hops(std::size_t f, const FabricArrays& a, int src, int dst, int* at) const {
    const NpuEnd& from = npu_end(f, a, src);
    const NpuEnd& to = npu_end(f, a, dst);
    if (from.up < 0 || to.down < 0) return 0;  // (an NPU under no leaf has neither)
    if (from.leaf == to.leaf) {
      at[0] = from.up;
      at[1] = to.down;
      return 2;
    }
    if (from.list == kNoSpinesRow) return 0;
    if (to.list == kNoSpinesRow) return -1;
    if (from.list < 0 || from.list != to.list) return -1;
    if (from.count == 0) return 0;
    // The same spines, all linked: spines_between's k-th is spine k.
    const std::size_t k = spine_pick(src, dst, from.count);
    const SpineHop* const hops = leaf_spine_hops_.data();  // (after the lookups: they may add to it)
    at[0] = from.up;
    at[1] = hops[from.first + k].first;
    at[2] = hops[to.first + k].second;
    at[3] = to.down;
    return 4;
  }
  // fabric_hops appended to `path`; true when routed (through spines_path when the leaves' spines differ).
  bool fabric_path(std::size_t fabric_index, int src, int dst, std::vector<int>& path) const {
    const FabricArrays a = arrays_of(fabric_index);
    int hops[4];
    const int n = fabric_hops(fabric_index, a, src, dst, hops);
    // (push_back: an initializer list's range insert, or a resize, cost a fifth of routing a flow)
    for (int i = 0; i < n; ++i) path.push_back(hops[i]);
    if (n >= 0) return n > 0;
    const NpuEnd& from = a.ends[src];  // (looked up by fabric_hops)
    const NpuEnd& to = a.ends[dst];
    return spines_path(fabric_index, src, dst, from.leaf, to.leaf, from.up, to.down, path);
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
  // A leaf's channels to and from each of its spines, in spines_of order:
  // leaf_spine_hops_[first .. first + count), each (leaf -> spine, spine -> leaf).
  struct LeafSpines {
    int list = -1;  // -1: some spine not linked both ways; else the id of its list of spines
    std::size_t first = 0;
    std::size_t count = 0;
  };
  int add_leaf_spines(std::size_t fabric, int leaf) const;  // its index in leaf_spines_
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
  mutable std::vector<std::vector<NpuEnd>> npu_ends_;
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
  mutable std::unique_ptr<LeafSpineRoutes> leaf_spine_routes_;  // leaf_spine_routes()'
};

template <class PairAt, class Ends, class Channels>
void RouteFinder::append_paths(std::size_t n, const PairAt& pair_at, Ends& ends, Channels& out) const {
  // leaf_spine_path's tests with what they read in locals (through the
  // members, every path written reloaded them): pairs of NPUs are taken
  // here when every NPU has its SDMA domain and a leaf in the fabric of
  // each kind of traffic; any other pair goes through append_path.
  constexpr std::size_t kMostHops = 4;  // (fabric_hops')
  const int npus = spec_->npus;
  const auto npu_count = static_cast<std::size_t>(npus);
  const std::pair<int, int>* const neighbours = npu_neighbours_.data();  // (one per node: NPUs first)
  const std::vector<int>& domain = spec_->sdma_domain_of;
  const int* const domain_of = domain.size() >= npu_count ? domain.data() : nullptr;  // null: one domain
  const std::array<TrafficFabric, 2> kinds = traffic_fabrics();
  const bool fast = (domain.empty() || domain_of != nullptr) && npu_neighbours_.size() >= npu_count;
  const std::size_t first_end = ends.size();
  ends.resize(first_end + n);
  std::size_t* const end_of = ends.data() + first_end;
  std::vector<int> other;  // a path not through the fabric
  const std::size_t used = out.size();
  out.resize(used + kMostHops * n);
  int* base = out.data();
  int* at = base + used;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [src, dst] = pair_at(i);
    int hops = 0;
    if (fast && static_cast<unsigned>(src) < static_cast<unsigned>(npus) &&
        static_cast<unsigned>(dst) < static_cast<unsigned>(npus) &&
        (dst < neighbours[src].first || dst > neighbours[src].second)) {  // (not may_link)
      const TrafficFabric& k = kinds[domain_of != nullptr && domain_of[src] != domain_of[dst] ? 1 : 0];
      if (k.fabric >= 0) hops = fabric_hops(static_cast<std::size_t>(k.fabric), k.arrays, src, dst, at);
    }
    if (hops > 0) {
      at += hops;
    } else {
      other.clear();
      append_path(src, dst, other);
      const auto written = static_cast<std::size_t>(at - base);
      const std::size_t room = other.size() + kMostHops * (n - i - 1);  // (for this path and the rest)
      if (written + room > out.size()) out.resize(written + room);
      base = out.data();
      at = std::copy(other.begin(), other.end(), base + written);
    }
    end_of[i] = static_cast<std::size_t>(at - base);
  }
  out.resize(static_cast<std::size_t>(at - base));
}

}  // namespace hcclsim
