// The hardware of a topology, elaborated once as SystemC modules: one stream
// engine per NPU, one channel per link direction and per NPU's local memory.
// Workloads run on it one after another; routes are looked up here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/params.h"
#include "topologies/platform_spec.h"
#include "topologies/routes.h"

namespace hcclsim {

// The SystemC modules a platform owns (models/): only their pointers here,
// so that what includes this header does not compile SystemC's.
class Channel;
class FlowNetwork;
class Network;
class TaskEngine;
class WakeClock;

class Platform {
 public:
  explicit Platform(const TopologySpec& spec);
  ~Platform();

  int npus() const { return spec_.npus; }
  // Re-times the elaborated hardware for the next workloads: `spec` must be
  // this platform's topology (the same nodes, links, fabrics, domains and
  // counts of SDMA engines and cores) with other constants, e.g. read from
  // an edited profile (`hcclsim calibrate`). Between runs only. Throws
  // std::invalid_argument naming what differs.
  // A scenario's link states (LinkSpec::down), NPU overrides and jitter
  // change with it (the routes are then found again).
  void set_parameters(const TopologySpec& spec);
  const TopologySpec& spec() const { return spec_; }
  TaskEngine& engine(int npu) { return *engines_.at(static_cast<std::size_t>(npu)); }
  Channel& local_memory(int npu) { return *local_memory_.at(static_cast<std::size_t>(npu)); }
  bool same_chip(int a, int b) const { return a / spec_.npus_per_chip == b / spec_.npus_per_chip; }
  int server_of(int npu) const;
  // Data and notifies between a and b travel as RDMA writes (different SDMA domains).
  bool rdma_between(int a, int b) const;

  // Channels from `src` to `dst` NPU: the local memory channel when equal;
  // else a direct link; else through a fabric (between SDMA domains the
  // "roce" fabric, inside one the others, e.g. "ub"): NPU -> leaf -> (other
  // leaf: a spine both leaves reach, picked by a hash of (src, dst) -> that
  // leaf) -> NPU; else the fewest-hop path over links (ties broken by lowest
  // node id). Cached: each pair is resolved once, and the returned reference
  // stays valid for the platform's life. Throws std::invalid_argument when no
  // path exists. A path crossing a link that is down (a scenario's) is
  // routed around it through the other spines of its fabric, as ECMP over
  // the remaining planes does; where no such spine is left, or the link is
  // not a fabric's, throws OperationFailed (HCCL fails the operation).
  const std::vector<Channel*>& route(int src, int dst);
  // The channels an AIV move from `src`'s memory to `dst`'s crosses: with a
  // profile's npu.aiv.remote_bandwidth, between two NPUs, src's AIV out
  // port, route(src, dst), then dst's AIV in port (every AIV move of an NPU
  // to or from its peers shares them); otherwise route(src, dst). Cached
  // like route().
  const std::vector<Channel*>& aiv_route(int src, int dst);
  // Channel from node a to node b, or nullptr if they are not linked.
  Channel* channel(int a, int b) const;

  // Events so far: stream-engine activations plus channel steps (segment
  // ends and arrivals) or, under the flow model, flows drained and arrived:
  // the work the simulation does.
  std::uint64_t activations() const;
  const std::vector<std::unique_ptr<Channel>>& channels() const { return channels_; }

 private:
  TopologySpec spec_;
  std::unique_ptr<WakeClock> clock_;   // times every channel and engine
  std::unique_ptr<Network> network_;
  FlowNetwork* flows_ = nullptr;       // network_ under the flow model, else null
  std::vector<std::unique_ptr<TaskEngine>> engines_;
  std::vector<std::unique_ptr<Channel>> local_memory_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<Channel>> aiv_ports_;   // npu n: 2n out, 2n + 1 in (empty: no npu.aiv.remote_bandwidth)
  RouteFinder finder_;  // over spec_: channel index 2i / 2i + 1 is link i's direction
  std::unordered_map<std::uint64_t, std::vector<Channel*>> routes_;  // key: src << 32 | dst
  std::unordered_map<std::uint64_t, std::vector<Channel*>> aiv_routes_;
  bool any_down_ = false;  // some link is down: routes are checked against it
  std::vector<char> down_;  // per link, as last set (empty: as elaborated, none down)
  struct RouteCaches {
    std::unordered_map<std::uint64_t, std::vector<Channel*>> routes;
    std::unordered_map<std::uint64_t, std::vector<Channel*>> aiv_routes;
  };
  std::map<std::vector<char>, RouteCaches> route_caches_;  // of the other sets of links down
  // finder_'s path from src to dst around the links that are down, or why not.
  std::vector<int> path_around_down(int src, int dst, const std::vector<int>& path) const;
};

}  // namespace hcclsim
