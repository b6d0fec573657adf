// The hardware of a topology, elaborated once as SystemC modules: one stream
// engine per NPU, one channel per link direction and per NPU's local memory.
// Workloads run on it one after another; routes are looked up here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/link/channel.h"
#include "models/link/flow_network.h"
#include "models/link/network.h"
#include "models/npu/task_engine.h"
#include "models/params.h"

namespace hcclsim {

// A full-duplex link between two nodes (NPUs are nodes 0..npus-1; switches
// follow). Each direction becomes one Channel.
struct LinkSpec {
  int a = 0;
  int b = 0;
  std::string kind;          // "hccs", "sio", "ub", "roce"
  ChannelParams params;
};

// A leaf/spine fabric (RoCE between servers, or the UB switches of an A3
// supernode), described so that routes are found without a graph search:
// NPU -> its leaf -> (same leaf: straight down) one spine both leaves reach,
// picked by a hash of (src, dst) as ECMP does -> the other leaf -> NPU.
struct FabricSpec {
  std::string kind;                          // "roce", "ub"
  std::vector<int> leaf_of;                  // per NPU: its leaf node, -1 if not attached
  std::vector<std::vector<int>> spines_of;   // per node: spines a leaf links to (empty otherwise)
};

struct TopologySpec {
  std::string name;
  int npus = 0;
  int switches = 0;
  int npus_per_chip = 1;     // A3: two dies (ranks) per chip
  int npus_per_server = 8;
  NpuParams npu;
  std::vector<LinkSpec> links;
  // Where SDMA reaches: NPUs with the same value move data with SDMA over
  // HCCS / SIO / UB; between different values data and notifies go as RDMA
  // writes through the NICs. Empty: all NPUs in one domain.
  std::vector<int> sdma_domain_of;
  std::vector<int> server_of;               // empty: npu / npus_per_server
  std::vector<FabricSpec> fabrics;          // tried after direct links
  // How transfers share the channels (models/link/network.h): the fluid
  // flow model by default, or segments stepping every channel.
  NetworkModel network = NetworkModel::Flow;
  FlowBatching flow_batching;               // the flow model's one approximation (network.h)
};

class Platform {
 public:
  explicit Platform(const TopologySpec& spec);
  ~Platform();

  int npus() const { return spec_.npus; }
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
  // path exists.
  const std::vector<Channel*>& route(int src, int dst);
  // Channel from node a to node b, or nullptr if they are not linked.
  Channel* channel(int a, int b) const;

  // Events so far: stream-engine activations plus channel steps (segment
  // ends and arrivals) or, under the flow model, flows drained and arrived:
  // the work the simulation does.
  std::uint64_t activations() const;
  const std::vector<std::unique_ptr<Channel>>& channels() const { return channels_; }

 private:
  TopologySpec spec_;
  std::unique_ptr<ChannelClock> clock_;
  std::unique_ptr<Network> network_;
  std::vector<std::unique_ptr<TaskEngine>> engines_;
  std::vector<std::unique_ptr<Channel>> local_memory_;
  std::vector<std::unique_ptr<Channel>> channels_;
  bool fabric_route(const FabricSpec& fabric, int src, int dst, std::vector<Channel*>& path) const;
  std::vector<Channel*> shortest_route(int src, int dst) const;

  std::vector<std::vector<std::pair<int, Channel*>>> adjacency_;  // node -> (neighbour, channel), by neighbour
  std::unordered_map<std::uint64_t, std::vector<Channel*>> routes_;  // key: src << 32 | dst
};

}  // namespace hcclsim
