// What a topology is, as typed data: NPUs, switches, links with their
// parameters, fabrics and SDMA domains. Read by the SystemC platform
// (platform.h) and by the closed-form estimate (sim/estimate), which runs
// without SystemC.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "models/link/network.h"
#include "models/npu/task_timing.h"
#include "models/params.h"

namespace hcclsim {

// A full-duplex link between two nodes (NPUs are nodes 0..npus-1; switches
// follow). Each direction becomes one Channel.
struct LinkSpec {
  int a = 0;
  int b = 0;
  std::string kind;          // "hccs", "sio", "ub", "roce"
  ChannelParams params;
  // A scenario's link down (topologies/scenario.h): no route may cross it.
  // Through a leaf/spine fabric traffic takes another spine both leaves
  // reach (an A3 UB plane lost); elsewhere the operation fails as HCCL's
  // would (Platform::route throws OperationFailed).
  bool down = false;
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
  // The profile's assumed constants, as dotted paths, sorted (HardwareProfile::assumed).
  std::vector<std::string> assumed_constants;
  std::string profile_file;  // the profile they come from, for reports
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
  // A scenario's what-ifs on the NPUs (topologies/scenario.h): the
  // parameters of the NPUs that differ from `npu` (slow ranks), and the
  // jitter of every task's duration. Empty / inactive without a scenario.
  std::map<int, NpuParams> npu_overrides;
  TaskJitter jitter;
};

// The parameters of NPU `npu`: its override, else spec.npu.
inline const NpuParams& npu_params_of(const TopologySpec& spec, int npu) {
  const auto found = spec.npu_overrides.find(npu);
  return found == spec.npu_overrides.end() ? spec.npu : found->second;
}

// The segment model's granularity on every channel, links and on-chip
// memory alike (a flow uses the smallest along its path). Below this a run
// costs an event per few hundred bytes and converges no further (docs/user-guide.md:
// segment size).
constexpr std::uint64_t kMinSegmentBytes = 256;
inline void set_segment_bytes(TopologySpec& spec, std::uint64_t bytes) {
  for (LinkSpec& link : spec.links) link.params.segment_bytes = bytes;
  spec.npu.local_memory.segment_bytes = bytes;
}

// The server NPU `npu` belongs to: spec.server_of, else by npus_per_server.
inline int server_of(const TopologySpec& spec, int npu) {
  return spec.server_of.empty() ? npu / std::max(1, spec.npus_per_server)
                                : spec.server_of.at(static_cast<std::size_t>(npu));
}

}  // namespace hcclsim
