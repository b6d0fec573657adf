// Routes over a topology's links, found from the TopologySpec alone, so that
// the SystemC platform and the closed-form estimate (sim/estimate) take the
// same path between two NPUs. A path is a list of channel indices: link i of
// spec.links is channel 2i from a to b and 2i + 1 from b to a.
#pragma once

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
  const TopologySpec& spec() const { return *spec_; }

 private:
  bool fabric_path(const FabricSpec& fabric, int src, int dst, std::vector<int>& path) const;
  std::vector<int> shortest_path(int src, int dst) const;

  const TopologySpec* spec_;
  std::vector<std::vector<std::pair<int, int>>> adjacency_;  // node -> (neighbour, channel), by neighbour
};

}  // namespace hcclsim
