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
TopologySpec load_topology(const std::string& file, const std::optional<std::string>& profile_override = {});

}  // namespace hcclsim
