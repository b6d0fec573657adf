// Reading hardware profiles and topologies from JSON into typed parameters
// (the only place besides the program/workload readers that sees JSON).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "models/params.h"
#include "topologies/platform.h"

namespace hcclsim {

struct HardwareProfile {
  std::string name;
  std::string file;
  NpuParams npu;
  std::map<std::string, ChannelParams> links;  // by link kind: "hccs", "sio", ...
};

HardwareProfile load_profile(const std::string& file);

// A topology file names its profile (relative to itself); `profile_override`
// replaces it. Errors name the file and the JSON path.
//
// The hardware is either listed ("npus", "links", ...) or built from a
// "cluster" object (see topologies/cluster.h):
//   {"kind": "a2", "servers": N, "roce": {...}}
//   {"kind": "a3", "supernodes": N, "servers_per_supernode": M (48), "roce": {...}, "ub": {"l2_switches": K (7)}}
//   "roce": {"npus_per_leaf": 64, "spines": 8, "oversubscription": 1}, every key optional.
// `servers_override` (>= 1; -1 = none) replaces the number of servers of a
// cluster: A2 servers; A3 servers in all, one supernode if at most M, else
// whole supernodes of M. A listed topology refuses it.
TopologySpec load_topology(const std::string& file, const std::optional<std::string>& profile_override = {},
                           int servers_override = -1);

}  // namespace hcclsim
